package rpma_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// serverRegion is the server's region of every usage, its descriptor
// sent to the client as private data, and the client's view of it.
func remoteOf(t testing.TB, p *pair) *rpma.RemoteMR {
	t.Helper()
	r, err := rpma.RemoteMRFromDescriptor(p.cpdata)
	if err != nil {
		t.Fatalf("client: RemoteMRFromDescriptor(%x): %v", p.cpdata, err)
	}
	return r
}

const allRemote = rpma.UsageReadSrc | rpma.UsageWriteDst | rpma.UsageFlushVisibility

func pmemOrDRAM(t testing.TB, n int) []byte {
	dev := os.Getenv("PURERDMA_PMEM")
	if dev == "" {
		t.Fatal("PURERDMA_PMEM is not set: the VM has no persistent memory")
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := uverbs.MapFile(f, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Bytes()
}

// TestMessages: send, send with immediate data and write with
// immediate data, received into a receive CQ.
func TestMessages(t *testing.T) {
	testenv.NotIWARP(t, "the messages include SEND_WITH_IMM and WRITE_WITH_IMM")
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, rpma.UsageRecv|rpma.UsageWriteDst|rpma.UsageSend)
	scfg := rpma.NewConnCfg()
	scfg.SetRCQSize(10)
	p := connect(t, ctx, sp, cp, scfg, nil, nil, smr.Descriptor())
	if p.s.RCQ() == nil || p.c.RCQ() != nil {
		t.Fatalf("RCQs: server %v, client %v", p.s.RCQ(), p.c.RCQ())
	}
	cmr := regMR(t, cp, 4096, rpma.UsageSend|rpma.UsageWriteSrc|rpma.UsageRecv)
	copy(cmr.Bytes(), "ping")
	for i := range 3 {
		if err := p.s.Recv(smr, i*100, 100, uint64(10+i)); err != nil {
			t.Fatalf("Recv: %v", err)
		}
	}
	if err := p.c.Send(cmr, 0, 4, rpma.CompletionAlways, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.c.SendWithImm(cmr, 0, 2, rpma.CompletionAlways, 0xcafe, 2); err != nil {
		t.Fatal(err)
	}
	rmr := remoteOf(t, p)
	if err := p.c.WriteWithImm(rmr, 3000, cmr, 0, 4, rpma.CompletionAlways, 0xbeef, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if wc := waitWC(t, ctx, p.c.CQ()); rpma.CompletionErr(&wc) != nil || wc.WRID != uint64(i+1) {
			t.Fatalf("client completion %d: %+v", i, wc)
		}
	}
	want := []struct {
		op    uverbs.WCOpcode
		n     uint32
		imm   uint32
		flags uverbs.WCFlags
	}{{uverbs.WCRecv, 4, 0, 0}, {uverbs.WCRecv, 2, 0xcafe, uverbs.WCWithImm}, {uverbs.WCRecvRDMAWithImm, 4, 0xbeef, uverbs.WCWithImm}}
	for i, w := range want {
		wc := waitWC(t, ctx, p.s.RCQ())
		if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != uint64(10+i) || wc.Opcode != w.op ||
			wc.ByteLen != w.n || wc.Imm != w.imm || wc.Flags&uverbs.WCWithImm != w.flags {
			t.Fatalf("server receive %d: %+v (%v), want %+v", i, wc, err, w)
		}
	}
	if string(smr.Bytes()[0:4]) != "ping" || string(smr.Bytes()[100:102]) != "pi" || string(smr.Bytes()[3000:3004]) != "ping" {
		t.Errorf("server memory: %q %q %q", smr.Bytes()[0:4], smr.Bytes()[100:102], smr.Bytes()[3000:3004])
	}
	// Nothing more is pending on the main CQ.
	if n, err := p.s.CQ().GetWC(make([]uverbs.WorkCompletion, 1)); n != 0 || !errors.Is(err, rpma.ErrNoCompletion) {
		t.Errorf("server CQ: %d, %v; want ErrNoCompletion", n, err)
	}
}

// TestAtomicWrite: 8 bytes land at an aligned offset, natively where
// the device has ATOMIC_WRITE; misaligned offsets fail before posting.
func TestAtomicWrite(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 64, allRemote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor())
	rmr := remoteOf(t, p)
	val := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := p.c.AtomicWrite(rmr, 12, val, rpma.CompletionAlways, 1); !errors.Is(err, rpma.ErrInvalid) {
		t.Fatalf("misaligned AtomicWrite = %v, want ErrInvalid", err)
	}
	if err := p.c.AtomicWrite(rmr, 64, val, rpma.CompletionAlways, 1); !errors.Is(err, rpma.ErrInvalid) {
		t.Fatalf("AtomicWrite past the end = %v, want ErrInvalid", err)
	}
	// Without the server's word (no remote peer configuration) the
	// client emulates; with a configuration that says the server's
	// device executes ATOMIC_WRITE, it is native where the client's
	// device has it too.
	for i, tell := range []bool{false, true} {
		if tell {
			pcfg := rpma.NewPeerCfg()
			pcfg.SetNativeAtomicWrite(sp.NativeAtomicWrite())
			if err := p.c.ApplyRemotePeerCfg(pcfg); err != nil {
				t.Fatal(err)
			}
		}
		val[0] = byte(10 + i)
		id := uint64(1 + i)
		if err := p.c.AtomicWrite(rmr, 16, val, rpma.CompletionAlways, id); err != nil {
			t.Fatal(err)
		}
		wc := waitWC(t, ctx, p.c.CQ())
		if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != id {
			t.Fatalf("completion %+v: %v", wc, err)
		}
		native := tell && cp.NativeAtomicWrite() && sp.NativeAtomicWrite()
		wantOp := uverbs.WCRDMAWrite
		if native {
			wantOp = uverbs.WCAtomicWrite
		}
		if wc.Opcode != wantOp {
			t.Errorf("configuration applied %v: opcode %v, want %v (native on this side %v)", tell, wc.Opcode, wantOp, cp.NativeAtomicWrite())
		}
		if got := binary.LittleEndian.Uint64(smr.Bytes()[16:]); got != binary.LittleEndian.Uint64(val[:]) {
			t.Errorf("configuration applied %v: server memory %x, want %x", tell, smr.Bytes()[16:24], val)
		}
	}
	if vm := os.Getenv("PURERDMA_VM"); vm != "" {
		t.Logf("kernel %s: native atomic write %v", vm, cp.NativeAtomicWrite())
	}
}

// TestFlushTypes: persistence needs the remote peer's direct write to
// PMem and a region registered for it; the native method is used
// between purerdma peers where the device has FLUSH.
func TestFlushTypes(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	mem := pmemOrDRAM(t, 1<<20)
	smr, err := sp.RegMR(mem, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushPersistent|rpma.UsageFlushVisibility)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Close()
	vis := regMR(t, sp, 4096, rpma.UsageWriteDst)
	pcfg := rpma.NewPeerCfg()
	pcfg.SetDirectWriteToPMem(true)
	pcfg.SetNativeFlush(smr.NativeFlush())
	// Persistent memory takes both FLUSH rights where the device has
	// FLUSH; ordinary memory not the persistent one, and a region
	// without a flush usage neither.
	if smr.NativeFlush() != sp.NativeFlush() {
		t.Errorf("PMem region NativeFlush %v, device %v", smr.NativeFlush(), sp.NativeFlush())
	}
	if dram := regMR(t, sp, 4096, rpma.UsageWriteDst|rpma.UsageFlushPersistent); dram.NativeFlush() {
		t.Error("a DRAM region claims native flush to persistence")
	}
	if dram := regMR(t, sp, 4096, rpma.UsageWriteDst|rpma.UsageFlushVisibility); dram.NativeFlush() != sp.NativeFlush() {
		t.Errorf("DRAM region, visibility only: NativeFlush %v, device %v", dram.NativeFlush(), sp.NativeFlush())
	}
	if vis.NativeFlush() {
		t.Error("a region without a flush usage claims native flush")
	}
	pdata := append(smr.Descriptor(), pcfg.Descriptor()...)
	p := connect(t, ctx, sp, cp, nil, nil, nil, pdata)
	rmr := remoteOf(t, p)
	src := regMR(t, cp, 4096, rpma.UsageWriteSrc)
	copy(src.Bytes(), "persist me")
	if err := p.c.Write(rmr, 0, src, 0, 10, rpma.CompletionOnError, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.c.Flush(rmr, 0, 10, rpma.FlushPersistent, rpma.CompletionAlways, 2); !errors.Is(err, rpma.ErrNotSupported) {
		t.Fatalf("persistent flush before ApplyRemotePeerCfg = %v, want ErrNotSupported", err)
	}
	if p.c.NativeFlushUsed() {
		t.Fatal("native flush chosen before the remote configuration said its regions take it")
	}
	rcfg, err := rpma.PeerCfgFromDescriptor(p.cpdata[rpma.MRDescriptorSize:])
	if err != nil {
		t.Fatal(err)
	}
	if err := p.c.ApplyRemotePeerCfg(rcfg); err != nil {
		t.Fatal(err)
	}
	if got, want := p.c.NativeFlushUsed(), cp.NativeFlush(); got != want {
		t.Fatalf("NativeFlushUsed = %v between purerdma peers, device native flush %v", got, want)
	}
	for i, typ := range []rpma.FlushType{rpma.FlushPersistent, rpma.FlushVisibility} {
		if err := p.c.Flush(rmr, 0, 10, typ, rpma.CompletionAlways, uint64(10+i)); err != nil {
			t.Fatalf("Flush(%v): %v", typ, err)
		}
		wc := waitWC(t, ctx, p.c.CQ())
		wantOp := uverbs.WCRDMARead
		if p.c.NativeFlushUsed() {
			wantOp = uverbs.WCFlush
		}
		if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != uint64(10+i) || wc.Opcode != wantOp {
			t.Fatalf("flush %v completion %+v: %v (want opcode %v)", typ, wc, err, wantOp)
		}
	}
	if string(mem[:10]) != "persist me" {
		t.Errorf("server memory %q", mem[:10])
	}
	// A region registered without a flush usage refuses both types.
	vmr, _ := rpma.RemoteMRFromDescriptor(vis.Descriptor())
	for _, typ := range []rpma.FlushType{rpma.FlushPersistent, rpma.FlushVisibility} {
		if err := p.c.Flush(vmr, 0, 8, typ, rpma.CompletionAlways, 3); !errors.Is(err, rpma.ErrNotSupported) {
			t.Errorf("Flush(%v) of a region without flush usage = %v, want ErrNotSupported", typ, err)
		}
	}
	t.Logf("kernel %s: native flush %v", os.Getenv("PURERDMA_VM"), p.c.NativeFlushUsed())
}

// TestErrorCompletion: an operation the other side refuses completes
// with an error status, even unsignaled; the QP is then in error and
// later operations complete with a flush error.
func TestErrorCompletion(t *testing.T) {
	testenv.NotIWARP(t, "an iWARP RDMA WRITE completes once sent: a bad rkey at the peer ends the connection (TERMINATE) instead of failing the write")
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, allRemote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor())
	rmr := remoteOf(t, p)
	bad := *rmr
	bad.RKey ^= 0xff00
	src := regMR(t, cp, 64, rpma.UsageWriteSrc)
	if err := p.c.Write(&bad, 0, src, 0, 8, rpma.CompletionOnError, 7); err != nil {
		t.Fatal(err)
	}
	wc := waitWC(t, ctx, p.c.CQ())
	err := rpma.CompletionErr(&wc)
	var ce *rpma.CompletionError
	if !errors.As(err, &ce) || ce.OpContext != 7 || !errors.Is(err, uverbs.WCRemAccessErr) {
		t.Fatalf("bad rkey write: %+v, %v; want a remote access error with op context 7", wc, err)
	}
	t.Logf("%v", err)
	if err := p.c.Write(rmr, 0, src, 0, 8, rpma.CompletionAlways, 8); err != nil {
		t.Fatalf("write after the error: %v", err)
	}
	wc = waitWC(t, ctx, p.c.CQ())
	if wc.Status != uverbs.WCWRFlushErr || wc.WRID != 8 {
		t.Fatalf("write after the error: %+v, want WR_FLUSH_ERR", wc)
	}
}

// TestWaitsEnd: no completion yet, no event yet, and cancelled waits
// return at once with errors saying so.
func TestWaitsEnd(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 64, allRemote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor())
	if n, err := p.c.CQ().GetWC(make([]uverbs.WorkCompletion, 4)); n != 0 || !errors.Is(err, rpma.ErrNoCompletion) {
		t.Errorf("GetWC on an empty CQ: %d, %v", n, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.c.CQ().Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CQ Wait with nothing to come = %v, want DeadlineExceeded", err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if ev, err := p.c.NextEvent(short2); !errors.Is(err, rpma.ErrNoEvent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("NextEvent with nothing to come = %v, %v; want ErrNoEvent and DeadlineExceeded", ev, err)
	}
	if _, _, err := p.c.Wait(ctx); !errors.Is(err, rpma.ErrNotSharedChannel) {
		t.Errorf("Conn.Wait without a shared channel = %v", err)
	}
	if _, err := p.c.CompletionFd(); !errors.Is(err, rpma.ErrNotSharedChannel) {
		t.Errorf("CompletionFd without a shared channel = %v", err)
	}
	if p.c.EventFd() < 0 || p.c.CQ().Fd() < 0 {
		t.Errorf("fds %d %d", p.c.EventFd(), p.c.CQ().Fd())
	}
}

// TestSharedChannel: with one channel for the CQ and the receive CQ,
// Conn.Wait says which has a completion; CQ.Wait refuses.
func TestSharedChannel(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 64, rpma.UsageRecv|rpma.UsageSend)
	cfg := rpma.NewConnCfg()
	cfg.SetCompletionChannel(true)
	cfg.SetRCQSize(4)
	p := connect(t, ctx, sp, cp, cfg, cfg, nil, nil)
	if fd, err := p.c.CompletionFd(); err != nil || fd < 0 {
		t.Fatalf("CompletionFd: %d, %v", fd, err)
	}
	if err := p.c.CQ().Wait(ctx); !errors.Is(err, rpma.ErrSharedChannel) {
		t.Fatalf("CQ.Wait on a shared channel = %v", err)
	}
	cmr := regMR(t, cp, 64, rpma.UsageRecv|rpma.UsageSend)
	if err := p.c.Recv(cmr, 0, 64, 5); err != nil {
		t.Fatal(err)
	}
	if err := p.s.Send(smr, 0, 8, rpma.CompletionOnError, 1); err != nil {
		t.Fatal(err)
	}
	cq, isRCQ, err := p.c.Wait(ctx)
	if err != nil || !isRCQ || cq != p.c.RCQ() {
		t.Fatalf("Conn.Wait = %v, %v, %v; want the receive CQ", cq, isRCQ, err)
	}
	wc := make([]uverbs.WorkCompletion, 2)
	if n, err := cq.GetWC(wc); n != 1 || err != nil || wc[0].WRID != 5 || wc[0].Status != uverbs.WCSuccess {
		t.Fatalf("GetWC: %d %v %+v", n, err, wc[0])
	}
	if err := p.c.Send(cmr, 0, 8, rpma.CompletionAlways, 6); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	// The server has no receive posted: RNR retries go on, so the send
	// is still outstanding; post one and the send completes.
	if err := p.s.Recv(smr, 0, 64, 9); err != nil {
		t.Fatal(err)
	}
	cq, isRCQ, err = p.c.Wait(ctx)
	if err != nil || isRCQ || cq != p.c.CQ() {
		t.Fatalf("Conn.Wait = %v, %v, %v; want the main CQ", cq, isRCQ, err)
	}
	if n, err := cq.GetWC(wc); n != 1 || err != nil || wc[0].WRID != 6 {
		t.Fatalf("GetWC: %d %v %+v", n, err, wc[0])
	}
}

