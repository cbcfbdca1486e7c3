package rsocket_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// The test VM's addresses on the fabric of the run (rxe, or siw with
// PURERDMA_FABRIC=siw): servers listen on the first device's, clients
// bind to the second's, so that every connection crosses the veth pair.
var (
	serverHost = testenv.Server().String()
	clientHost = testenv.Client().String()
)

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// listen is a listener on the server's address and a free port; it
// closes with the test.
func listen(t testing.TB, cfg rsocket.Config) *rsocket.Listener {
	t.Helper()
	testenv.NeedFabric(t)
	lc := rsocket.ListenConfig{Config: cfg}
	l, err := lc.Listen(testContext(t), "tcp", net.JoinHostPort(serverHost, "0"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// dialer dials from the client's address.
func dialer(cfg rsocket.Config) *rsocket.Dialer {
	return &rsocket.Dialer{Config: cfg, LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientHost)}}
}

// pair is a connected client and server; both close with the test.
func pair(t testing.TB, cfg rsocket.Config) (client, server *rsocket.Conn) {
	t.Helper()
	l := listen(t, cfg)
	ctx := testContext(t)
	type res struct {
		c   *rsocket.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.AcceptContext(ctx)
		acc <- res{c, err}
	}()
	nc, err := dialer(cfg).DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	client = nc.(*rsocket.Conn)
	t.Cleanup(func() { closeConn(t, client) })
	r := <-acc
	if r.err != nil {
		t.Fatalf("Accept: %v", r.err)
	}
	server = r.c
	t.Cleanup(func() { closeConn(t, server) })
	return client, server
}

// closeConn closes c at the end of a test: an error other than "already
// closed" fails it (a Close that cannot free what the connection holds).
func closeConn(t testing.TB, c *rsocket.Conn) {
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Errorf("Close: %v", err)
	}
}

// echoed writes msg to c (from another goroutine, so that a message
// larger than the buffers cannot deadlock) and reads the peer's echo of
// it back, failing t unless it is the same bytes; peer is the peer's
// output for the failure message.
func echoed(t testing.TB, c *rsocket.Conn, msg []byte, peer string) {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		werr <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("%d bytes: read back: %v\n%s", len(msg), err, peer)
	}
	if err := <-werr; err != nil {
		t.Fatalf("%d bytes: write: %v", len(msg), err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("%d bytes: the echo differs", len(msg))
	}
}
