package rsocket_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// The C peer of the interop tests, testdata/rsecho.c, built once per
// test binary against Debian's librdmacm (its rsocket API).
var rsecho struct {
	once sync.Once
	path string
	err  error
	dir  string
}

func buildRSEcho(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		cUnavailable(t, "gcc is not installed")
	}
	if _, err := os.Stat("/usr/include/rdma/rsocket.h"); err != nil {
		cUnavailable(t, "/usr/include/rdma/rsocket.h is missing (librdmacm-dev)")
	}
	rsecho.once.Do(func() {
		rsecho.dir, rsecho.err = os.MkdirTemp("", "rsecho")
		if rsecho.err != nil {
			return
		}
		rsecho.path = filepath.Join(rsecho.dir, "rsecho")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, gcc, "-O2", "-Wall", "-Werror", "-o", rsecho.path,
			"testdata/rsecho.c", "-lrdmacm").CombinedOutput()
		if err != nil {
			rsecho.err = errors.New("compiling testdata/rsecho.c: " + err.Error() + "\n" + string(out))
		}
	})
	if rsecho.err != nil {
		t.Fatal(rsecho.err)
	}
	return rsecho.path
}

func cUnavailable(t *testing.T, why string) {
	t.Helper()
	if testenv.RequireDevice() {
		t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: %s (scripts/install-deps installs it)", why)
	}
	t.Skip(why)
}

var cPorts atomic.Int32

// cPeer runs rsecho with args; its output lines arrive on lines. The
// process is killed with the test if still running.
type cPeer struct {
	cmd   *exec.Cmd
	lines chan string
	out   bytes.Buffer
	mu    sync.Mutex
	done  chan error
}

func startC(t *testing.T, args ...string) *cPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p := &cPeer{cmd: exec.CommandContext(ctx, buildRSEcho(t), args...), lines: make(chan string, 16), done: make(chan error, 1)}
	p.cmd.Stderr = os.Stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

// line waits for the next output line.
func (p *cPeer) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("rsecho ended without the line expected: %s", p.output())
		}
		return l
	case <-time.After(time.Minute):
		t.Fatalf("no line from rsecho in a minute: %s", p.output())
	}
	return ""
}

func (p *cPeer) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for rsecho's exit, which must be 0 with "OK total" last.
func (p *cPeer) wait(t *testing.T, total int) {
	t.Helper()
	var last string
	for l := range p.lines {
		last = l
	}
	if err := <-p.done; err != nil {
		t.Fatalf("rsecho: %v\n%s", err, p.output())
	}
	p.done <- nil
	if want := "OK " + strconv.Itoa(total); last != want {
		t.Fatalf("rsecho's last line %q, want %q\n%s", last, want, p.output())
	}
}

// The sizes rsecho's client sends, in order.
var rsechoSizes = []int{1, 63, 64, 65, 2048, 4097, 65536, 131072, 300001, 1 << 20}

// TestInteropCClient: C rsockets (librdmacm's rconnect, rsend, rrecv,
// rshutdown) against a Go Listener that echoes: every message comes back
// unchanged, the C side's SHUTDOWN reads as io.EOF, the Go side's
// CloseWrite as the C side's EOF.
func TestInteropCClient(t *testing.T) {
	l := listen(t, rsocket.Config{})
	ctx := testContext(t)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	c := startC(t, "client", serverHost, port, clientHost)
	s, err := l.AcceptContext(ctx)
	if err != nil {
		t.Fatalf("Accept: %v\n%s", err, c.output())
	}
	defer closeConn(t, s)
	n, err := io.Copy(s, s)
	if err != nil {
		t.Fatalf("echo: %v after %d bytes\n%s", err, n, c.output())
	}
	total := 0
	for _, n := range rsechoSizes {
		total += n
	}
	if n != int64(total) {
		t.Fatalf("echoed %d bytes, the client sends %d", n, total)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.wait(t, total)
}

// TestInteropCServer: a Go client against librdmacm's raccept and an
// echoing C server.
func TestInteropCServer(t *testing.T) {
	testenv.Devices(t, 2)
	ctx := testContext(t)
	port := strconv.Itoa(7600 + int(cPorts.Add(1)))
	srv := startC(t, "server", serverHost, port)
	if l := srv.line(t); l != "LISTENING" {
		t.Fatalf("rsecho server said %q\n%s", l, srv.output())
	}
	nc, err := dialer(rsocket.Config{}).DialContext(ctx, "tcp", net.JoinHostPort(serverHost, port))
	if err != nil {
		t.Fatalf("Dial: %v\n%s", err, srv.output())
	}
	c := nc.(*rsocket.Conn)
	defer closeConn(t, c)
	total, seed := 0, byte(0)
	for _, n := range rsechoSizes {
		msg := make([]byte, n)
		for i := range msg {
			msg[i], seed = seed, seed+1
		}
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(msg)
			werr <- err
		}()
		got := make([]byte, n)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("%d bytes: read back: %v\n%s", n, err, srv.output())
		}
		if err := <-werr; err != nil {
			t.Fatalf("%d bytes: write: %v", n, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes: the echo differs", n)
		}
		total += n
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
		t.Fatalf("after CloseWrite: read %d bytes, %v; want EOF", len(b), err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	srv.wait(t, total)
	if !strings.Contains(srv.output(), "LISTENING") {
		t.Fatal("no LISTENING line")
	}
}
