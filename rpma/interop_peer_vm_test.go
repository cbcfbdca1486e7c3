package rpma_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// Helpers of the interoperability tests: building and running
// testdata/rpmapeer.c, the private data of librpma's examples, and the
// data pattern both sides use.

const (
	cPeerTimeout   = 2 * time.Minute  // the whole C process
	cPeerStartWait = 30 * time.Second // until a C server listens
	cPeerExitWait  = 30 * time.Second // until a C peer exits once the Go side is done
)

// interopNative reports whether the device executes RDMA FLUSH and
// ATOMIC_WRITE: rxe on Linux 6.12 (6.1's does neither, nor does siw).
func interopNative() bool {
	return strings.HasPrefix(os.Getenv("PURERDMA_VM"), "6.12") && !testenv.CurrentFabric().IWARP
}

// buildRPMAPeer compiles testdata/rpmapeer.c against Debian's librpma.
// Missing gcc or headers fail the test in the VM, which promises them
// (scripts/install-deps), and skip it elsewhere.
func buildRPMAPeer(t testing.TB) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		interopUnavailable(t, "gcc is not installed")
	}
	for _, h := range []string{"/usr/include/librpma.h", "/usr/include/infiniband/verbs.h"} {
		if _, err := os.Stat(h); err != nil {
			interopUnavailable(t, h+" is missing (librpma-dev, libibverbs-dev)")
		}
	}
	bin := filepath.Join(t.TempDir(), "rpmapeer")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gcc, "-O2", "-Wall", "-Werror", "-o", bin, "testdata/rpmapeer.c",
		"-lrpma", "-libverbs").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling testdata/rpmapeer.c: %v\n%s", err, out)
	}
	return bin
}

func interopUnavailable(t testing.TB, why string) {
	t.Helper()
	if testenv.RequireDevice() {
		t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: %s (scripts/install-deps installs it)", why)
	}
	t.Skip(why)
}

// cPeer is a running rpmapeer.
type cPeer struct {
	name      string
	cmd       *exec.Cmd
	out       cOutput
	exited    chan struct{}
	err       error // cmd.Wait's, once exited is closed
	listening chan struct{}
	up        chan struct{} // closed at a C server's ESTABLISHED line
	stdin     io.WriteCloser
	shown     bool // a failure message showed the output
}

// cOutput collects the peer's stdout and stderr and notices its
// LISTENING and ESTABLISHED lines.
type cOutput struct {
	mu            sync.Mutex
	buf           bytes.Buffer
	listening, up chan struct{}
	seen, seenUp  bool
}

func (o *cOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	if !o.seen && strings.Contains(o.buf.String(), "LISTENING\n") {
		o.seen = true
		close(o.listening)
	}
	if !o.seenUp && strings.Contains(o.buf.String(), "ESTABLISHED\n") {
		o.seenUp = true
		close(o.up)
	}
	return len(p), nil
}

