package rpma_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The interoperability tests run testdata/rpmapeer.c, a program on
// Debian's C librpma 1.2.0, as the other side of a Go rpma connection:
// each scenario runs with a C server and a Go client, and with a Go
// server and a C client. The servers listen on rxe0's address, the
// clients reach it through rxe1. rpmapeer.c's comment describes each
// scenario; the Go halves below do the same with the same constants.
//
// C librpma 1.2.0 always flushes by reading after the writes (so its
// flush completions are RDMA reads) and registers flush targets with
// remote read only; Debian builds it without native ATOMIC_WRITE (its
// atomic write is an inline RDMA write on both kernels).

// The scenarios' constants, as in rpmapeer.c.
const (
	interopRegion = 4096 // every region's size

	readSeed = 0x5a
	readOff  = 256
	readLen  = 1024
	readDst  = 100

	writeOff   = 512
	writeLen   = 1024
	writeSeedA = 0xa1
	writeSeedB = 0xb2

	atomicOff = 64

	nMsg         = 3
	msgSlot      = 512
	msgSendSlot  = 1024
	msgServerOff = 128
	msgClientOff = 640
	msgRecvCtx   = 10
	srqRecvCtx   = 20
)

var atomicVal = [8]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}

type msgKind int

const (
	mSend msgKind = iota
	mSendImm
	mWriteImm
)

type peerMsg struct {
	kind msgKind
	len  int
	seed byte
	imm  uint32
}

var (
	clientMsgs = [nMsg]peerMsg{{mSend, 100, 0x11, 0}, {mSendImm, 200, 0x12, 0x12345678}, {mWriteImm, 300, 0x13, 0x9abcdef0}}
	serverMsgs = [nMsg]peerMsg{{mSend, 110, 0x21, 0}, {mSendImm, 210, 0x22, 0x0badf00d}, {mWriteImm, 310, 0x23, 0xfeedface}}
	srqMsgs    = [nMsg]peerMsg{{mSend, 64, 0x31, 0}, {mSendImm, 128, 0x32, 0x5151aaaa}, {mSendImm, 0, 0, 0x77}}
)

// interopPort hands each C server its own port (the VM is private to
// this test binary, and C librpma cannot say which port 0 picked).
var interopPort atomic.Int32

func nextInteropPort() string { return strconv.Itoa(int(7470 + interopPort.Add(1))) }

// interopScenario is the Go half of one rpmapeer scenario. server runs
// on a listening endpoint whose C client is already started; client
// connects to a listening C server on port.
type interopScenario struct {
	name   string
	server func(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer)
	client func(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer)
	// cClientLine, if set, checks the C client's OK line.
	cClientLine func(t testing.TB, line string)
}

var interopScenarios = []interopScenario{
	{"read", readServer, readClient, nil},
	{"write", writeServer, writeClient, nil},
	{"atomic", atomicServer, atomicClient, checkCAtomicWrite},
	{"msg", msgServer, msgClient, nil},
	{"srq", srqServer, srqClient, nil},
}

