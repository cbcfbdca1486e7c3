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

	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// cBuilt holds the C peers under testdata/ compiled so far, by name:
// each is compiled once per test binary against Debian's rdma-core, into
// a temporary directory that outlives the tests (the VM that runs them
// is thrown away).
var cBuilt struct {
	sync.Mutex
	path map[string]string
}

// buildC compiles testdata/NAME.c with libs. Missing gcc or headers fail
// the test in the VM, which promises them (scripts/install-deps), and
// skip it elsewhere.
func buildC(t *testing.T, name string, headers []string, libs ...string) string {
	t.Helper()
	cBuilt.Lock()
	defer cBuilt.Unlock()
	if p := cBuilt.path[name]; p != "" {
		return p
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		cUnavailable(t, "gcc is not installed")
	}
	for _, h := range headers {
		if _, err := os.Stat(h); err != nil {
			cUnavailable(t, h+" is missing (librdmacm-dev, libibverbs-dev)")
		}
	}
	dir, err := os.MkdirTemp("", name)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	args := append([]string{"-O2", "-Wall", "-Werror", "-o", bin, "testdata/" + name + ".c"}, libs...)
	if out, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("compiling testdata/%s.c: %v\n%s", name, err, out)
	}
	t.Logf("compiled testdata/%s.c in %v", name, time.Since(start).Round(time.Millisecond))
	if cBuilt.path == nil {
		cBuilt.path = map[string]string{}
	}
	cBuilt.path[name] = bin
	return bin
}

// buildRSEcho is testdata/rsecho.c, the interop tests' C peer (the
// rsocket API of librdmacm).
func buildRSEcho(t *testing.T) string {
	return buildC(t, "rsecho", []string{"/usr/include/rdma/rsocket.h"}, "-lrdmacm")
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
	testenv.NeedFabric(t)
	ctx := testContext(t)
	// librdmacm's acceptor speaks at its first call, so on siw the dial
	// can lose siw's connect race (docs/providers.md, "siw"): it is
	// tried again, against a new server, up to toolrun.MaxAttempts
	// times, as the command tests run such pairs again.
	var srv *cPeer
	var nc net.Conn
	for attempt := 1; ; attempt++ {
		port := strconv.Itoa(7600 + int(cPorts.Add(1)))
		srv = startC(t, "server", serverHost, port)
		if l := srv.line(t); l != "LISTENING" {
			t.Fatalf("rsecho server said %q\n%s", l, srv.output())
		}
		var err error
		nc, err = dialer(rsocket.Config{}).DialContext(ctx, "tcp", net.JoinHostPort(serverHost, port))
		if err == nil {
			break
		}
		var ee *rdmacm.EventError
		if testenv.CurrentFabric().IWARP && attempt < toolrun.MaxAttempts && errors.As(err, &ee) && ee.Event != nil && ee.Event.Type == rdmacm.EventConnectError {
			t.Logf("dial %d lost siw's connect race: %v; again, to a new server", attempt, err)
			continue
		}
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
		echoed(t, c, msg, srv.output())
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
