package rdmacm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/examplerun"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestCPeerRC pairs rdmacm with testdata/rcpeer.c, a C program on
// librdmacm and libibverbs, over an RC connection on the fabric under
// test, with C as the server and Go as the client and the other way
// round: private data carrying each side's region, SEND/RECV both ways,
// RDMA WRITE and RDMA READ both ways with every byte checked on the
// side that received it, and a disconnect that both sides see. The
// protocol is in the C file's comment; goRCPeer is its Go half.
func TestCPeerRC(t *testing.T) {
	f := testenv.NeedFabric(t)
	bin := buildRCPeer(t)
	t.Run("C server, Go client", func(t *testing.T) {
		ctx := testContext(t)
		c := startRCPeer(t, bin, "server", serverIP.String())
		port := c.listening(t, ctx)
		id := newID(t, nil, rdmacm.PortSpaceTCP)
		if err := id.Resolve(ctx, clientAP, netip.AddrPortFrom(serverIP, port)); err != nil {
			t.Fatal(err)
		}
		g := newGoRCPeer(t, id, 0x44)
		ev, err := id.ConnectContext(ctx, g.param())
		if err != nil {
			t.Fatalf("connect to the C server: %v\n%s", err, c.output())
		}
		g.unpack(t, ev.PrivateData)
		c.accepted(t, ctx) // the first message after siw's accept gap
		g.client(t, ctx)
		c.wait(t)
		t.Logf("%s: C server, Go client: ping/pong, RDMA WRITE and READ both ways checked", f.Name)
	})
	t.Run("Go server, C client", func(t *testing.T) {
		ctx := testContext(t)
		l, addr := listen(t, rdmacm.PortSpaceTCP)
		c := startRCPeer(t, bin, "client", clientIP.String(), serverIP.String(), strconv.Itoa(int(addr.Port())))
		req, err := l.GetRequest(ctx)
		if err != nil {
			t.Fatalf("GetRequest: %v\n%s", err, c.output())
		}
		s := req.ID
		t.Cleanup(func() { s.Close() })
		g := newGoRCPeer(t, s, 0x22)
		g.unpack(t, req.PrivateData)
		if _, err := s.AcceptContext(ctx, g.param()); err != nil {
			t.Fatalf("accept the C client: %v\n%s", err, c.output())
		}
		c.goAhead(t) // the first message after siw's accept gap
		g.server(t, ctx)
		c.wait(t)
		t.Logf("%s: Go server, C client: ping/pong, RDMA WRITE and READ both ways checked", f.Name)
	})
}

// The offsets of rcpeer.c's region.
const (
	rcBlock    = 4096
	rcWriteDst = 0
	rcReadSrc  = 1 * rcBlock
	rcReadDst  = 2 * rcBlock
	rcWriteSrc = 3 * rcBlock
	rcMsgSend  = 4 * rcBlock
	rcMsgRecv  = 4*rcBlock + 64
	rcMsg      = 64
	rcNRecv    = 4
	rcRegion   = rcMsgRecv + rcNRecv*rcMsg
	rcPData    = 16
)

// goRCPeer is rcpeer.c's protocol in Go, on an ID with its QP.
type goRCPeer struct {
	id     *rdmacm.ID
	mr     *uverbs.MR
	mem    []byte
	remote rdmacm.Remote
}

