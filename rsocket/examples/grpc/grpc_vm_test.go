package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// TestMain checks that no goroutine outlives the tests: gRPC's and each
// rsocket.Conn's end once the server stops and the client closes.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds each test so that a hang fails it with a message
// instead of waiting for go test's timeout; it judges nothing.
const testTimeout = 2 * time.Minute

// startServer serves the echo service on lis until the test ends.
func startServer(t *testing.T, lis net.Listener) {
	t.Helper()
	s := NewServer()
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
}

// rdmaClient starts a server on rxe0 (198.18.0.1) and returns a client
// dialing it from rxe1 (198.18.0.2).
func rdmaClient(t *testing.T, ctx context.Context) *Client {
	t.Helper()
	testenv.Devices(t, 2)
	lis, err := rsocket.Listen(ctx, "tcp", "198.18.0.1:0")
	if err != nil {
		t.Fatalf("rsocket.Listen: %v", err)
	}
	startServer(t, lis)
	cc, err := DialRDMA(lis.Addr().String(), net.ParseIP("198.18.0.2"))
	if err != nil {
		t.Fatalf("DialRDMA: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return NewEchoClient(cc)
}

// TestGRPCUnary makes 100 unary calls of 1 B to 1 MiB over rsockets and
// compares every echo with its request.
func TestGRPCUnary(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := rdmaClient(t, ctx)
	if err := CheckUnary(ctx, c, UnarySizes(100)); err != nil {
		t.Fatal(err)
	}
}

// TestGRPCStream runs a bidirectional stream over rsockets: 1000
// messages each way, checked in order, then CloseSend and io.EOF.
func TestGRPCStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := rdmaClient(t, ctx)
	if err := CheckStream(ctx, c, 1000); err != nil {
		t.Fatal(err)
	}
}

// TestGRPCTCP runs the unary and stream checks over plain TCP on
// loopback: the same program on net.Listen and net.Dialer, which runs
// on any machine.
func TestGRPCTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	startServer(t, lis)
	var d net.Dialer
	cc, err := NewClientConn(lis.Addr().String(), d.DialContext)
	if err != nil {
		t.Fatalf("NewClientConn: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	c := NewEchoClient(cc)
	if err := CheckUnary(ctx, c, UnarySizes(100)); err != nil {
		t.Fatal(err)
	}
	if err := CheckStream(ctx, c, 1000); err != nil {
		t.Fatal(err)
	}
}

func TestUnarySizes(t *testing.T) {
	sizes := UnarySizes(100)
	if len(sizes) != 100 || sizes[0] != 1 || sizes[99] != 1<<20 {
		t.Fatalf("UnarySizes(100) = %d sizes from %d to %d, want 100 from 1 to %d", len(sizes), sizes[0], sizes[len(sizes)-1], 1<<20)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			t.Fatalf("UnarySizes(100)[%d] = %d < [%d] = %d", i, sizes[i], i-1, sizes[i-1])
		}
	}
}
