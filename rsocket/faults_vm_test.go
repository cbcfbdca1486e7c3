package rsocket_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rsocket"
)

// helperEnv makes the test binary the peer TestKilledPeer kills: it
// dials the address in the variable, writes "hi", prints "ready" and
// waits to be killed.
const helperEnv = "RSOCKET_TEST_HELPER"

func helperMain(addr string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dialer(rsocket.Config{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	if _, err := c.Write([]byte("hi")); err != nil {
		fmt.Println("write:", err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	return 0
}

// TestKilledPeer: when the peer process dies, a blocked Read and later
// Writes fail with an error matching ECONNRESET instead of waiting for
// ever (rsockets' infinite retry count would never time the QP out):
// the kernel's rdma_cm reports the peer's end, and the connection
// resets.
//
//purerdma:race
func TestKilledPeer(t *testing.T) {
	l := listen(t, rsocket.Config{})
	ctx := testContext(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), helperEnv+"="+l.Addr().String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	s, err := l.AcceptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(t, s)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("helper said %q", line)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read %q, %v", buf, err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		readErr <- err
	}()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("Read after the peer died = %v, want ECONNRESET", err)
		}
		t.Logf("Read: %v", err)
	case <-ctx.Done():
		t.Fatal("Read still blocked after the peer died")
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Write after the peer died = %v, want ECONNRESET", err)
	}
}

// TestManyConnections connects, exchanges a byte and closes 100 times
// (1000 under make soak) against one listener: afterwards the process
// holds the descriptors and goroutines it had, and the kernel's RDMA
// objects (rdma res: cm_id, qp, cq, pd, mr, ctx) are back where they
// were.
func TestManyConnections(t *testing.T) {
	shortConns := 100
	if os.Getenv(testutils.SoakEnv) == "1" {
		shortConns = 1000
	}
	l := listen(t, rsocket.Config{})
	d := dialer(rsocket.Config{})
	cycle := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// A hang guard, not a time limit: the deadline only ends a
		// connection that stopped, and the error reports both ends.
		hang := time.Now().Add(60 * time.Second)
		srv := make(chan error, 1)
		accepted := make(chan *rsocket.Conn, 1)
		go func() {
			srv <- func() error {
				s, err := l.AcceptContext(ctx)
				if err != nil {
					close(accepted)
					return err
				}
				accepted <- s
				defer s.Close()
				s.SetDeadline(hang)
				b := make([]byte, 1)
				if _, err := io.ReadFull(s, b); err != nil {
					return fmt.Errorf("server read: %w", err)
				}
				_, err = s.Write(b)
				return err
			}()
		}()
		c, err := d.DialContext(ctx, "tcp", l.Addr().String())
		if err != nil {
			return err
		}
		c.SetDeadline(hang)
		if _, err := c.Write([]byte{7}); err != nil {
			c.Close()
			return err
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 7 {
			msg := fmt.Sprintf("echo %v, %v; client: %s", b, err, c.(*rsocket.Conn).Internals())
			if s, ok := <-accepted; ok {
				msg += "; server: " + s.Internals()
			}
			c.Close()
			return fmt.Errorf("%s; %v", msg, <-srv)
		}
		if err := c.Close(); err != nil {
			return err
		}
		return <-srv
	}
	for range 5 {
		if err := cycle(); err != nil {
			t.Fatal(err)
		}
	}
	base := testutils.MeasureUsage(t)
	for i := range shortConns {
		if err := cycle(); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	after := testutils.MeasureUsage(t)
	t.Logf("before: %v; after: %v", base, after)
	testutils.CheckUsage(t, fmt.Sprintf("after %d connections", shortConns), base, after, 16<<20)
}

// TestListenerClose: a listener closed with a connection request pending
// refuses it (the dial fails), Accept returns net.ErrClosed, and an
// Accept blocked at the time wakes with net.ErrClosed.
func TestListenerClose(t *testing.T) {
	l := listen(t, rsocket.Config{})
	ctx := testContext(t)
	accepted := make(chan error, 1)
	acceptCtx, stop := context.WithCancel(ctx)
	defer stop()
	// An AcceptContext that ends with its context, then the pending one.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := l.AcceptContext(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcceptContext with a canceled context = %v", err)
	}
	dialed := make(chan error, 1)
	go func() {
		c, err := dialer(rsocket.Config{}).DialContext(acceptCtx, "tcp", l.Addr().String())
		if err == nil {
			// The request was taken before the close; it must then fail
			// at its first read.
			_, err = c.Read(make([]byte, 1))
			c.Close()
			if err == nil {
				err = errors.New("read succeeded")
			} else {
				err = nil
			}
			dialed <- err
			return
		}
		dialed <- errors.New("refused: " + err.Error())
	}()
	time.Sleep(200 * time.Millisecond) // the request reaches the listener (either outcome is checked)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		// The Accept may have taken the request before the close: then
		// it returned a connection, which is also correct.
		if err != nil {
			t.Fatalf("Accept across Close = %v, want net.ErrClosed", err)
		}
	}
	select {
	case err := <-dialed:
		t.Logf("the pending dial: %v", err)
	case <-ctx.Done():
		t.Fatal("the pending dial did not end after the listener closed")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
}
