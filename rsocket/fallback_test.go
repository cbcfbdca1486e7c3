package rsocket_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rsocket"
)

// TestFallbackTCP: an address no RDMA device reaches (loopback: rxe
// cannot serve lo, and a machine without RDMA reaches nothing) is dialed
// over TCP when the Dialer says so, which it logs; without FallbackTCP
// the dial fails with an error matching ErrNoRoute. It runs on the host
// (no RDMA) and in the VM (RDMA, but none on lo).
func TestFallbackTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("tcp"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rsocket.Dial(ctx, "tcp", ln.Addr().String()); !errors.Is(err, rsocket.ErrNoRoute) {
		t.Fatalf("Dial to %v without fallback = %v, want ErrNoRoute", ln.Addr(), err)
	}
	var log bytes.Buffer
	d := rsocket.Dialer{FallbackTCP: true, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("DialContext with FallbackTCP: %v", err)
	}
	defer c.Close()
	if _, ok := c.(*net.TCPConn); !ok {
		t.Fatalf("DialContext with FallbackTCP returned a %T, want *net.TCPConn", c)
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "tcp" {
		t.Fatalf("read %q, %v", b, err)
	}
	if !strings.Contains(log.String(), "connected over TCP") {
		t.Errorf("the fallback was not logged: %q", log.String())
	}
}
