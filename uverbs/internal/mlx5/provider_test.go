package mlx5

import (
	"errors"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// The provider's translation between uverbs' work requests and
// completions and the device formats, on plain memory: the provider's
// queue objects are built as NewCQ/NewQP would build them after the
// create commands (which need a ConnectX), posts are read back from the
// send and receive rings, and completions are written into the CQ
// buffer as the device writes them. The package's other tests check
// the formats themselves against mlx5dv.h and run a software NIC.

type mlx5Fixture struct {
	p      *Provider
	ctx    *provider.Context
	cq     *ProvCQ
	qp     *provQP
	uqp    *provider.QP
	sqBuf  []byte
	rqBuf  []byte
	cqBuf  []byte
	cqDB   []byte
	ncqe   int
	cqeIdx int
}

func newMLX5Fixture(t *testing.T, typ provider.QPType, sendWR, recvWR int) *mlx5Fixture {
	t.Helper()
	ctx := provider.NewContext(nil, 0)
	p := NewProvider(ctx)
	p.resp.BfRegSize = 512
	lim := Limits{MaxSQDescSz: 512, MaxRQDescSz: 512, MaxSendWQEBB: 1 << 15, MaxRecvWR: 1 << 15, MaxSRQRecvWR: 1 << 15}

	cqs, err := CQSize(16, CQESize, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cqBuf := make([]byte, cqs.Bytes)
	InitCQBuffer(cqBuf, cqs)
	cqDB := make([]byte, 8)
	q, err := NewCQ(CQConfig{Buf: cqBuf, Sizing: cqs, CQN: 7, DBRec: cqDB, UAR: make([]byte, 4096), Writer: Device{}})
	if err != nil {
		t.Fatal(err)
	}
	cq := &ProvCQ{p: p, cq: &provider.CQ{}, q: q, prep: &prep{p: p}}

	mt, _ := qpType(typ)
	sq, err := SQSize(mt, false, sendWR, 2, 64, lim)
	if err != nil {
		t.Fatal(err)
	}
	rq, err := RQSize(recvWR, 2, false, lim)
	if err != nil {
		t.Fatal(err)
	}
	sqOff, n := QPBuffer(sq, rq, 4096)
	buf := make([]byte, n)
	dbrec := make([]byte, 8)
	bf, err := NewBlueFlame(make([]byte, 512), true, Device{})
	if err != nil {
		t.Fatal(err)
	}
	uqp := &provider.QP{Type: typ, Num: 0x1234, Cap: provider.QPCap{MaxSendWR: uint32(sq.MaxPost), MaxSendSGE: 2, MaxRecvWR: uint32(rq.MaxPost), MaxRecvSGE: 2, MaxInlineData: uint32(sq.MaxInline)}}
	mq := &provQP{p: p, qp: uqp, scq: cq, rcq: cq, inline: make([]byte, sq.MaxInline)}
	if mq.sq, err = NewSQ(SQConfig{Buf: buf[sqOff : sqOff+sq.Bytes], Sizing: sq, QPN: uqp.Num, Type: mt, DBRec: dbrec, BlueFlame: bf, Writer: Device{}}); err != nil {
		t.Fatal(err)
	}
	if mq.rq, err = NewRQ(buf[:rq.Bytes], rq, dbrec, Device{}); err != nil {
		t.Fatal(err)
	}
	uidx, err := p.newUIdx(mq)
	if err != nil {
		t.Fatal(err)
	}
	mq.prep = &prep{p: p, uidx: uidx, hasU: true}
	return &mlx5Fixture{p: p, ctx: ctx, cq: cq, qp: mq, uqp: uqp, sqBuf: buf[sqOff : sqOff+sq.Bytes], rqBuf: buf[:rq.Bytes], cqBuf: cqBuf, cqDB: cqDB, ncqe: cqs.NCQE}
}

// cqe writes the next CQE as the device does: opcode and owner bit
// last, the QP's user index in srqn_uidx.
func (f *mlx5Fixture) cqe(op, sqOp uint8, counter uint16, byteCnt, imm uint32) {
	i := f.cqeIdx
	f.cqeIdx++
	b := f.cqBuf[(i%f.ncqe)*64:][:64]
	clear(b)
	be.PutUint32(b[32:], f.qp.prep.uidx)
	be.PutUint32(b[36:], imm)
	be.PutUint32(b[44:], byteCnt)
	be.PutUint32(b[56:], uint32(sqOp)<<24|f.uqp.Num)
	be.PutUint16(b[60:], counter)
	owner := uint8(0)
	if i/f.ncqe%2 == 1 {
		owner = 1
	}
	b[63] = op<<4 | owner
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

func TestMLX5PostSendSegments(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 8, 8)
	local := make([]byte, 64)
	wr := provider.SendWR{WRID: 11, Opcode: provider.WRRDMAWriteWithImm, Flags: provider.SendSignaled | provider.SendSolicited | provider.SendFence, Imm: 0xa1b2c3d4,
		SGL: []provider.SGE{{Addr: addrOf(local), Length: 64, LKey: 0x55}}, RemoteAddr: 0x1000_2000, RKey: 0x77}
	if err := f.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	w := f.sqBuf[:64]
	if got, want := be.Uint32(w[0:]), uint32(0)<<8|OpRDMAWriteImm; got != want {
		t.Errorf("opmod_idx_opcode %#x, want %#x", got, want)
	}
	if got, want := be.Uint32(w[4:]), f.uqp.Num<<8|3; got != want { // ctrl + raddr + data = 3 DS
		t.Errorf("qpn_ds %#x, want %#x", got, want)
	}
	if got, want := w[11], uint8(CtrlCQUpdate|CtrlSolicited|CtrlFence); got != want {
		t.Errorf("fm_ce_se %#x, want %#x", got, want)
	}
	if got := be.Uint32(w[12:]); got != 0xa1b2c3d4 {
		t.Errorf("imm %#x", got)
	}
	if got, rkey := be.Uint64(w[16:]), be.Uint32(w[24:]); got != 0x1000_2000 || rkey != 0x77 {
		t.Errorf("raddr %#x rkey %#x", got, rkey)
	}
	if n, lkey, a := be.Uint32(w[32:]), be.Uint32(w[36:]), be.Uint64(w[40:]); n != 64 || lkey != 0x55 || a != addrOf(local) {
		t.Errorf("data segment %d %#x %#x", n, lkey, a)
	}

	// The device completes it: Poll gives uverbs' completion.
	f.cqe(CQEReq, OpRDMAWriteImm, 0, 0, 0)
	wc := make([]provider.WC, 4)
	if n := f.cq.Poll(wc); n != 1 {
		t.Fatalf("poll: %d completions, want 1", n)
	}
	if wc[0].WRID != 11 || wc[0].Status != provider.WCSuccess || wc[0].Opcode != WCOpRDMAWrite || wc[0].QPNum != f.uqp.Num {
		t.Errorf("completion %+v", wc[0])
	}
	if n := f.cq.Poll(wc); n != 0 {
		t.Errorf("poll of an empty CQ: %d", n)
	}
}

func TestMLX5PostSendAtomicsAndInline(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 8, 8)
	res := make([]byte, 8)
	wr := provider.SendWR{WRID: 1, Opcode: provider.WRAtomicCmpAndSwp, Flags: provider.SendSignaled, SGL: []provider.SGE{{Addr: addrOf(res), Length: 8, LKey: 9}},
		RemoteAddr: 0x8000, RKey: 3, CompareAdd: 5, Swap: 6}
	if err := f.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	w := f.sqBuf[:64]
	if op := w[3]; op != OpAtomicCS {
		t.Errorf("opcode %#x", op)
	}
	if swap, cmp := be.Uint64(w[32:]), be.Uint64(w[40:]); swap != 6 || cmp != 5 {
		t.Errorf("atomic segment swap %d compare %d", swap, cmp)
	}
	if n := be.Uint32(w[48:]); n != 8 {
		t.Errorf("atomic data segment byte count %d", n)
	}

	// Inline from unregistered memory: the bytes are in the WQE.
	msg := []byte("inline payload!")
	wr = provider.SendWR{WRID: 2, Opcode: provider.WRSend, Flags: provider.SendInline | provider.SendSignaled, SGL: []provider.SGE{{Addr: addrOf(msg), Length: uint32(len(msg))}}}
	if err := f.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	w = f.sqBuf[64:128]
	if op := w[3]; op != OpSend {
		t.Errorf("opcode %#x", op)
	}
	if hdr := be.Uint32(w[16:]); hdr != uint32(len(msg))|InlineSeg {
		t.Errorf("inline header %#x", hdr)
	}
	if got := string(w[20 : 20+len(msg)]); got != string(msg) {
		t.Errorf("inline data %q", got)
	}
}

// TestMLX5InlineFromUnmappedMemory: inline data at an address with no
// mapping fails the post with EINVAL instead of crashing, and nothing
// of the request reaches the queue.
func TestMLX5InlineFromUnmappedMemory(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 4, 4)
	mem, err := sys.MmapAnon(4096)
	if err != nil {
		t.Fatal(err)
	}
	addr := addrOf(mem)
	if err := sys.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	wr := provider.SendWR{WRID: 3, Opcode: provider.WRSend, Flags: provider.SendInline | provider.SendSignaled,
		SGL: []provider.SGE{{Addr: addr, Length: 16}}}
	err = f.qp.PostSend(&wr)
	if !errors.Is(err, sys.ErrInvalid) || !strings.Contains(err.Error(), "no readable memory") {
		t.Fatalf("inline send from unmapped memory: %v, want EINVAL naming the memory", err)
	}
	if got := f.qp.sq.Counter(); got != 0 {
		t.Errorf("the refused request moved the send counter to %d", got)
	}
	// Of two entries, the unmapped second is the one named; the
	// goroutine's fault setting is back to what it was (off).
	ok := []byte("readable")
	wr.SGL = []provider.SGE{{Addr: addrOf(ok), Length: uint32(len(ok))}, {Addr: addr, Length: 8}}
	err = f.qp.PostSend(&wr)
	if !errors.Is(err, sys.ErrInvalid) || !strings.Contains(err.Error(), "inline data of entry 1") {
		t.Fatalf("inline send with an unmapped second entry: %v, want EINVAL naming entry 1", err)
	}
	if got := f.qp.sq.Counter(); got != 0 {
		t.Errorf("the refused request moved the send counter to %d", got)
	}
	if debug.SetPanicOnFault(false) {
		t.Error("the refused post left the goroutine's SetPanicOnFault on")
	}
	// The queue still works.
	msg := []byte("after")
	wr.SGL = []provider.SGE{{Addr: addrOf(msg), Length: uint32(len(msg))}}
	if err := f.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	if got := string(f.sqBuf[20 : 20+len(msg)]); got != "after" {
		t.Errorf("inline data of the next request %q", got)
	}
}