// TestInteropC runs every scenario both ways: C server with Go client,
// Go server with C client. Each side checks what it received; the C
// side's verdict is its exit status and its OK line.
func TestInteropC(t *testing.T) {
	testenv.Devices(t, 2)
	bin := buildRPMAPeer(t)
	for _, sc := range interopScenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.name == "msg" || sc.name == "srq" {
				testenv.NotIWARP(t, "the scenario sends with immediate data (C librpma fails the same way on siw)")
			}
			t.Run("C server, Go client", func(t *testing.T) {
				interopAttempts(t, "C server, Go client", func(a *toolrun.Attempt, ctx context.Context, failed context.CancelCauseFunc) {
					port := nextInteropPort()
					c := startCPeer(a, bin, "server", port, sc.name, failed)
					c.waitListening(a)
					a.Watch(mustAtoi(a, port))
					cp := newPeer(a, ctx, rpma.Remote)
					sc.client(a, ctx, cp, port, c)
					c.finish(a, "OK "+sc.name+" server")
				})
			})
			t.Run("Go server, C client", func(t *testing.T) {
				interopAttempts(t, "Go server, C client", func(a *toolrun.Attempt, ctx context.Context, failed context.CancelCauseFunc) {
					sp := newPeer(a, ctx, rpma.Local)
					ep, err := sp.Listen(ctx, serverAddr, "0")
					if err != nil {
						a.Fatalf("Listen: %v", err)
					}
					a.Cleanup(func() { ep.Close() })
					a.Watch(int(ep.Addr().Port()))
					c := startCPeer(a, bin, "client", strconv.Itoa(int(ep.Addr().Port())), sc.name, failed)
					sc.server(a, ctx, sp, ep, c)
					line := c.finish(a, "OK "+sc.name+" client")
					if sc.cClientLine != nil {
						sc.cClientLine(a, line)
					}
				})
			})
		})
	}
	t.Run("FlushNative to a C server", func(t *testing.T) {
		interopAttempts(t, "FlushNative to a C server", func(a *toolrun.Attempt, ctx context.Context, failed context.CancelCauseFunc) {
			nativeFlushToC(a, ctx, failed, bin)
		})
	})
}

// interopAttempts runs one side's pairing of a scenario through
// toolrun.Attempts: siw's accept race (docs/testing.md) can strand the
// connecting side's first message at the accepting side, C's or Go's,
// and a stranded run is run again on a new port. body's context ends
// when the C peer fails (failed), the watchdog ends the run, or after
// 30 s.
func interopAttempts(t *testing.T, what string, body func(a *toolrun.Attempt, ctx context.Context, failed context.CancelCauseFunc)) {
	t.Helper()
	toolrun.Attempts(t, what, cPeerTimeout, testenv.CurrentFabric().IWARP, func(a *toolrun.Attempt) {
		ctx, cancel := context.WithTimeout(a.Context(), 30*time.Second)
		a.Cleanup(cancel)
		ctx, failed := context.WithCancelCause(ctx)
		a.Cleanup(func() { failed(nil) })
		body(a, ctx, failed)
	})
}

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ---- read ----

func readServer(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer) {
	mr := regMR(t, sp, interopRegion, rpma.UsageReadSrc)
	fillPat(mr.Bytes(), readSeed)
	pdata := commonData{readOff, mr.Descriptor(), rpma.NewPeerCfg().Descriptor()}.bytes(t)
	c := goAccept(t, ctx, ep, nil, pdata, nil)
	cc.serverUp(t)
	endPassive(t, ctx, c)
	checkPat(t, "the region after the connection", mr.Bytes(), readSeed, 0)
}

