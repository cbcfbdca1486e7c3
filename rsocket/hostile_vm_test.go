package rsocket_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// The hostile peer: testdata/hostile.c is an rsockets client written
// with librdmacm and libibverbs (not the rsocket API), so that it can
// break the protocol on purpose, one violation per mode. It is compiled
// when the test first needs it.

// hostileKind is what the Go side must do with a mode's connection.
type hostileKind int

const (
	// hostileEcho: the peer behaves; the Go side echoes its "hello".
	hostileEcho hostileKind = iota
	// hostileData: the peer breaks the protocol after connecting; the
	// accepted connection must be reset with ErrProtocol.
	hostileData
	// hostileConnect: the peer's connect data is bad; the listener must
	// refuse it, log why, and go on accepting.
	hostileConnect
)

// hostileModes are the modes of testdata/hostile.c (its comment says
// what each sends). For hostileConnect, refused is part of the reason
// the listener must log (refusedIWARP on iWARP, where it differs).
var hostileModes = []struct {
	mode         string
	kind         hostileKind
	refused      string
	refusedIWARP string
}{
	{mode: "goodecho", kind: hostileEcho},
	{mode: "overlen", kind: hostileData},
	{mode: "credits", kind: hostileData},
	{mode: "backcredit", kind: hostileData},
	{mode: "farcredit", kind: hostileData},
	{mode: "opcode1", kind: hostileData},
	{mode: "opcode2", kind: hostileData},
	{mode: "opcode3", kind: hostileData},
	{mode: "opcode5", kind: hostileData},
	{mode: "ctrl9", kind: hostileData},
	{mode: "iomap", kind: hostileData},
	{mode: "iomapwrap", kind: hostileData},
	{mode: "noimm", kind: hostileData},
	{mode: "badversion", kind: hostileConnect, refused: "version 2"},
	// The InfiniBand CM pads private data with zeros (56 bytes reach
	// the listener), so 20 bytes read as a target SGL of 0 entries;
	// iWARP's MPA carries the 20 bytes as they are.
	{mode: "short", kind: hostileConnect, refused: "a target SGL of 0 entries", refusedIWARP: "20 bytes, want at least 40"},
	{mode: "sgllen", kind: hostileConnect, refused: "a target SGL of 5 entries"},
	{mode: "credits0", kind: hostileConnect, refused: "no credits"},
	{mode: "flags", kind: hostileConnect, refused: "unknown flags 0x82"}, // IOMAP and 0x80
	{mode: "emptybuf", kind: hostileConnect, refused: "an empty first buffer"},
}

// hostileGuard bounds each wait of the test, so that a hang fails it; no
// outcome depends on how long anything takes within it.
const hostileGuard = 45 * time.Second