// TestSRQ: two clients' messages land in one SRQ and complete on its
// receive CQ.
func TestSRQ(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	srq, err := sp.NewSRQ(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the connections' cleanups
		if err := srq.Close(); err != nil {
			t.Errorf("SRQ Close: %v", err)
		}
	})
	if srq.RCQ() == nil {
		t.Fatal("default SRQ has no receive CQ")
	}
	scfg := rpma.NewConnCfg()
	scfg.SetSRQ(srq)
	bad := rpma.NewConnCfg()
	bad.SetSRQ(srq)
	bad.SetCompletionChannel(true)
	smr := regMR(t, sp, 4096, rpma.UsageRecv)
	for i := range 4 {
		if err := srq.Recv(smr, i*64, 64, uint64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	var clients []*pair
	for range 2 {
		clients = append(clients, connect(t, ctx, sp, cp, scfg, nil, nil, nil))
	}
	cmr := regMR(t, cp, 64, rpma.UsageSend)
	for i, p := range clients {
		copy(cmr.Bytes(), []byte{byte('a' + i)})
		if err := p.c.Send(cmr, 0, 1, rpma.CompletionAlways, 1); err != nil {
			t.Fatal(err)
		}
		waitWC(t, ctx, p.c.CQ())
		if err := p.s.Recv(smr, 0, 8, 1); !errors.Is(err, rpma.ErrInvalid) {
			t.Errorf("Conn.Recv on an SRQ connection = %v, want ErrInvalid", err)
		}
	}
	got := map[byte]bool{}
	for range 2 {
		wc := waitWC(t, ctx, srq.RCQ())
		if wc.Status != uverbs.WCSuccess || wc.ByteLen != 1 || wc.WRID < 100 {
			t.Fatalf("SRQ completion %+v", wc)
		}
		got[smr.Bytes()[(wc.WRID-100)*64]] = true
	}
	if !got['a'] || !got['b'] {
		t.Errorf("SRQ received %v", got)
	}
}

// TestSendQueueFull: a full send queue fails at once with ErrAgain,
// which matches uverbs.ErrBusy, and the refused operation never runs.
// The sends wait at the server, which has no receive posted (RNR
// retries), so the queue stays full until it posts them.
func TestSendQueueFull(t *testing.T) {
	testenv.NotIWARP(t, "the sends go out before the peer posts receives, which InfiniBand's RNR retry waits for; iWARP has no RNR retry (such a send ends the connection)")
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, rpma.UsageRecv)
	ccfg := rpma.NewConnCfg()
	ccfg.SetSQSize(4)
	ccfg.SetCQSize(64)
	scfg := rpma.NewConnCfg()
	scfg.SetRQSize(64)
	p := connect(t, ctx, sp, cp, scfg, ccfg, nil, nil)
	src := regMR(t, cp, 64, rpma.UsageSend)
	posted := 0
	for i := range 64 {
		err := p.c.Send(src, 0, 8, rpma.CompletionAlways, uint64(i))
		if err == nil {
			posted++
			continue
		}
		if !errors.Is(err, rpma.ErrAgain) || !errors.Is(err, uverbs.ErrBusy) {
			t.Fatalf("send %d: %v, want ErrAgain", i, err)
		}
		break
	}
	if posted != int(p.c.QP().Cap().MaxSendWR) {
		t.Fatalf("%d sends posted to a send queue of %d before the refusal", posted, p.c.QP().Cap().MaxSendWR)
	}
	for i := range posted + 1 {
		if err := p.s.Recv(smr, i*64, 64, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range posted {
		if wc := waitWC(t, ctx, p.c.CQ()); wc.Status != uverbs.WCSuccess || wc.WRID != uint64(i) {
			t.Fatalf("completion %+v", wc)
		}
	}
	// The refused send never runs: the server's extra receive stays
	// empty.
	time.Sleep(100 * time.Millisecond)
	wc := make([]uverbs.WorkCompletion, 70)
	n, _ := p.s.CQ().GetWC(wc)
	if n != posted {
		t.Fatalf("server received %d messages, %d were posted", n, posted)
	}
}

// TestBadInput: bad arguments fail with ErrInvalid before anything is
// posted.
func TestBadInput(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 64, rpma.UsageReadSrc)
	p := connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor())
	rmr := remoteOf(t, p)
	local := regMR(t, cp, 64, rpma.UsageReadDst|rpma.UsageWriteSrc|rpma.UsageSend|rpma.UsageRecv)
	c := p.c
	for name, f := range map[string]func() error{
		"flags 0":            func() error { return c.Read(local, 0, rmr, 0, 8, 0, 1) },
		"flags 4":            func() error { return c.Read(local, 0, rmr, 0, 8, 4, 1) },
		"local past end":     func() error { return c.Read(local, 60, rmr, 0, 8, rpma.CompletionAlways, 1) },
		"remote past end":    func() error { return c.Read(local, 0, rmr, 60, 8, rpma.CompletionAlways, 1) },
		"negative offset":    func() error { return c.Read(local, -1, rmr, 0, 8, rpma.CompletionAlways, 1) },
		"negative length":    func() error { return c.Read(local, 0, rmr, 0, -8, rpma.CompletionAlways, 1) },
		"one region nil":     func() error { return c.Read(nil, 0, rmr, 0, 8, rpma.CompletionAlways, 1) },
		"write to read-only": func() error { return c.Write(rmr, 0, local, 0, 8, rpma.CompletionAlways, 1) },
		"atomic nil":         func() error { return c.AtomicWrite(nil, 0, [8]byte{}, rpma.CompletionAlways, 1) },
		"flush nil":          func() error { return c.Flush(nil, 0, 8, rpma.FlushVisibility, rpma.CompletionAlways, 1) },
		"flush type":         func() error { return c.Flush(rmr, 0, 8, 9, rpma.CompletionAlways, 1) },
		"send past end":      func() error { return c.Send(local, 0, 65, rpma.CompletionAlways, 1) },
		"send nil with len":  func() error { return c.Send(nil, 0, 1, rpma.CompletionAlways, 1) },
		"recv nil with len":  func() error { return c.Recv(nil, 4, 0, 1) },
		"apply nil cfg":      func() error { return c.ApplyRemotePeerCfg(nil) },
		"nil ctx wait":       func() error { return c.CQ().Wait(nil) }, //nolint:staticcheck // the nil is the test
		"empty wc slice":     func() error { _, err := c.CQ().GetWC(nil); return err },
		"reg empty":          func() error { _, err := cp.RegMR(nil, rpma.UsageSend); return err },
		"reg usage 0":        func() error { _, err := cp.RegMR(make([]byte, 8), 0); return err },
		"peer nil":           func() error { _, err := rpma.NewPeer(nil); return err },
		"listen no port":     func() error { _, err := sp.Listen(ctx, serverAddr, ""); return err },
	} {
		if err := f(); !errors.Is(err, rpma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A zero-byte read with no regions is allowed, as in librpma.
	if err := c.Read(nil, 0, nil, 0, 0, rpma.CompletionAlways, 42); err != nil {
		t.Fatalf("zero-byte read: %v", err)
	}
	if wc := waitWC(t, ctx, c.CQ()); wc.WRID != 42 || wc.Status != uverbs.WCSuccess {
		t.Fatalf("zero-byte read completion %+v", wc)
	}
	if n, _ := c.CQ().GetWC(make([]uverbs.WorkCompletion, 4)); n != 0 {
		t.Fatalf("%d completions of refused operations", n)
	}
}

// TestDisconnectEvents: a client's Disconnect reaches the server as
// ConnClosed; a rejected request reaches the client as ConnRejected.
func TestDisconnectEvents(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, nil)
	if err := p.c.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev, err := p.s.NextEvent(ctx); err != nil || ev != rpma.ConnClosed {
		t.Fatalf("server after the client's Disconnect: %v, %v; want closed", ev, err)
	}
	// The server answers, as librpma's examples do; then the client's
	// disconnect completes.
	if err := p.s.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev, err := p.c.NextEvent(ctx); err != nil || ev != rpma.ConnClosed {
		t.Fatalf("client after the server's answer: %v, %v; want closed", ev, err)
	}

	ep, err := sp.Listen(ctx, serverAddr, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	// The server rejects; its Close goes on after the client saw the
	// reject, so the test waits for it before the peers close.
	served := make(chan error, 1)
	go func() {
		req, err := ep.NextConnReq(ctx, nil)
		if err != nil {
			served <- err
			return
		}
		served <- req.Close()
	}()
	req, err := cp.NewConnReq(ctx, serverAddr, itoa(int(ep.Addr().Port())), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := req.Connect([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev, err := c.NextEvent(ctx)
	if serr := <-served; serr != nil {
		t.Errorf("server: take and reject the request: %v", serr)
	}
	if err != nil || ev != rpma.ConnRejected {
		t.Fatalf("rejected request: %v, %v", ev, err)
	}
	if err := req.Close(); err != nil {
		t.Errorf("Close of a used request: %v", err)
	}
}

// TestRecvBeforeConnect: a receive posted on the request catches a
// message the other side sends as soon as it is connected. On iWARP
// "connected" is when the client has its ESTABLISHED too: siw's
// connecting side fails the connect if data follows the MPA reply it
// has not read yet (siw_recv_mpa_rr, "peer sent extra data"; Linux 6.1
// and 6.12), so there the server sends once the client says so.
func TestRecvBeforeConnect(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	ep, err := sp.Listen(ctx, serverAddr, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	smr := regMR(t, sp, 64, rpma.UsageSend)
	copy(smr.Bytes(), "welcome")
	errc := make(chan error, 1)
	served := make(chan struct{})
	clientUp := make(chan struct{}) // closed at the client's ESTABLISHED
	t.Cleanup(func() { <-served })  // before the peers close
	go func() {
		defer close(served)
		req, err := ep.NextConnReq(ctx, nil)
		if err != nil {
			errc <- err
			return
		}
		c, err := req.Connect(nil)
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
			errc <- errors.Join(err, errors.New(ev.String()))
			return
		}
		if testenv.CurrentFabric().IWARP {
			select {
			case <-clientUp:
			case <-ctx.Done():
				errc <- fmt.Errorf("waiting for the client's ESTABLISHED: %w", ctx.Err())
				return
			}
		}
		if err := c.Send(smr, 0, 7, rpma.CompletionAlways, 1); err != nil {
			errc <- err
			return
		}
		wc := waitWC(t, ctx, c.CQ())
		errc <- rpma.CompletionErr(&wc)
		c.NextEvent(ctx) // the client's disconnect
	}()
	req, err := cp.NewConnReq(ctx, serverAddr, itoa(int(ep.Addr().Port())), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmr := regMR(t, cp, 64, rpma.UsageRecv)
	if err := req.Recv(cmr, 0, 64, 77); err != nil {
		t.Fatal(err)
	}
	c, err := req.Connect(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		t.Fatal(ev, err)
	}
	close(clientUp)
	wc := waitWC(t, ctx, c.CQ())
	if wc.WRID != 77 || wc.ByteLen != 7 || string(cmr.Bytes()[:7]) != "welcome" {
		t.Fatalf("receive %+v %q", wc, cmr.Bytes()[:7])
	}
	if err := <-errc; err != nil {
		t.Fatalf("server: %v", err)
	}
	c.Disconnect()
}

// TestODP: rxe has no on-demand paging: the capability says so and
// advice fails with ErrNotSupported.
func TestODP(t *testing.T) {
	ctx := testContext(t)
	cp := newPeer(t, ctx, rpma.Remote)
	odp, err := rpma.IsODPCapable(cp.Context())
	if err != nil || odp || cp.ODPCapable() {
		t.Fatalf("IsODPCapable = %v, %v; peer %v; rxe has no ODP", odp, err, cp.ODPCapable())
	}
	mr := regMR(t, cp, 4096, rpma.UsageReadDst)
	if err := mr.Advise(0, 4096, uverbs.AdvisePrefetchWrite, uverbs.AdviseFlush); !errors.Is(err, rpma.ErrNotSupported) {
		t.Fatalf("Advise on rxe = %v, want ErrNotSupported", err)
	}
	if err := mr.Advise(4000, 200, uverbs.AdvisePrefetch, 0); !errors.Is(err, rpma.ErrInvalid) {
		t.Fatalf("Advise past the end = %v, want ErrInvalid", err)
	}
}

// TestPostAllocs: writing, flushing and polling allocate nothing.
func TestPostAllocs(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, allRemote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor())
	rmr := remoteOf(t, p)
	src := regMR(t, cp, 4096, rpma.UsageWriteSrc)
	wc := make([]uverbs.WorkCompletion, 1)
	allocs := testing.AllocsPerRun(200, func() {
		if err := p.c.Write(rmr, 0, src, 0, 64, rpma.CompletionOnError, 1); err != nil {
			panic(err)
		}
		if err := p.c.Flush(rmr, 0, 64, rpma.FlushVisibility, rpma.CompletionAlways, 2); err != nil {
			panic(err)
		}
		for {
			n, _ := p.c.CQ().GetWC(wc)
			if n == 1 {
				break
			}
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per write + flush + poll", allocs)
	}
}

// TestConcurrentConnections: goroutines share the peers, each with its
// own connection, writing, flushing and reading back its own slice of
// one server region.
//
//purerdma:race
func TestConcurrentConnections(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	const n, rounds, slot = 4, 50, 256
	smr := regMR(t, sp, n*slot, allRemote)
	var pairs []*pair
	for range n {
		pairs = append(pairs, connect(t, ctx, sp, cp, nil, nil, nil, smr.Descriptor()))
	}
	var wg sync.WaitGroup
	for g, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rmr, err := rpma.RemoteMRFromDescriptor(p.cpdata)
			if err != nil {
				t.Error(err)
				return
			}
			mr, err := cp.RegMR(make([]byte, 2*slot), rpma.UsageWriteSrc|rpma.UsageReadDst)
			if err != nil {
				t.Error(err)
				return
			}
			defer mr.Close()
			for r := range rounds {
				b := mr.Bytes()
				for i := range slot {
					b[i] = byte(g*31 + r + i)
				}
				off := g * slot
				if err := p.c.Write(rmr, off, mr, 0, slot, rpma.CompletionOnError, 1); err != nil {
					t.Error(err)
					return
				}
				if err := p.c.Read(mr, slot, rmr, off, slot, rpma.CompletionAlways, 2); err != nil {
					t.Error(err)
					return
				}
				wc := waitWC(t, ctx, p.c.CQ())
				if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != 2 {
					t.Errorf("goroutine %d round %d: %+v %v", g, r, wc, err)
					return
				}
				if string(b[:slot]) != string(b[slot:]) {
					t.Errorf("goroutine %d round %d: read back differs", g, r)
					return
				}
			}
		}()
	}
	wg.Wait()
}