// newGoRCPeer gives id a QP and a region (closed before the ID), fills
// the region's read source with pattern(srcSeed) and posts the
// receives.
func newGoRCPeer(t testing.TB, id *rdmacm.ID, srcSeed byte) *goRCPeer {
	t.Helper()
	if _, err := id.CreateQP(nil, uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	g := &goRCPeer{id: id, mem: make([]byte, rcRegion)}
	var err error
	// A read's destination needs REMOTE_WRITE on iWARP.
	g.mr, err = id.PD().RegMR(g.mem, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.mr.Close(); err != nil {
			t.Errorf("MR Close: %v", err)
		}
	})
	copy(g.mem[rcReadSrc:], pattern(rcBlock, srcSeed))
	for i := range rcNRecv {
		if err := id.PostRecv(uint64(i), g.mr, rcMsgRecv+i*rcMsg, rcMsg); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// param is the connection parameters with the region in the private
// data, as rcpeer.c sends them.
func (g *goRCPeer) param() *rdmacm.ConnParam {
	pd := make([]byte, rcPData)
	binary.BigEndian.PutUint64(pd, g.mr.Addr())
	binary.BigEndian.PutUint32(pd[8:], g.mr.RKey())
	binary.BigEndian.PutUint32(pd[12:], rcRegion)
	return &rdmacm.ConnParam{PrivateData: pd, ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}
}

func (g *goRCPeer) unpack(t testing.TB, pd []byte) {
	t.Helper()
	if len(pd) < rcPData {
		t.Fatalf("the C side's private data: %d bytes, want at least %d", len(pd), rcPData)
	}
	g.remote = rdmacm.Remote{Addr: binary.BigEndian.Uint64(pd), RKey: binary.BigEndian.Uint32(pd[8:])}
	if n := binary.BigEndian.Uint32(pd[12:]); n != rcRegion {
		t.Fatalf("the C side's region: %d bytes, want %d", n, rcRegion)
	}
}

func (g *goRCPeer) sendComp(t testing.TB, ctx context.Context, what string) {
	t.Helper()
	wc, err := g.id.GetSendComp(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if wc.Status != uverbs.WCSuccess {
		t.Fatalf("%s: %v", what, wc.Status)
	}
}

func (g *goRCPeer) send(t testing.TB, ctx context.Context, msg string) {
	t.Helper()
	n := copy(g.mem[rcMsgSend:], msg)
	if err := g.id.PostSend(100, g.mr, rcMsgSend, n, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	g.sendComp(t, ctx, "send "+msg)
}

func (g *goRCPeer) expect(t testing.TB, ctx context.Context, msg string) {
	t.Helper()
	wc, err := g.id.GetRecvComp(ctx)
	if err != nil {
		t.Fatalf("receive of %q: %v", msg, err)
	}
	if wc.Status != uverbs.WCSuccess || wc.WRID >= rcNRecv {
		t.Fatalf("receive of %q: %+v", msg, wc)
	}
	off := rcMsgRecv + int(wc.WRID)*rcMsg
	if got := string(g.mem[off : off+int(wc.ByteLen)]); got != msg {
		t.Fatalf("received %q, want %q", got, msg)
	}
}

// check compares a block of the region with pattern(seed).
func (g *goRCPeer) check(t testing.TB, off int, seed byte, what string) {
	t.Helper()
	want := pattern(rcBlock, seed)
	if got := g.mem[off : off+rcBlock]; !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: byte %d is %#02x, want %#02x", what, i, got[i], want[i])
	}
}

// act is one side's turn: write, say so, read back the peer's source.
func (g *goRCPeer) act(t testing.TB, ctx context.Context, writeSeed, peerSrcSeed byte, notice string) {
	t.Helper()
	copy(g.mem[rcWriteSrc:], pattern(rcBlock, writeSeed))
	dst := rdmacm.Remote{Addr: g.remote.Addr + rcWriteDst, RKey: g.remote.RKey}
	if err := g.id.PostWrite(101, g.mr, rcWriteSrc, rcBlock, uverbs.SendSignaled, dst); err != nil {
		t.Fatal(err)
	}
	g.sendComp(t, ctx, "RDMA WRITE")
	g.send(t, ctx, "wrote")
	src := rdmacm.Remote{Addr: g.remote.Addr + rcReadSrc, RKey: g.remote.RKey}
	if err := g.id.PostRead(102, g.mr, rcReadDst, rcBlock, uverbs.SendSignaled, src); err != nil {
		t.Fatal(err)
	}
	g.sendComp(t, ctx, "RDMA READ")
	g.check(t, rcReadDst, peerSrcSeed, "RDMA READ of the C side's source")
	g.send(t, ctx, notice)
}

// client is the connecting side's part, after ESTABLISHED.
func (g *goRCPeer) client(t testing.TB, ctx context.Context) {
	t.Helper()
	g.send(t, ctx, "ping")
	g.expect(t, ctx, "pong")
	g.act(t, ctx, 0x11, 0x22, "read")
	g.expect(t, ctx, "wrote")
	g.check(t, rcWriteDst, 0x33, "the C server's RDMA WRITE")
	g.expect(t, ctx, "done")
	if err := g.id.DisconnectContext(ctx); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
}

// server is the accepting side's part, after ESTABLISHED.
func (g *goRCPeer) server(t testing.TB, ctx context.Context) {
	t.Helper()
	g.expect(t, ctx, "ping")
	g.send(t, ctx, "pong")
	g.expect(t, ctx, "wrote")
	g.check(t, rcWriteDst, 0x11, "the C client's RDMA WRITE")
	g.expect(t, ctx, "read")
	g.act(t, ctx, 0x33, 0x44, "done")
	if err := g.id.DisconnectContext(ctx); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
}

// buildRCPeer compiles testdata/rcpeer.c against Debian's librdmacm and
// libibverbs, once per test binary (examplerun.CBinary: missing gcc or
// headers fail the test in the VM and skip it elsewhere).
func buildRCPeer(t testing.TB) string {
	return examplerun.CBinary(t, "testdata/rcpeer.c", []string{"-O2", "-Wall", "-Werror"}, "-lrdmacm", "-libverbs")
}

// rcPeerProc is a running rcpeer.
type rcPeerProc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    bytes.Buffer
	port   chan uint16   // the LISTENING line's port
	acc    chan struct{} // closed at the ACCEPTED line
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// startRCPeer runs rcpeer with args for at most a minute; the test's end
// waits for it (killing it if it still runs).
func startRCPeer(t testing.TB, bin string, args ...string) *rcPeerProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	p := &rcPeerProc{cmd: exec.CommandContext(ctx, bin, args...), cancel: cancel,
		port: make(chan uint16, 1), acc: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{p}
	stdout, err := p.cmd.StdoutPipe()
	if err == nil {
		p.stdin, err = p.cmd.StdinPipe()
	}
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if line == "ACCEPTED" {
				close(p.acc)
			}
			if s, ok := strings.CutPrefix(line, "LISTENING "); ok {
				if n, err := strconv.ParseUint(s, 10, 16); err == nil {
					p.port <- uint16(n)
				}
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cancel()
		<-p.done
	})
	return p
}

type lockedWriter struct{ p *rcPeerProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func (p *rcPeerProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// listening waits for the C server's port.
func (p *rcPeerProc) listening(t testing.TB, ctx context.Context) uint16 {
	t.Helper()
	select {
	case port := <-p.port:
		return port
	case <-p.done:
		t.Fatalf("the C server exited before listening: %v\n%s", p.err, p.output())
	case <-ctx.Done():
		t.Fatalf("the C server did not listen: %v\n%s", ctx.Err(), p.output())
	}
	return 0
}

// accepted waits until the C server's rdma_accept has returned (its
// ACCEPTED line): siw can leave a message that arrives earlier unread.
func (p *rcPeerProc) accepted(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-p.acc:
	case <-p.done:
		t.Fatalf("the C server exited before accepting: %v\n%s", p.err, p.output())
	case <-ctx.Done():
		t.Fatalf("the C server did not accept: %v\n%s", ctx.Err(), p.output())
	}
}

// goAhead tells the C client to send its first message, once this
// side's accept has returned.
func (p *rcPeerProc) goAhead(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		t.Fatalf("tell the C client to go: %v\n%s", err, p.output())
	}
}

// wait waits for the C side's exit and checks it succeeded.
func (p *rcPeerProc) wait(t testing.TB) {
	t.Helper()
	<-p.done
	out := p.output()
	if p.err != nil || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("the C side: %v\n%s", p.err, out)
	}
}