// TestHostilePeer runs testdata/hostile.c against a Go Listener in
// every mode, one connection at a time, while one well-behaved Go
// connection stays open on the same listener: a peer that breaks the
// protocol after connecting has its connection reset with an error
// matching ErrProtocol and ECONNRESET (and sees the disconnect); bad
// connect data is refused and logged, and the listener goes on
// accepting; the good connection still echoes both ways at the end.
func TestHostilePeer(t *testing.T) {
	testenv.NeedFabric(t)
	bin := hostileBinary(t)
	ctx := testContext(t)

	logs := &hostileLog{}
	// An iomap table of one entry, for the iomap modes.
	lc := rsocket.ListenConfig{Logger: slog.New(logs), Config: rsocket.Config{IOMapSize: 1}}
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(serverHost, "0"))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	goodC, goodS := hostileDialGood(t, ctx, l)

	for _, m := range hostileModes {
		t.Run(m.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 2*hostileGuard)
			defer cancel()
			acc := hostileAcceptAsync(t, ctx, l)
			peer := startHostile(t, ctx, bin, port, m.mode)
			switch m.kind {
			case hostileEcho:
				s := hostileAccepted(t, ctx, acc, peer)
				defer closeConn(t, s)
				s.SetDeadline(time.Now().Add(hostileGuard))
				got := make([]byte, 5)
				if _, err := io.ReadFull(s, got); err != nil || string(got) != "hello" {
					t.Fatalf("read %q, %v; want \"hello\"\n%s", got, err, peer.output())
				}
				if _, err := s.Write(got); err != nil {
					t.Fatalf("echo: %v\n%s", err, peer.output())
				}
				if n, err := s.Read(got); n != 0 || err != io.EOF {
					t.Errorf("read after the peer's DISCONNECT: %d, %v; want EOF", n, err)
				}
				// The peer waits for its disconnect to complete, which
				// this side's Close does (its rdma_disconnect answers).
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				peer.check(t, m.mode+": ")
			case hostileData:
				s := hostileAccepted(t, ctx, acc, peer)
				defer closeConn(t, s)
				s.SetDeadline(time.Now().Add(hostileGuard))
				if m.mode == "credits" {
					// A Read grants new credits as it frees the buffer,
					// after which more messages are the peer's right: a
					// Write that waits for buffer the peer never grants
					// keeps this side polling without reading, so the
					// 385th message is past the last limit granted.
					_, err := s.Write(make([]byte, 1<<20))
					if !errors.Is(err, rsocket.ErrProtocol) || !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("Write while the peer exceeds its credits: %v; want ErrProtocol and ECONNRESET\n%s", err, peer.output())
					}
				}
				n, err := hostileReadUntilError(s)
				if !errors.Is(err, rsocket.ErrProtocol) || !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("Read: %v (after %d bytes); want an error matching ErrProtocol and ECONNRESET\n%s", err, n, peer.output())
				} else {
					t.Logf("Read after %d bytes: %v", n, err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				peer.check(t, m.mode+": ")
			case hostileConnect:
				if !peer.check(t, m.mode+": ") {
					return // a connection the listener took: no accept waits for a dial
				}
				// The listener goes on: the next connection is a good one.
				c, s := hostileDialAccept(t, ctx, l, acc)
				hostileEchoBothWays(t, c, s)
				refused := m.refused
				if testenv.CurrentFabric().IWARP && m.refusedIWARP != "" {
					refused = m.refusedIWARP
				}
				if rec := logs.find("rsocket: connection refused"); !strings.Contains(rec, refused) {
					t.Errorf("the listener logged %q; want the refusal, naming %q", rec, refused)
				}
			}
		})
	}
	t.Run("good connection", func(t *testing.T) {
		hostileEchoBothWays(t, goodC, goodS)
	})
}

// hostileAcceptor is an AcceptContext running in a goroutine.
type hostileAcceptor struct {
	ch     chan hostileAccept
	cancel context.CancelFunc
	taken  bool
}

type hostileAccept struct {
	c   *rsocket.Conn
	err error
}

// hostileAcceptAsync starts AcceptContext on l. At the end of the test
// it is canceled and waited for; a connection it returned that the test
// did not take is closed.
func hostileAcceptAsync(t *testing.T, ctx context.Context, l *rsocket.Listener) *hostileAcceptor {
	a := &hostileAcceptor{ch: make(chan hostileAccept, 1)}
	ctx, a.cancel = context.WithCancel(ctx)
	go func() {
		c, err := l.AcceptContext(ctx)
		a.ch <- hostileAccept{c, err}
	}()
	t.Cleanup(func() {
		a.cancel()
		if !a.taken {
			if r := <-a.ch; r.c != nil {
				r.c.Close()
			}
		}
	})
	return a
}

// hostileAccepted is the connection a returns; the peer's output goes
// with a failure.
func hostileAccepted(t *testing.T, ctx context.Context, a *hostileAcceptor, peer *hostileProc) *rsocket.Conn {
	t.Helper()
	select {
	case r := <-a.ch:
		a.taken = true
		if r.err != nil {
			t.Fatalf("AcceptContext: %v\n%s", r.err, peer.output())
		}
		return r.c
	case <-ctx.Done():
		t.Fatalf("no connection accepted: %v\n%s", ctx.Err(), peer.output())
	}
	return nil
}

// hostileDialGood is a good Go connection on l, both ends closing with
// the test.
func hostileDialGood(t *testing.T, ctx context.Context, l *rsocket.Listener) (c, s *rsocket.Conn) {
	t.Helper()
	return hostileDialAccept(t, ctx, l, hostileAcceptAsync(t, ctx, l))
}