func (o *cOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// startCPeer runs `rpmapeer role serverAddr port scenario`. If it exits
// with an error, failed is called (to end the Go side's waits at once).
// The process is killed, if it still runs, when the test ends, and its
// output is logged if the test failed.
func startCPeer(t testing.TB, bin, role, port, scenario string, failed context.CancelCauseFunc) *cPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cPeerTimeout)
	p := &cPeer{name: fmt.Sprintf("C %s (%s)", role, scenario), exited: make(chan struct{}),
		listening: make(chan struct{}), up: make(chan struct{})}
	p.out.listening, p.out.up = p.listening, p.up
	p.cmd = exec.CommandContext(ctx, bin, role, serverAddr, port, scenario)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.WaitDelay = 5 * time.Second
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatalf("starting %s: %v", p.name, err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if p.err != nil {
			failed(fmt.Errorf("%s: %v", p.name, p.err))
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		cancel() // kills it if it still runs
		<-p.exited
		if t.Failed() && !p.shown {
			t.Logf("%s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// waitListening waits for a C server's LISTENING line.
func (p *cPeer) waitListening(t testing.TB) {
	t.Helper()
	p.shown = true // by the failures below; reset when it listens
	select {
	case <-p.listening:
		p.shown = false
	case <-p.exited:
		t.Fatalf("%s exited before it listened: %v\n%s", p.name, p.err, p.out.String())
	case <-time.After(cPeerStartWait):
		t.Fatalf("%s did not listen within %v\n%s", p.name, cPeerStartWait, p.out.String())
	}
}

// A client that only reads or writes starts only once the server saw
// its connection established, for two reasons. It must not disconnect
// before that: the server's IB CM drops an RTU that arrives after the
// DREQ, and the server's first event is then a close (rdma_cm reports
// DISCONNECTED in the CONNECT state). And on siw its first frame must
// not reach the server before the server's QP has taken the socket,
// which siw does just before it reports the connection established: a
// frame that comes earlier stays unread until more data comes, and a
// client that waits for its read or flush sends none (siw's accept
// race, docs/testing.md). The C server prints ESTABLISHED, which
// waitEstablished waits for; a C client waits for a line on stdin,
// which serverUp writes.

// waitEstablished waits for a C server's ESTABLISHED line.
func (p *cPeer) waitEstablished(t testing.TB) {
	t.Helper()
	select {
	case <-p.up:
	case <-p.exited:
		p.shown = true
		t.Fatalf("%s exited before its connection was established: %v\n%s", p.name, p.err, p.out.String())
	case <-time.After(cPeerExitWait):
		p.shown = true
		t.Fatalf("%s did not report its connection established within %v\n%s", p.name, cPeerExitWait, p.out.String())
	}
}

// serverUp tells a C client that the Go server's connection is
// established.
func (p *cPeer) serverUp(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "established\n"); err != nil {
		t.Fatalf("telling %s the server is up: %v", p.name, err)
	}
}

// finish waits for the peer to exit and returns its OK line, which must
// start with want; a failure, a missing line or a peer that does not end
// fails the test with its output.
func (p *cPeer) finish(t testing.TB, want string) string {
	t.Helper()
	p.shown = true // by the failures below
	select {
	case <-p.exited:
	case <-time.After(cPeerExitWait):
		t.Fatalf("%s did not exit within %v\n%s", p.name, cPeerExitWait, p.out.String())
	}
	out := p.out.String()
	if p.err != nil {
		t.Fatalf("%s: %v\n%s", p.name, p.err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, want) {
			t.Logf("%s: %s", p.name, l)
			return l
		}
	}
	t.Fatalf("%s exited 0 without a line %q:\n%s", p.name, want, out)
	return ""
}

// commonData is struct common_data of librpma's examples, the private
// data both sides send: the offset of the data in the region, then the
// region's descriptor and the peer configuration's, in 24 bytes.
type commonData struct {
	dataOffset uint16
	mrDesc     []byte
	pcfgDesc   []byte
}

const (
	commonDataSize     = 28
	commonDataDescSize = 24
)

func (d commonData) bytes(t testing.TB) []byte {
	t.Helper()
	if len(d.mrDesc)+len(d.pcfgDesc) > commonDataDescSize {
		t.Fatalf("descriptors of %d+%d bytes do not fit in %d", len(d.mrDesc), len(d.pcfgDesc), commonDataDescSize)
	}
	b := make([]byte, commonDataSize)
	binary.LittleEndian.PutUint16(b, d.dataOffset)
	b[2], b[3] = byte(len(d.mrDesc)), byte(len(d.pcfgDesc))
	copy(b[4:], d.mrDesc)
	copy(b[4+len(d.mrDesc):], d.pcfgDesc)
	return b
}

// parseCommonData decodes the other side's private data (which the
// transport may have padded with zeros).
func parseCommonData(t testing.TB, b []byte) commonData {
	t.Helper()
	if len(b) < commonDataSize {
		t.Fatalf("private data of %d bytes, want at least %d: %x", len(b), commonDataSize, b)
	}
	m, p := int(b[2]), int(b[3])
	if m+p > commonDataDescSize {
		t.Fatalf("private data %x: descriptor sizes %d+%d", b[:commonDataSize], m, p)
	}
	return commonData{dataOffset: binary.LittleEndian.Uint16(b), mrDesc: b[4 : 4+m], pcfgDesc: b[4+m : 4+m+p]}
}

// patByte is the data pattern of rpmapeer.c: seed + 7i + i/256, mod 256.
func patByte(seed byte, i int) byte { return seed + byte(7*i) + byte(i>>8) }

func fillPat(b []byte, seed byte) {
	for i := range b {
		b[i] = patByte(seed, i)
	}
}

// checkPat: b[i] is patByte(seed, first+i).
func checkPat(t testing.TB, what string, b []byte, seed byte, first int) {
	t.Helper()
	for i := range b {
		if want := patByte(seed, first+i); b[i] != want {
			t.Fatalf("%s: byte %d is %#x, want %#x", what, i, b[i], want)
		}
	}
}

func checkZero(t testing.TB, what string, b []byte) {
	t.Helper()
	if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("%s: byte %d is not 0: nothing should have written there", what, i)
	}
}

// interopCfg is a connection configuration with a resolution timeout
// generous enough for the emulated VM.
func interopCfg(t testing.TB) *rpma.ConnCfg {
	t.Helper()
	cfg := rpma.NewConnCfg()
	if err := cfg.SetTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func expectEvent(t testing.TB, ctx context.Context, c *rpma.Conn, want rpma.ConnEvent) {
	t.Helper()
	ev, err := c.NextEvent(ctx)
	if err != nil {
		t.Fatalf("NextEvent (want %v): %v (%v)", want, err, context.Cause(ctx))
	}
	if ev != want {
		t.Fatalf("NextEvent = %v, want %v", ev, want)
	}
}

// closeWithTest closes c when the test ends if the test has not (a
// second Close only reports ErrClosed).
func closeWithTest(t testing.TB, c *rpma.Conn) {
	t.Cleanup(func() { c.Close() })
}

// goAccept takes the next request on ep, lets before post receives
// (before may be nil), accepts it with pdata and waits until it is
// established.
func goAccept(t testing.TB, ctx context.Context, ep *rpma.Ep, cfg *rpma.ConnCfg, pdata []byte, before func(*rpma.ConnReq)) *rpma.Conn {
	t.Helper()
	req, err := ep.NextConnReq(ctx, cfg)
	if err != nil {
		t.Fatalf("NextConnReq: %v (%v)", err, context.Cause(ctx))
	}
	if before != nil {
		before(req)
	}
	c, err := req.Connect(pdata)
	if err != nil {
		t.Fatalf("accepting: %v", err)
	}
	closeWithTest(t, c)
	expectEvent(t, ctx, c, rpma.ConnEstablished)
	return c
}

// goConnect connects to serverAddr:port, letting before post receives
// first, and waits until the connection is established.
func goConnect(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cfg *rpma.ConnCfg, pdata []byte, before func(*rpma.ConnReq)) *rpma.Conn {
	t.Helper()
	req, err := cp.NewConnReq(ctx, serverAddr, port, cfg)
	if err != nil {
		t.Fatalf("NewConnReq(%s:%s): %v (%v)", serverAddr, port, err, context.Cause(ctx))
	}
	if before != nil {
		before(req)
	}
	c, err := req.Connect(pdata)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	closeWithTest(t, c)
	expectEvent(t, ctx, c, rpma.ConnEstablished)
	return c
}

// endActive disconnects, waits for the close and closes c.
func endActive(t testing.TB, ctx context.Context, c *rpma.Conn) {
	t.Helper()
	if err := c.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	expectEvent(t, ctx, c, rpma.ConnClosed)
	if err := c.Close(); err != nil {
		t.Fatalf("conn Close: %v", err)
	}
}

// endPassive waits for the other side's disconnect and closes c.
func endPassive(t testing.TB, ctx context.Context, c *rpma.Conn) {
	t.Helper()
	expectEvent(t, ctx, c, rpma.ConnClosed)
	if err := c.Close(); err != nil {
		t.Fatalf("conn Close: %v", err)
	}
}

// nextWC waits for cq's next completion, which must have succeeded.
func nextWC(t testing.TB, ctx context.Context, cq *rpma.CQ, what string) uverbs.WorkCompletion {
	t.Helper()
	wc := waitWC(t, ctx, cq)
	if err := rpma.CompletionErr(&wc); err != nil {
		t.Fatalf("%s: completion %+v: %v", what, wc, err)
	}
	return wc
}

func expectWC(t testing.TB, ctx context.Context, cq *rpma.CQ, wrid uint64, op uverbs.WCOpcode, what string) uverbs.WorkCompletion {
	t.Helper()
	wc := nextWC(t, ctx, cq, what)
	if wc.WRID != wrid || wc.Opcode != op {
		t.Fatalf("%s: completion WRID %d opcode %v, want %d and %v", what, wc.WRID, wc.Opcode, wrid, op)
	}
	return wc
}

func mustOK(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