func readClient(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer) {
	dst := regMR(t, cp, interopRegion, rpma.UsageReadDst)
	c := goConnect(t, ctx, cp, port, interopCfg(t), nil, nil)
	cs.waitEstablished(t) // before the first operation (waitEstablished says why)
	cd := parseCommonData(t, c.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	pcfg, err := rpma.PeerCfgFromDescriptor(cd.pcfgDesc)
	mustOK(t, "PeerCfgFromDescriptor", err)
	if rmr.Size() != interopRegion || rmr.Usage != rpma.UsageReadSrc || rmr.FlushType() != 0 || cd.dataOffset != readOff ||
		pcfg.DirectWriteToPMem() || len(cd.pcfgDesc) != rpma.PeerCfgDescriptorSize {
		t.Fatalf("server's %v, data offset %d, peer cfg %x; want %d bytes READ_SRC, offset %d, one byte 0",
			rmr, cd.dataOffset, cd.pcfgDesc, interopRegion, readOff)
	}
	mustOK(t, "Read", c.Read(dst, readDst, rmr, int(cd.dataOffset), readLen, rpma.CompletionAlways, 1))
	wc := expectWC(t, ctx, c.CQ(), 1, uverbs.WCRDMARead, "read")
	if wc.ByteLen != readLen {
		t.Errorf("read completion of %d bytes, want %d", wc.ByteLen, readLen)
	}
	checkPat(t, "read data", dst.Bytes()[readDst:readDst+readLen], readSeed, readOff)
	checkZero(t, "before the read data", dst.Bytes()[:readDst])
	checkZero(t, "after the read data", dst.Bytes()[readDst+readLen:])
	endActive(t, ctx, c)
}

// ---- write and flush ----

func writeServer(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer) {
	mr := regMR(t, sp, interopRegion, rpma.UsageWriteDst|rpma.UsageFlushVisibility|rpma.UsageFlushPersistent)
	pcfg := rpma.NewPeerCfg()
	pcfg.SetDirectWriteToPMem(true)
	// On 6.12 the descriptor has purerdma's second byte; C reads the
	// first only.
	pcfg.SetNativeFlush(sp.NativeFlush())
	if n, native := len(pcfg.Descriptor()), sp.NativeFlush(); native != interopNative() || (n == 2) != native {
		t.Fatalf("peer cfg descriptor of %d bytes with native flush %v on Linux %s", n, native, os.Getenv("PURERDMA_VM"))
	}
	pdata := commonData{writeOff, mr.Descriptor(), pcfg.Descriptor()}.bytes(t)
	c := goAccept(t, ctx, ep, nil, pdata, nil)
	cc.serverUp(t)
	endPassive(t, ctx, c)
	b := mr.Bytes()
	checkPat(t, "first write (flushed to visibility)", b[writeOff:writeOff+writeLen], writeSeedA, 0)
	checkPat(t, "second write (flushed to persistence)", b[writeOff+writeLen:writeOff+2*writeLen], writeSeedB, 0)
	checkZero(t, "before the writes", b[:writeOff])
	checkZero(t, "after the writes", b[writeOff+2*writeLen:])
}

// writeClient writes and flushes to a C server, which always gets the
// emulated flush: its peer cfg descriptor is C's single byte, so
// FlushAuto reads after the writes on either kernel.
func writeClient(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer) {
	src := regMR(t, cp, interopRegion, rpma.UsageWriteSrc)
	fillPat(src.Bytes()[:writeLen], writeSeedA)
	fillPat(src.Bytes()[writeLen:2*writeLen], writeSeedB)
	c := goConnect(t, ctx, cp, port, interopCfg(t), nil, nil)
	cs.waitEstablished(t) // before the first operation (waitEstablished says why)
	cd := parseCommonData(t, c.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	pcfg, err := rpma.PeerCfgFromDescriptor(cd.pcfgDesc)
	mustOK(t, "PeerCfgFromDescriptor", err)
	const flushBoth = rpma.UsageFlushVisibility | rpma.UsageFlushPersistent
	if rmr.FlushType() != flushBoth || rmr.Usage != rpma.UsageWriteDst|flushBoth || !pcfg.DirectWriteToPMem() ||
		pcfg.NativeFlush() || cd.dataOffset != writeOff {
		t.Fatalf("server's %v, peer cfg %x, data offset %d; want WRITE_DST and both flushes, direct write, offset %d",
			rmr, cd.pcfgDesc, cd.dataOffset, writeOff)
	}
	off := int(cd.dataOffset)
	mustOK(t, "Write", c.Write(rmr, off, src, 0, writeLen, rpma.CompletionOnError, 1))
	mustOK(t, "Flush(visibility)", c.Flush(rmr, off, writeLen, rpma.FlushVisibility, rpma.CompletionAlways, 2))
	expectWC(t, ctx, c.CQ(), 2, uverbs.WCRDMARead, "flush to visibility")

	if err := c.Flush(rmr, off, writeLen, rpma.FlushPersistent, rpma.CompletionAlways, 3); !errors.Is(err, rpma.ErrNotSupported) {
		t.Fatalf("persistent flush before ApplyRemotePeerCfg = %v, want ErrNotSupported", err)
	}
	mustOK(t, "ApplyRemotePeerCfg", c.ApplyRemotePeerCfg(pcfg))
	if c.NativeFlushUsed() {
		t.Errorf("NativeFlushUsed with a C librpma server's configuration")
	}
	mustOK(t, "Write", c.Write(rmr, off+writeLen, src, writeLen, writeLen, rpma.CompletionOnError, 4))
	mustOK(t, "Flush(persistent)", c.Flush(rmr, off+writeLen, writeLen, rpma.FlushPersistent, rpma.CompletionAlways, 5))
	expectWC(t, ctx, c.CQ(), 5, uverbs.WCRDMARead, "flush to persistence")
	endActive(t, ctx, c)
}

// ---- atomic write ----

func atomicServer(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer) {
	mr := regMR(t, sp, interopRegion, rpma.UsageWriteDst|rpma.UsageFlushVisibility)
	pcfg := rpma.NewPeerCfg()
	pcfg.SetDirectWriteToPMem(true)
	pdata := commonData{atomicOff, mr.Descriptor(), pcfg.Descriptor()}.bytes(t)
	c := goAccept(t, ctx, ep, nil, pdata, nil)
	cc.serverUp(t)
	endPassive(t, ctx, c)
	b := mr.Bytes()
	if !bytes.Equal(b[atomicOff:atomicOff+8], atomicVal[:]) {
		t.Fatalf("atomic write target holds %x, want %x", b[atomicOff:atomicOff+8], atomicVal)
	}
	checkZero(t, "before the atomic write", b[:atomicOff])
	checkZero(t, "after the atomic write", b[atomicOff+8:])
}

// checkCAtomicWrite: Debian's librpma 1.2.0 is built without native
// ATOMIC_WRITE, so its atomic write is an inline RDMA write on both
// kernels.
func checkCAtomicWrite(t testing.TB, line string) {
	if !strings.HasSuffix(line, " opcode=RDMA_WRITE") {
		t.Errorf("C librpma's atomic write completed as %q, want opcode=RDMA_WRITE", line)
	}
}

func atomicClient(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer) {
	if cp.NativeAtomicWrite() != interopNative() {
		t.Errorf("NativeAtomicWrite = %v on Linux %s", cp.NativeAtomicWrite(), os.Getenv("PURERDMA_VM"))
	}
	c := goConnect(t, ctx, cp, port, interopCfg(t), nil, nil)
	cs.waitEstablished(t) // before the first operation (waitEstablished says why)
	cd := parseCommonData(t, c.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	if cd.dataOffset != atomicOff {
		t.Fatalf("data offset %d, want %d", cd.dataOffset, atomicOff)
	}
	if err := c.AtomicWrite(rmr, atomicOff+4, atomicVal, rpma.CompletionAlways, 9); !errors.Is(err, rpma.ErrInvalid) {
		t.Fatalf("AtomicWrite at a misaligned offset = %v, want ErrInvalid", err)
	}
	mustOK(t, "AtomicWrite", c.AtomicWrite(rmr, atomicOff, atomicVal, rpma.CompletionAlways, 1))
	// An inline RDMA write on both kernels: a C server's configuration
	// (none is applied here; C's one byte could not say it) does not
	// tell that its device executes ATOMIC_WRITE.
	expectWC(t, ctx, c.CQ(), 1, uverbs.WCRDMAWrite, "atomic write")
	mustOK(t, "Flush", c.Flush(rmr, atomicOff, 8, rpma.FlushVisibility, rpma.CompletionAlways, 2))
	expectWC(t, ctx, c.CQ(), 2, uverbs.WCRDMARead, "flush to visibility")
	endActive(t, ctx, c)
}

// ---- messages ----

type msgMem struct {
	recv, send, target *rpma.MR
}

func newMsgMem(t testing.TB, p *rpma.Peer) msgMem {
	return msgMem{
		recv:   regMR(t, p, interopRegion, rpma.UsageRecv),
		send:   regMR(t, p, interopRegion, rpma.UsageSend|rpma.UsageWriteSrc),
		target: regMR(t, p, interopRegion, rpma.UsageWriteDst),
	}
}

// postRecvs posts nMsg receives of msgSlot bytes with WRIDs ctx, ctx+1, ...
func postRecvs(t testing.TB, recv func(dst *rpma.MR, off, n int, wrid uint64) error, mr *rpma.MR, ctx uint64) {
	t.Helper()
	for k := range nMsg {
		mustOK(t, "posting a receive", recv(mr, k*msgSlot, msgSlot, ctx+uint64(k)))
	}
}

// sendMsgs sends msgs (a write goes to rmr at off) and checks their
// completions.
func sendMsgs(t testing.TB, ctx context.Context, c *rpma.Conn, mr *rpma.MR, msgs [nMsg]peerMsg, rmr *rpma.RemoteMR, off int) {
	t.Helper()
	for k, m := range msgs {
		at := k * msgSendSlot
		fillPat(mr.Bytes()[at:at+m.len], m.seed)
		src := mr
		if m.len == 0 {
			src, at = nil, 0
		}
		var err error
		switch m.kind {
		case mSend:
			err = c.Send(src, at, m.len, rpma.CompletionAlways, uint64(k+1))
		case mSendImm:
			err = c.SendWithImm(src, at, m.len, rpma.CompletionAlways, m.imm, uint64(k+1))
		case mWriteImm:
			err = c.WriteWithImm(rmr, off, src, at, m.len, rpma.CompletionAlways, m.imm, uint64(k+1))
		}
		mustOK(t, "sending message "+strconv.Itoa(k), err)
	}
	for k, m := range msgs {
		op := uverbs.WCSend
		if m.kind == mWriteImm {
			op = uverbs.WCRDMAWrite
		}
		expectWC(t, ctx, c.CQ(), uint64(k+1), op, "sent message "+strconv.Itoa(k))
	}
}

// recvMsgs takes nMsg receive completions from cq and checks each
// against msgs in order of arrival: the data in its receive's slot
// (WRID - wrid0), or in target at off for a write with immediate data.
// qpn 0 is not checked.
func recvMsgs(t testing.TB, ctx context.Context, cq *rpma.CQ, recv, target *rpma.MR, off int, msgs [nMsg]peerMsg, wrid0 uint64, qpn uint32) {
	t.Helper()
	var seen [nMsg]bool
	for i, m := range msgs {
		what := "received message " + strconv.Itoa(i)
		wc := nextWC(t, ctx, cq, what)
		slot := int(wc.WRID - wrid0)
		if wc.WRID < wrid0 || slot >= nMsg || seen[slot] {
			t.Fatalf("%s: WRID %d", what, wc.WRID)
		}
		seen[slot] = true
		op, imm := uverbs.WCRecv, m.kind != mSend
		if m.kind == mWriteImm {
			op = uverbs.WCRecvRDMAWithImm
		}
		if wc.Opcode != op || int(wc.ByteLen) != m.len || (wc.Flags&uverbs.WCWithImm != 0) != imm {
			t.Fatalf("%s: %v of %d bytes, flags %v; want %v of %d bytes, imm %v", what, wc.Opcode, wc.ByteLen, wc.Flags, op, m.len, imm)
		}
		if imm && wc.Imm != m.imm {
			t.Fatalf("%s: imm %#x, want %#x", what, wc.Imm, m.imm)
		}
		if qpn != 0 && wc.QPNum != qpn {
			t.Fatalf("%s: QP %d, want the connection's %d", what, wc.QPNum, qpn)
		}
		if m.kind == mWriteImm {
			checkPat(t, what+": written data", target.Bytes()[off:off+m.len], m.seed, 0)
		} else {
			checkPat(t, what+": data", recv.Bytes()[slot*msgSlot:slot*msgSlot+m.len], m.seed, 0)
		}
	}
}

func msgCfg(t testing.TB) *rpma.ConnCfg {
	cfg := interopCfg(t)
	cfg.SetRCQSize(10)
	return cfg
}

func msgServer(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer) {
	mm := newMsgMem(t, sp)
	req, err := ep.NextConnReq(ctx, msgCfg(t))
	if err != nil {
		t.Fatalf("NextConnReq: %v (%v)", err, context.Cause(ctx))
	}
	cd := parseCommonData(t, req.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	if cd.dataOffset != msgClientOff || len(cd.pcfgDesc) != 0 || rmr.Usage != rpma.UsageWriteDst {
		t.Fatalf("client's private data: %v, offset %d, peer cfg %x", rmr, cd.dataOffset, cd.pcfgDesc)
	}
	postRecvs(t, req.Recv, mm.recv, msgRecvCtx)
	c, err := req.Connect(commonData{msgServerOff, mm.target.Descriptor(), nil}.bytes(t))
	mustOK(t, "accepting", err)
	closeWithTest(t, c)
	expectEvent(t, ctx, c, rpma.ConnEstablished)
	if c.RCQ() == nil {
		t.Fatal("no receive CQ with SetRCQSize(10)")
	}
	recvMsgs(t, ctx, c.RCQ(), mm.recv, mm.target, msgServerOff, clientMsgs, msgRecvCtx, 0)
	sendMsgs(t, ctx, c, mm.send, serverMsgs, rmr, int(cd.dataOffset))
	endPassive(t, ctx, c)
}

func msgClient(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer) {
	mm := newMsgMem(t, cp)
	pdata := commonData{msgClientOff, mm.target.Descriptor(), nil}.bytes(t)
	c := goConnect(t, ctx, cp, port, msgCfg(t), pdata, func(req *rpma.ConnReq) {
		postRecvs(t, req.Recv, mm.recv, msgRecvCtx)
	})
	cd := parseCommonData(t, c.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	if cd.dataOffset != msgServerOff || rmr.Usage != rpma.UsageWriteDst {
		t.Fatalf("server's private data: %v, offset %d", rmr, cd.dataOffset)
	}
	sendMsgs(t, ctx, c, mm.send, clientMsgs, rmr, int(cd.dataOffset))
	recvMsgs(t, ctx, c.RCQ(), mm.recv, mm.target, msgClientOff, serverMsgs, msgRecvCtx, 0)
	endActive(t, ctx, c)
}

// ---- shared receive queue ----

func srqServer(t testing.TB, ctx context.Context, sp *rpma.Peer, ep *rpma.Ep, cc *cPeer) {
	recv := regMR(t, sp, interopRegion, rpma.UsageRecv)
	scfg := rpma.NewSRQCfg()
	scfg.SetRQSize(10)
	scfg.SetRCQSize(10)
	srq, err := sp.NewSRQ(scfg)
	mustOK(t, "NewSRQ", err)
	srqClosed := false
	t.Cleanup(func() {
		if !srqClosed {
			srq.Close()
		}
	})
	if srq.RCQ() == nil {
		t.Fatal("SRQ without its receive CQ")
	}
	cfg := interopCfg(t)
	cfg.SetSRQ(srq)
	postRecvs(t, srq.Recv, recv, srqRecvCtx)
	c := goAccept(t, ctx, ep, cfg, nil, nil)
	if c.RCQ() != nil {
		t.Error("a connection on an SRQ with a receive CQ has a receive CQ of its own")
	}
	recvMsgs(t, ctx, srq.RCQ(), recv, nil, 0, srqMsgs, srqRecvCtx, c.QPNum())
	endActive(t, ctx, c)
	srqClosed = true
	mustOK(t, "SRQ Close", srq.Close())
}

func srqClient(t testing.TB, ctx context.Context, cp *rpma.Peer, port string, cs *cPeer) {
	send := regMR(t, cp, interopRegion, rpma.UsageSend)
	c := goConnect(t, ctx, cp, port, interopCfg(t), nil, nil)
	sendMsgs(t, ctx, c, send, srqMsgs, nil, 0)
	// The server disconnects once it has checked the messages.
	endPassive(t, ctx, c)
}

// ---- native flush ----

// interopPmem maps size bytes of the VM's persistent memory
// (PURERDMA_PMEM, device DAX), zeroed: the only memory rxe registers
// with FLUSH to persistence.
func interopPmem(t testing.TB, size int) []byte {
	t.Helper()
	dev := os.Getenv("PURERDMA_PMEM")
	if dev == "" {
		interopUnavailable(t, "PURERDMA_PMEM names no persistent memory")
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := uverbs.MapFile(f, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("pmem Buffer Close: %v", err)
		}
	})
	clear(b.Bytes())
	return b.Bytes()
}

// TestInteropGoNativeFlush: between two Go peers, a server whose peer
// configuration says its regions take native FLUSH (set from
// Peer.NativeFlush) gets native flushes from a FlushAuto client on 6.12
// (FLUSH completions) and emulated ones on 6.1 (RDMA read completions);
// the data arrives either way.
func TestInteropGoNativeFlush(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	on612 := interopNative()
	if sp.NativeFlush() != on612 || cp.NativeFlush() != on612 {
		t.Fatalf("NativeFlush: server %v, client %v on Linux %s", sp.NativeFlush(), cp.NativeFlush(), os.Getenv("PURERDMA_VM"))
	}
	mem := interopPmem(t, interopRegion)
	mr, err := sp.RegMR(mem, rpma.UsageWriteDst|rpma.UsageFlushVisibility|rpma.UsageFlushPersistent)
	mustOK(t, "RegMR(pmem)", err)
	t.Cleanup(func() {
		if err := mr.Close(); err != nil {
			t.Errorf("MR Close: %v", err)
		}
	})
	pcfg := rpma.NewPeerCfg()
	pcfg.SetDirectWriteToPMem(true)
	pcfg.SetNativeFlush(mr.NativeFlush())
	p := connect(t, ctx, sp, cp, nil, interopCfg(t), nil, commonData{writeOff, mr.Descriptor(), pcfg.Descriptor()}.bytes(t))
	cd := parseCommonData(t, p.cpdata)
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	rpcfg, err := rpma.PeerCfgFromDescriptor(cd.pcfgDesc)
	mustOK(t, "PeerCfgFromDescriptor", err)
	if rpcfg.NativeFlush() != on612 || !rpcfg.DirectWriteToPMem() {
		t.Fatalf("server's peer cfg %x: native flush %v, direct write %v", cd.pcfgDesc, rpcfg.NativeFlush(), rpcfg.DirectWriteToPMem())
	}
	if p.c.NativeFlushUsed() {
		t.Error("NativeFlushUsed before the server's configuration was applied")
	}
	mustOK(t, "ApplyRemotePeerCfg", p.c.ApplyRemotePeerCfg(rpcfg))
	if p.c.NativeFlushUsed() != on612 {
		t.Fatalf("NativeFlushUsed = %v on Linux %s", p.c.NativeFlushUsed(), os.Getenv("PURERDMA_VM"))
	}
	flushOp := uverbs.WCRDMARead
	if on612 {
		flushOp = uverbs.WCFlush
	}
	src := regMR(t, cp, interopRegion, rpma.UsageWriteSrc)
	fillPat(src.Bytes()[:writeLen], writeSeedA)
	fillPat(src.Bytes()[writeLen:2*writeLen], writeSeedB)
	off := int(cd.dataOffset)
	for i, typ := range []rpma.FlushType{rpma.FlushVisibility, rpma.FlushPersistent} {
		at := off + i*writeLen
		mustOK(t, "Write", p.c.Write(rmr, at, src, i*writeLen, writeLen, rpma.CompletionOnError, uint64(10*i+1)))
		mustOK(t, "Flush", p.c.Flush(rmr, at, writeLen, typ, rpma.CompletionAlways, uint64(10*i+2)))
		expectWC(t, ctx, p.c.CQ(), uint64(10*i+2), flushOp, "flush to "+typ.String())
	}
	checkPat(t, "first write (flushed to visibility)", mem[off:off+writeLen], writeSeedA, 0)
	checkPat(t, "second write (flushed to persistence)", mem[off+writeLen:off+2*writeLen], writeSeedB, 0)
	checkZero(t, "before the writes", mem[:off])
	checkZero(t, "after the writes", mem[off+2*writeLen:])
}

// nativeFlushToC: FlushNative against a C librpma server, whose flush
// targets have remote read access only and whose QP rdma_cm set up
// without FLUSH rights. On 6.1 Flush refuses at once (the device has no
// FLUSH) and the connection goes on. On 6.12 the FLUSH goes out and the
// C side's rxe refuses it: the completion is a remote access error, the
// QP is in error (what is posted after it is flushed), and the write
// before it is in place at the server.
func nativeFlushToC(t *toolrun.Attempt, ctx context.Context, failed context.CancelCauseFunc, bin string) {
	port := nextInteropPort()
	cs := startCPeer(t, bin, "server", port, "nativeflush", failed)
	cs.waitListening(t)
	t.Watch(mustAtoi(t, port))
	cp := newPeer(t, ctx, rpma.Remote)
	src := regMR(t, cp, interopRegion, rpma.UsageWriteSrc)
	fillPat(src.Bytes()[:writeLen], writeSeedA)
	cfg := interopCfg(t)
	mustOK(t, "SetFlushMethod", cfg.SetFlushMethod(rpma.FlushNative))
	c := goConnect(t, ctx, cp, port, cfg, nil, nil)
	cs.waitEstablished(t) // before the first operation (waitEstablished says why)
	cd := parseCommonData(t, c.PrivateData())
	rmr, err := rpma.RemoteMRFromDescriptor(cd.mrDesc)
	mustOK(t, "RemoteMRFromDescriptor", err)
	off := int(cd.dataOffset)
	mustOK(t, "Write", c.Write(rmr, off, src, 0, writeLen, rpma.CompletionAlways, 1))
	expectWC(t, ctx, c.CQ(), 1, uverbs.WCRDMAWrite, "write")
	err = c.Flush(rmr, off, writeLen, rpma.FlushVisibility, rpma.CompletionAlways, 2)
	if !interopNative() {
		if !errors.Is(err, rpma.ErrNotSupported) || c.NativeFlushUsed() {
			t.Fatalf("6.1: FlushNative: Flush = %v, NativeFlushUsed %v; want ErrNotSupported, false", err, c.NativeFlushUsed())
		}
		// Nothing was posted: the connection still works.
		mustOK(t, "Write", c.Write(rmr, off, src, 0, 8, rpma.CompletionAlways, 3))
		expectWC(t, ctx, c.CQ(), 3, uverbs.WCRDMAWrite, "write after the refused flush")
	} else {
		mustOK(t, "6.12: FlushNative: Flush", err)
		if !c.NativeFlushUsed() {
			t.Error("6.12: NativeFlushUsed false with FlushNative")
		}
		wc := waitWC(t, ctx, c.CQ())
		var ce *rpma.CompletionError
		if wc.WRID != 2 || wc.Status != uverbs.WCRemAccessErr || !errors.As(rpma.CompletionErr(&wc), &ce) {
			t.Fatalf("6.12: native FLUSH to C librpma completed as %+v, want a remote access error of WRID 2", wc)
		}
		t.Logf("6.12: native FLUSH to a C librpma region: %v", ce)
		mustOK(t, "Write", c.Write(rmr, off, src, 0, 8, rpma.CompletionAlways, 3))
		if wc := waitWC(t, ctx, c.CQ()); wc.WRID != 3 || wc.Status != uverbs.WCWRFlushErr {
			t.Fatalf("6.12: a write after the failed FLUSH completed as %+v, want a flush error of WRID 3", wc)
		}
	}
	endActive(t, ctx, c)
	cs.finish(t, "OK nativeflush server event=Connection closed first=yes")
}