// hostileDialAccept dials l and takes the accepted end from acc,
// checking that it is that dial's connection.
func hostileDialAccept(t *testing.T, ctx context.Context, l *rsocket.Listener, acc *hostileAcceptor) (c, s *rsocket.Conn) {
	t.Helper()
	nc, err := dialer(rsocket.Config{}).DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c = nc.(*rsocket.Conn)
	t.Cleanup(func() { closeConn(t, c) })
	select {
	case r := <-acc.ch:
		acc.taken = true
		if r.err != nil {
			t.Fatalf("AcceptContext: %v", r.err)
		}
		s = r.c
	case <-ctx.Done():
		t.Fatalf("the dialed connection was not accepted: %v", ctx.Err())
	}
	t.Cleanup(func() { closeConn(t, s) })
	if got, want := s.RemoteAddr().String(), c.LocalAddr().String(); got != want {
		t.Fatalf("accepted a connection from %s; want the dialed one from %s", got, want)
	}
	return c, s
}

// hostileEchoBothWays sends a message each way over the pair.
func hostileEchoBothWays(t *testing.T, c, s *rsocket.Conn) {
	t.Helper()
	dl := time.Now().Add(hostileGuard)
	c.SetDeadline(dl)
	s.SetDeadline(dl)
	defer c.SetDeadline(time.Time{})
	defer s.SetDeadline(time.Time{})
	for _, d := range []struct {
		name     string
		from, to *rsocket.Conn
	}{{"client to server", c, s}, {"server to client", s, c}} {
		msg := []byte("still there: " + d.name)
		if _, err := d.from.Write(msg); err != nil {
			t.Fatalf("%s: Write: %v", d.name, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(d.to, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%s: read %q, %v; want %q", d.name, got, err, msg)
		}
	}
}

// hostileReadUntilError reads c until an error, returning the bytes
// read (a peer's data that came before its violation is delivered
// first).
func hostileReadUntilError(c *rsocket.Conn) (int, error) {
	b := make([]byte, 64<<10)
	total := 0
	for {
		n, err := c.Read(b)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, errors.New("Read returned 0 bytes and no error")
		}
	}
}

// hostileProc is a running testdata/hostile.c.
type hostileProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer // stdout: the one line saying what it sent
	errb bytes.Buffer // stderr: how it ended
	mode string
	once sync.Once
	err  error
}

// startHostile runs the peer in mode against the listener's port; it is
// killed if it outlives ctx.
func startHostile(t *testing.T, ctx context.Context, bin, port, mode string) *hostileProc {
	t.Helper()
	p := &hostileProc{mode: mode}
	p.cmd = exec.CommandContext(ctx, bin, serverHost, port, clientHost, mode)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { p.wait() })
	return p
}

func (p *hostileProc) wait() error {
	p.once.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

// output waits for the peer to end (within its context) and returns
// what it printed.
func (p *hostileProc) output() string {
	p.wait()
	return fmt.Sprintf("hostile %s (%v):\nstdout: %sstderr: %s", p.mode, p.err, p.out.String(), p.errb.String())
}

// check fails t unless the peer exits 0 having printed its line, which
// starts with prefix.
func (p *hostileProc) check(t *testing.T, prefix string) bool {
	t.Helper()
	err := p.wait()
	out := p.out.String()
	if err != nil || !strings.HasPrefix(out, prefix) || strings.Count(out, "\n") != 1 {
		t.Errorf("the peer did not see the reaction it wants: %s", p.output())
		return false
	}
	t.Logf("peer: %s%s", out, p.errb.String())
	return true
}

// hostileLog is a slog.Handler keeping each record's message and
// attributes as one line.
type hostileLog struct {
	mu    sync.Mutex
	lines []string
}

func (r *hostileLog) Enabled(context.Context, slog.Level) bool { return true }

func (r *hostileLog) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *hostileLog) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *hostileLog) WithGroup(string) slog.Handler      { return r }

// find returns the last record starting with msg and removes it, or "".
func (r *hostileLog) find(msg string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.lines) - 1; i >= 0; i-- {
		if l := r.lines[i]; strings.HasPrefix(l, msg) {
			r.lines = append(r.lines[:i], r.lines[i+1:]...)
			return l
		}
	}
	return ""
}

// hostileBinary is testdata/hostile.c, compiled once per test binary.
func hostileBinary(t *testing.T) string {
	t.Helper()
	return buildC(t, "hostile", []string{"/usr/include/rdma/rdma_cma.h", "/usr/include/infiniband/verbs.h"}, "-lrdmacm", "-libverbs")
}