func TestMLX5PostSendRefusals(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 2, 2)
	max := int(f.uqp.Cap.MaxSendWR)
	for i := range max {
		if err := f.qp.PostSend(&provider.SendWR{WRID: uint64(i), Opcode: provider.WRSend}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	counter := f.qp.sq.Counter()
	err := f.qp.PostSend(&provider.SendWR{WRID: 99, Opcode: provider.WRSend})
	if !errors.Is(err, sys.ErrBusy) {
		t.Fatalf("post past MaxSendWR: %v, want ErrBusy", err)
	}
	if got := f.qp.sq.Counter(); got != counter {
		t.Errorf("a refused post moved the send counter from %d to %d", counter, got)
	}

	// Opcodes the provider does not build are refused, not posted.
	g := newMLX5Fixture(t, provider.QPTypeRC, 2, 2)
	if err := g.qp.PostSend(&provider.SendWR{Opcode: provider.WRLocalInv}); !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "LOCAL_INV") {
		t.Errorf("LOCAL_INV: %v, want ErrNotSupported naming LOCAL_INV", err)
	}
	if got := g.qp.sq.Counter(); got != 0 {
		t.Errorf("a refused post moved the send counter to %d", got)
	}
}

func TestMLX5ReceiveCompletions(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 4, 4)
	buf := make([]byte, 256)
	for i := range 3 {
		if err := f.qp.PostRecv(&provider.RecvWR{WRID: uint64(100 + i), SGL: []provider.SGE{{Addr: addrOf(buf), Length: 256, LKey: 4}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, lkey, a := be.Uint32(f.rqBuf[0:]), be.Uint32(f.rqBuf[4:]), be.Uint64(f.rqBuf[8:]); n != 256 || lkey != 4 || a != addrOf(buf) {
		t.Errorf("receive data segment %d %#x %#x", n, lkey, a)
	}
	f.cqe(CQERespSendImm, 0, 0, 40, 0xdeadbeef)
	f.cqe(CQERespWRImm, 0, 1, 0, 0x01020304)
	f.cqe(CQERespSend, 0, 2, 7, 0)
	wc := make([]provider.WC, 8)
	if n := f.cq.Poll(wc); n != 3 {
		t.Fatalf("poll: %d completions, want 3", n)
	}
	want := []provider.WC{
		{WRID: 100, Opcode: WCOpRecv, ByteLen: 40, Imm: 0xdeadbeef, Flags: provider.WCWithImm},
		{WRID: 101, Opcode: WCOpRecvRDMAWImm, Imm: 0x01020304, Flags: provider.WCWithImm},
		{WRID: 102, Opcode: WCOpRecv, ByteLen: 7},
	}
	for i, w := range want {
		g := wc[i]
		if g.WRID != w.WRID || g.Opcode != w.Opcode || g.ByteLen != w.ByteLen || g.Imm != w.Imm || g.Flags != w.Flags || g.Status != provider.WCSuccess {
			t.Errorf("completion %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestMLX5ErrorCompletionAndReset(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 4, 4)
	for i := range 2 {
		if err := f.qp.PostSend(&provider.SendWR{WRID: uint64(i), Opcode: provider.WRSend, Flags: provider.SendSignaled}); err != nil {
			t.Fatal(err)
		}
	}
	// A remote access error for the first; then the QP is reset with
	// the second one's (flushed) completion still in the CQ.
	b := f.cqBuf[:64]
	f.cqe(CQEReqErr, OpSend, 0, 0, 0)
	b[55] = SyndRemoteAccess
	wc := make([]provider.WC, 4)
	if n := f.cq.Poll(wc); n != 1 || wc[0].WRID != 0 || wc[0].Status != WCRemAccessErr {
		t.Fatalf("error completion: n=%d %+v", n, wc[0])
	}
	f.cqe(CQEReqErr, OpSend, 1, 0, 0)
	f.cqBuf[64+55] = SyndWRFlush
	f.qp.Reset()
	if n := f.cq.Poll(wc); n != 0 {
		t.Errorf("after reset the QP's completion is still polled: %+v", wc[0])
	}
	if got := f.qp.sq.Counter(); got != 0 {
		t.Errorf("send counter after reset %d", got)
	}
	if err := f.qp.PostSend(&provider.SendWR{WRID: 7, Opcode: provider.WRSend, Flags: provider.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if idx := be.Uint32(f.sqBuf[0:]) >> 8 & 0xffff; idx != 0 {
		t.Errorf("first WQE after reset has index %d", idx)
	}
}

func TestMLX5UDDatagram(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeUD, 4, 4)
	var dgid [16]byte
	dgid[15] = 9
	av := RoCEAV(0, 3, [6]byte{1, 2, 3, 4, 5, 6}, 0, 64, 1, 0, dgid, 0xc000)
	ah := &provider.AH{Data: &av}
	msg := make([]byte, 16)
	wr := provider.SendWR{WRID: 5, Opcode: provider.WRSend, Flags: provider.SendSignaled, AH: ah, RemoteQPN: 0x77, RemoteQKey: 0x11111111,
		SGL: []provider.SGE{{Addr: addrOf(msg), Length: 16, LKey: 1}}}
	if err := f.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
	w := f.sqBuf[:128]
	if ds := be.Uint32(w[4:]) & 0x3f; ds != 5 { // ctrl 1 + datagram 3 + data 1
		t.Errorf("ds %d, want 5", ds)
	}
	if qkey, dqp := be.Uint32(w[16:]), be.Uint32(w[24:]); qkey != 0x11111111 || dqp != 0x77|ExtendedUDAV {
		t.Errorf("datagram qkey %#x dqp %#x", qkey, dqp)
	}
	if mac := w[16+20 : 16+26]; string(mac) != string([]byte{1, 2, 3, 4, 5, 6}) {
		t.Errorf("rmac % x", mac)
	}
	// An AH without the provider's address vector is refused.
	wr.AH = &provider.AH{}
	if err := f.qp.PostSend(&wr); !errors.Is(err, sys.ErrInvalid) {
		t.Errorf("UD send with a foreign AH: %v", err)
	}
}

// TestMLX5EmptyPollWritesNothing: the consumer index reaches the
// doorbell record when CQEs were consumed, and an empty poll leaves the
// record alone.
func TestMLX5EmptyPollWritesNothing(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 4, 4)
	if err := f.qp.PostSend(&provider.SendWR{WRID: 1, Opcode: provider.WRSend, Flags: provider.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	f.cqe(CQEReq, OpSend, 0, 0, 0)
	wc := make([]provider.WC, 4)
	if n := f.cq.Poll(wc); n != 1 {
		t.Fatalf("poll: %d", n)
	}
	rec := f.cqDB
	if got := be.Uint32(rec[CQSetCIDBR:]); got != 1 {
		t.Fatalf("consumer index in the doorbell record %d, want 1", got)
	}
	be.PutUint32(rec[CQSetCIDBR:], 0xdead)
	if n := f.cq.Poll(wc); n != 0 {
		t.Fatalf("empty poll: %d", n)
	}
	if got := be.Uint32(rec[CQSetCIDBR:]); got != 0xdead {
		t.Errorf("an empty poll wrote the doorbell record (%#x)", got)
	}
}

// TestMLX5CQResize drives RESIZE_CQ's preparation and finish as
// uverbs' CQ.Resize does, the device's part played on plain memory:
// the driver data names a fresh buffer, a failed command frees it, and
// after the command the waiting completions come out of the new buffer
// with their work requests, and the ring goes on there.
func TestMLX5CQResize(t *testing.T) {
	f := newMLX5Fixture(t, provider.QPTypeRC, 4, 4)
	t.Cleanup(func() { f.cq.Unmap() })
	for i := range 3 {
		if err := f.qp.PostSend(&provider.SendWR{WRID: uint64(10 + i), Opcode: provider.WRSend, Flags: provider.SendSignaled}); err != nil {
			t.Fatal(err)
		}
		f.cqe(CQEReq, OpSend, uint16(i), 0, 0)
	}

	// The size the CQ has (32 entries, 31 usable): no command.
	if _, same, err := f.cq.ResizeReq(31); !same || err != nil {
		t.Errorf("ResizeReq(31) of a 31-entry CQ: same %v, %v", same, err)
	}
	// Fewer entries than completions waiting: refused before the kernel.
	if _, _, err := f.cq.ResizeReq(1); !errors.Is(err, sys.ErrInvalid) || f.cq.resize != nil {
		t.Errorf("ResizeReq(1) with 3 completions waiting: %v (buffer %v)", err, f.cq.resize != nil)
	}
	// A command that fails: Abort frees the new buffer.
	req, same, err := f.cq.ResizeReq(100)
	if err != nil || same || f.cq.resize == nil {
		t.Fatalf("ResizeReq(100): %v, same %v", err, same)
	}
	req.Abort()
	if f.cq.resize != nil {
		t.Errorf("the buffer of a failed resize is kept")
	}

	req, _, err = f.cq.ResizeReq(100)
	if err != nil {
		t.Fatal(err)
	}
	var got abi.MLX5ResizeCQ
	if len(req.In) != abi.Size[abi.MLX5ResizeCQ]() {
		t.Fatalf("driver data of %d bytes", len(req.In))
	}
	copy(abi.Bytes(&got), req.In)
	if want := (abi.MLX5ResizeCQ{BufAddr: addrOf(f.cq.resize.mem), CQESize: 64}); got != want || req.Size != 127 {
		t.Errorf("driver data %+v, command cqe %d; want %+v, 127", got, req.Size, want)
	}
	newBuf := f.cq.resize.mem
	// The device: a resize CQE in the old buffer, then the new one.
	f.cqe(CQEResizeCQ, 0, 0, 0, 0)
	if err := f.cq.Resized(nil); err != nil {
		t.Fatal(err)
	}
	wc := make([]provider.WC, 8)
	if n := f.cq.Poll(wc); n != 3 || wc[0].WRID != 10 || wc[1].WRID != 11 || wc[2].WRID != 12 {
		t.Fatalf("after the resize: %d completions %+v", n, wc[:3])
	}
	if got := be.Uint32(f.cqDB[CQSetCIDBR:]); got != 4 {
		t.Errorf("doorbell record's consumer index %d, want 4 (3 completions and the resize CQE)", got)
	}
	// The next CQE, the fifth the device writes, lands in slot 4 of the
	// new buffer with owner bit 0.
	if err := f.qp.PostSend(&provider.SendWR{WRID: 13, Opcode: provider.WRSend, Flags: provider.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	f.cqBuf, f.ncqe, f.cqeIdx = newBuf, 128, 4
	f.cqe(CQEReq, OpSend, 3, 0, 0)
	if n := f.cq.Poll(wc); n != 1 || wc[0].WRID != 13 {
		t.Fatalf("a completion after the resize: %d %+v", n, wc[0])
	}
	if f.cq.prep.buf == nil || &f.cq.prep.buf.mem[0] != &newBuf[0] {
		t.Errorf("the CQ does not hold its new buffer for Unmap")
	}
	// A device that leaves no resize CQE: the CQ takes the new buffer
	// and says completions may be lost (EIO).
	if _, _, err := f.cq.ResizeReq(10); err != nil {
		t.Fatal(err)
	}
	newBuf = f.cq.resize.mem
	if err := f.cq.Resized(nil); !errors.Is(err, syscall.EIO) || !strings.HasPrefix(err.Error(), "mlx5: ") {
		t.Errorf("resize without a resize CQE: %v, want EIO from mlx5 (uverbs' CQ.Resize names the call)", err)
	}
	if &f.cq.prep.buf.mem[0] != &newBuf[0] || f.cq.q.ncqe != 16 {
		t.Errorf("after a lost resize the CQ is not on its new buffer of 16 entries")
	}
}

// TestMLX5ErrorClasses: a size the device cannot take fails the create
// preparation with an error matching EINVAL, as uverbs' own checks do,
// before anything is allocated; the device format's sentinels carry
// uverbs' classes.
func TestMLX5ErrorClasses(t *testing.T) {
	p := NewProvider(provider.NewContext(nil, 0))
	p.resp.MaxSQDescSz, p.resp.MaxRQDescSz, p.resp.MaxSendWqebb, p.resp.MaxRecvWR, p.resp.MaxSRQRecvWR = 512, 512, 1<<15, 1<<15, 1<<15
	if _, err := p.QPDriverData(&provider.QPConfig{Type: provider.QPTypeRC, Cap: provider.QPCap{MaxSendWR: 4, MaxSendSGE: 1, MaxInlineData: 4096}}); !errors.Is(err, sys.ErrInvalid) {
		t.Errorf("QP with 4096 bytes inline in 512-byte WQEs: %v, want EINVAL", err)
	}
	if _, err := p.SRQDriverData(&provider.SRQConfig{MaxWR: 1 << 20, MaxSGE: 1}); !errors.Is(err, sys.ErrInvalid) {
		t.Errorf("SRQ of 2^20 receives: %v, want EINVAL", err)
	}
	if _, err := p.CQDriverData(1 << 25); !errors.Is(err, sys.ErrInvalid) {
		t.Errorf("CQ of 2^25 entries: %v, want EINVAL", err)
	}
	if !errors.Is(ErrBusy, sys.ErrBusy) || !errors.Is(ErrBusy, syscall.EBUSY) || !errors.Is(ErrInvalid, syscall.EINVAL) || !errors.Is(ErrResizeLost, syscall.EIO) {
		t.Errorf("the sentinels lack uverbs' classes: %v, %v, %v", ErrBusy, ErrInvalid, ErrResizeLost)
	}
}
