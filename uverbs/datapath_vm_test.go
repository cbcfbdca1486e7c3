package uverbs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// end is one side of a connection: rxe0 or rxe1 with its objects.
type end struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	cq   *uverbs.CQ
	ch   *uverbs.CompChannel
	qp   *uverbs.QP
	qcfg uverbs.QPConfig // on iWARP, the QP connectPair creates (setQP)
	srq  *uverbs.SRQ
	buf  []byte
	mr   *uverbs.MR
	gidx int
	gid  uverbs.GID
}

type pairOpts struct {
	typ     uverbs.QPType
	channel bool
	srq     bool
	td      bool
}

func newEnd(t *testing.T, dev int, o pairOpts) *end {
	t.Helper()
	notIWARPType(t, o.typ)
	e := &end{ctx: openContextOn(t, dev)}
	e.pd = newPD(t, e.ctx)
	cfg := uverbs.CQConfig{Size: 64}
	if o.channel {
		ch, err := e.ctx.CreateCompChannel()
		if err != nil {
			t.Fatal(err)
		}
		e.ch, cfg.Channel = ch, ch
	}
	var td *uverbs.TD
	if o.td {
		var err error
		if td, err = e.ctx.AllocTD(); err != nil {
			t.Fatal(err)
		}
		cfg.TD = td
	}
	e.cq = newCQ(t, e.ctx, cfg)
	qcfg := uverbs.QPConfig{Type: o.typ, SendCQ: e.cq, RecvCQ: e.cq, TD: td,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}}
	if o.srq {
		srq, err := e.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srq.Close() })
		e.srq, qcfg.SRQ = srq, srq
	}
	setQP(t, e, qcfg)
	e.buf = make([]byte, 8192)
	mr, err := e.pd.RegMR(e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	e.mr = mr
	if !testenv.CurrentFabric().IWARP {
		e.gidx, e.gid = roceV2GID(t, e.ctx.Device().Name) // iWARP has no GIDs to address
	}
	return e
}

const qkey = 0x11111111

// connect moves a's QP to RTS towards b's.
func connect(t *testing.T, a, b *end) {
	t.Helper()
	connectTo(t, a, b.qp.Num(), b.gid)
}

// connectTo moves a's QP to RTS towards QP qpn at gid, a Go end or not.
func connectTo(t *testing.T, a *end, qpn uint32, gid uverbs.GID) {
	t.Helper()
	notIWARPConnect(t)
	typ := a.qp.Type()
	attr := &uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, QKey: qkey,
		AccessFlags: allAccess}
	mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
	if typ == uverbs.QPTypeUD {
		mask |= uverbs.QPAttrQKey
	} else {
		mask |= uverbs.QPAttrAccessFlags
	}
	if err := a.qp.Modify(attr, mask); err != nil {
		t.Fatalf("INIT: %v", err)
	}
	attr = &uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPNum: qpn, RQPSN: 7,
		MaxDestRdAtomic: 4, MinRNRTimer: 1,
		AHAttr: uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: a.gidx, HopLimit: 64}}}
	mask = uverbs.QPAttrState
	switch typ {
	case uverbs.QPTypeRC:
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	case uverbs.QPTypeUC:
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
	}
	if err := a.qp.Modify(attr, mask); err != nil {
		t.Fatalf("RTR: %v", err)
	}
	attr = &uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 7, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4}
	mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
	if typ == uverbs.QPTypeRC {
		mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
	}
	if err := a.qp.Modify(attr, mask); err != nil {
		t.Fatalf("RTS: %v", err)
	}
}

// newPair is two connected ends, on the fabric's first and second
// device: by QP modify on RoCE, through the rdma_cm on iWARP
// (connectPair).
func newPair(t *testing.T, o pairOpts) (a, b *end) {
	a, b = newEnd(t, 0, o), newEnd(t, 1, o)
	connectPair(t, a, b)
	return a, b
}

// waitWC polls until one completion arrives; its 30 s only end a hang.
func waitWC(t *testing.T, cq *uverbs.CQ) uverbs.WorkCompletion {
	t.Helper()
	var wc [1]uverbs.WorkCompletion
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v: %v", wc[0], wc[0].Status)
			}
			return wc[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatal("no completion within 30s")
	return uverbs.WorkCompletion{}
}

func (e *end) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

func TestRCSendRecv(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	for _, inline := range []bool{false, true} {
		msg := []byte("hello over soft-RoCE")
		if inline {
			msg = []byte("inline this")
		}
		copy(a.buf, msg)
		clear(b.buf[:64])
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 2, SGL: []uverbs.SGE{b.sge(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		wr := &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0xdeadbeef,
			SGL: []uverbs.SGE{a.sge(0, len(msg))}}
		if inline {
			wr.Flags |= uverbs.SendInline
		}
		if iwarp() { // no immediate data: refused before the queue; a plain SEND instead
			wantNotSupported(t, a.qp.PostSend(wr))
			wr.Opcode = uverbs.WRSend
		}
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		if inline {
			copy(a.buf, "XXXXXXXXXXX") // inline data was copied at post time
		}
		sc := waitWC(t, a.cq)
		rc := waitWC(t, b.cq)
		if sc.WRID != 1 || sc.Opcode != uverbs.WCSend {
			t.Errorf("send completion %+v", sc)
		}
		if rc.WRID != 2 || rc.Opcode != uverbs.WCRecv || rc.ByteLen != uint32(len(msg)) ||
			rc.Flags&uverbs.WCWithImm != 0 == iwarp() || !iwarp() && rc.Imm != 0xdeadbeef || rc.QPNum != b.qp.Num() {
			t.Errorf("recv completion %+v", rc)
		}
		if !bytes.Equal(b.buf[:len(msg)], msg) {
			t.Errorf("received %q, want %q", b.buf[:len(msg)], msg)
		}
	}
}

func TestRDMAWriteReadAtomics(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	copy(a.buf[100:], "written by RDMA WRITE")
	err := a.qp.PostSend(&uverbs.SendWR{WRID: 10, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(100, 21)}, RemoteAddr: b.mr.Addr() + 1000, RKey: b.mr.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq); wc.Opcode != uverbs.WCRDMAWrite {
		t.Errorf("write completion %+v", wc)
	}
	wantWritten(t, "remote buffer", []byte("written by RDMA WRITE"), b.buf[1000:1021])
	copy(b.buf[2000:], "read me back")
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 11, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(3000, 12)}, RemoteAddr: b.mr.Addr() + 2000, RKey: b.mr.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq); wc.Opcode != uverbs.WCRDMARead || wc.ByteLen != 12 {
		t.Errorf("read completion %+v", wc)
	}
	if got := string(a.buf[3000:3012]); got != "read me back" {
		t.Errorf("read %q", got)
	}
	binary.NativeEndian.PutUint64(b.buf[4096:], 40)
	if iwarp() { // RDMAP has no atomics: refused before the queue
		for _, op := range []uverbs.WROpcode{uverbs.WRAtomicFetchAndAdd, uverbs.WRAtomicCmpAndSwp} {
			wantNotSupported(t, a.qp.PostSend(&uverbs.SendWR{WRID: 12, Opcode: op, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(4096, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey(), CompareAdd: 2}))
		}
		noMoreWCs(t, a.cq, "refused atomics")
		return
	}
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 12, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(4096, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey(), CompareAdd: 2})
	if err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq); wc.Opcode != uverbs.WCFetchAdd {
		t.Errorf("fetch-add completion %+v", wc)
	}
	if old, now := binary.NativeEndian.Uint64(a.buf[4096:]), binary.NativeEndian.Uint64(b.buf[4096:]); old != 40 || now != 42 {
		t.Errorf("fetch-add: old %d now %d, want 40 and 42", old, now)
	}
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 13, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(4104, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey(), CompareAdd: 42, Swap: 7})
	if err != nil {
		t.Fatal(err)
	}
	if wc := waitWC(t, a.cq); wc.Opcode != uverbs.WCCompSwap {
		t.Errorf("cmp-swap completion %+v", wc)
	}
	if old, now := binary.NativeEndian.Uint64(a.buf[4104:]), binary.NativeEndian.Uint64(b.buf[4096:]); old != 42 || now != 7 {
		t.Errorf("cmp-swap: old %d now %d, want 42 and 7", old, now)
	}
	// A misaligned atomic is refused before it reaches the queue.
	err = a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr() + 3, RKey: b.mr.RKey()})
	if err == nil {
		t.Error("misaligned atomic posted")
	}
}

func TestUDSendRecv(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeUD})
	ah, err := a.pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: b.gid, SGIDIndex: a.gidx, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	const grh = 40
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 5, SGL: []uverbs.SGE{b.sge(0, grh+100)}}); err != nil {
		t.Fatal(err)
	}
	copy(a.buf, "datagram")
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 6, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 8)}, AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: qkey})
	if err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.cq)
	rc := waitWC(t, b.cq)
	if rc.ByteLen != grh+8 || rc.Flags&uverbs.WCWithGRH == 0 || rc.SrcQP != a.qp.Num() {
		t.Errorf("UD recv completion %+v", rc)
	}
	if got := string(b.buf[grh : grh+8]); got != "datagram" {
		t.Errorf("received %q", got)
	}
	// UD can only send.
	if err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRRDMAWrite}); err == nil {
		t.Error("RDMA WRITE posted on a UD QP")
	}
}

func TestSRQReceives(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, srq: true})
	for i := range 3 {
		if err := b.srq.PostRecv(&uverbs.RecvWR{WRID: uint64(100 + i), SGL: []uverbs.SGE{b.sge(i*64, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		a.buf[i] = byte('a' + i)
		if err := a.qp.PostSend(&uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(i, 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		waitWC(t, a.cq)
		wc := waitWC(t, b.cq)
		if wc.WRID != uint64(100+i) || b.buf[i*64] != byte('a'+i) {
			t.Errorf("SRQ receive %d: %+v, data %q", i, wc, b.buf[i*64])
		}
	}
}

// TestSendQueueFullIsBusy fills a send queue whose peer posted no
// receives (RNR retries forever): the next post fails with ErrBusy
// instead of waiting for room (PostSend takes no context, so a post that
// waited would hang). How long the refused post took is logged, not
// asserted.
func TestSendQueueFullIsBusy(t *testing.T) {
	testenv.NotIWARP(t, "no receiver-not-ready retry: a send that finds no receive ends the connection, and siw frees a send-queue slot once it took the request, so the queue does not stay full")
	a, _ := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	n := int(a.qp.Cap().MaxSendWR)
	wr := &uverbs.SendWR{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 1)}}
	for i := range n - 1 {
		wr.WRID = uint64(i)
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatalf("post %d of %d: %v", i, n, err)
		}
	}
	// A list of two with one free slot: the PostError says where it stopped.
	err := a.qp.PostSend(&uverbs.SendWR{WRID: 1000, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 1)},
		Next: &uverbs.SendWR{WRID: 1001, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 1)}}})
	var pe *uverbs.PostError
	if !errors.As(err, &pe) || pe.Index != 1 || pe.WRID != 1001 || !errors.Is(err, uverbs.ErrBusy) {
		t.Fatalf("list into one free slot = %v, want a PostError at index 1 matching ErrBusy", err)
	}
	start := time.Now()
	err = a.qp.PostSend(wr)
	if !errors.Is(err, uverbs.ErrBusy) {
		t.Fatalf("post %d = %v, want ErrBusy", n+1, err)
	}
	if errors.As(err, &pe) {
		t.Errorf("a first-request failure must not be a PostError: %v", err)
	}
	// Logged, not asserted: a loaded machine stretches any duration.
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Logf("busy post took %v", d)
	}
}

//purerdma:race
func TestCompChannelWakesOnCompletion(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, channel: true})
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{b.sge(0, 16)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	got := make(chan *uverbs.CQ, 1)
	errc := make(chan error, 1)
	go func() {
		cq, err := b.ch.Wait(context.Background())
		if err != nil {
			errc <- err
			return
		}
		got <- cq
	}()
	time.Sleep(50 * time.Millisecond) // let it block in the poller
	if err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 4)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case cq := <-got:
		if cq != b.cq {
			t.Fatalf("Wait returned another CQ")
		}
		cq.AckEvents(1)
		var wc [1]uverbs.WorkCompletion
		if n, _ := cq.Poll(wc[:]); n != 1 || wc[0].Opcode != uverbs.WCRecv {
			t.Errorf("after the event, Poll = %d %+v", n, wc[0])
		}
		if cq.Unacked() != 0 {
			t.Errorf("Unacked = %d", cq.Unacked())
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(30 * time.Second): // only ends a hang
		t.Fatal("no completion event")
	}
}

//purerdma:race
func TestCompChannelWaitCancel(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ch.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	// Logged, not asserted: a loaded machine stretches any duration.
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("cancel took %v", d)
	}
}

// TestCompChannelWaitClose: closing the context (which closes the
// channel) wakes a blocked Wait with ErrClosed; TestMain's goroutine
// leak check proves the waiter is gone.
//
//purerdma:race
func TestCompChannelWaitClose(t *testing.T) {
	d := openContextOn(t, 0).Device()
	c, err := d.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := ch.Wait(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("Wait after Close = %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second): // only ends a hang
		t.Fatal("Close did not wake Wait")
	}
}

// TestFastPathAllocs: posting and polling allocate nothing.
func TestFastPathAllocs(t *testing.T) {
	for _, td := range []bool{false, true} {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, td: td})
		rwr := &uverbs.RecvWR{SGL: []uverbs.SGE{b.sge(0, 64)}}
		swr := &uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}
		var wc [4]uverbs.WorkCompletion
		drain := func() {
			for got := 0; got < 2; {
				n1, _ := a.cq.Poll(wc[:])
				n2, _ := b.cq.Poll(wc[:])
				got += n1 + n2
			}
		}
		allocs := testing.AllocsPerRun(200, func() {
			if err := b.qp.PostRecv(rwr); err != nil {
				panic(err)
			}
			if err := a.qp.PostSend(swr); err != nil {
				panic(err)
			}
			drain()
		})
		if allocs != 0 {
			t.Errorf("TD %v: post send + post recv + poll allocate %v times per run, want 0", td, allocs)
		}
	}
}

// TestUDReplyFromWC answers a datagram through an AH built from its
// completion and GRH (ibv_create_ah_from_wc).
func TestUDReplyFromWC(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeUD})
	ah, err := a.pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: b.gid, SGIDIndex: a.gidx, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	if err := b.qp.PostRecv(&uverbs.RecvWR{SGL: []uverbs.SGE{b.sge(0, uverbs.GRHLen+64)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostRecv(&uverbs.RecvWR{SGL: []uverbs.SGE{a.sge(1024, uverbs.GRHLen+64)}}); err != nil {
		t.Fatal(err)
	}
	copy(a.buf, "ping")
	if err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 4)},
		AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: qkey}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.cq)
	wc := waitWC(t, b.cq)
	attr, err := b.ctx.InitAHFromWC(1, &wc, b.buf[:uverbs.GRHLen])
	if err != nil {
		t.Fatalf("InitAHFromWC: %v", err)
	}
	if !attr.IsGlobal || attr.GRH.DGID != a.gid || attr.GRH.SGIDIndex != b.gidx {
		t.Errorf("AH attributes from the completion: %+v; want DGID %x, SGID index %d", attr, a.gid, b.gidx)
	}
	reply, err := b.pd.CreateAHFromWC(1, &wc, b.buf[:uverbs.GRHLen])
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Close()
	copy(b.buf[512:], "pong")
	if err := b.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{b.sge(512, 4)},
		AH: reply, RemoteQPN: wc.SrcQP, RemoteQKey: qkey}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, b.cq)
	waitWC(t, a.cq)
	if got := string(a.buf[1024+uverbs.GRHLen : 1024+uverbs.GRHLen+4]); got != "pong" {
		t.Errorf("reply %q", got)
	}
}

// TestConcurrentPosters posts from four goroutines on one QP (the default,
// locked mode) while a receiver keeps receives posted, and checks that
// every send completes exactly once. One guard context ends every wait
// of the test, so that a stopped QP fails it instead of hanging it; no
// outcome depends on how long anything takes within it.
//
// The posters take a CQ credit per signaled send and the poller returns it,
// so completions never outnumber the CQ: rxe drops a completion that finds
// its CQ full (TestCQOverflowIsReported), and without credits a poller that
// loses its CPU to four posters for a few milliseconds overflows the CQ.
//
//purerdma:race
func TestConcurrentPosters(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	const goroutines, each = 4, 50
	total := goroutines * each
	credits := make(chan struct{}, a.cq.Size())
	for range a.cq.Size() {
		credits <- struct{}{}
	}
	// On iWARP a send that finds no receive ends the connection (no
	// RNR retries): each send also takes a receive the receiver posted.
	var recvCredits chan struct{}
	if iwarp() {
		recvCredits = make(chan struct{}, total)
	}
	guard, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := make(map[uint64]int)
	recvd := 0
	done := make(chan struct{})
	go func() { // the receiver: keeps receives posted, counts completions
		defer close(done)
		var wc [8]uverbs.WorkCompletion
		posted := 0
		for recvd < total && guard.Err() == nil {
			for posted-recvd < 8 && posted < total {
				if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(posted), SGL: []uverbs.SGE{b.sge(0, 16)}}); err != nil {
					t.Error(err)
					return
				}
				posted++
				if recvCredits != nil {
					recvCredits <- struct{}{}
				}
			}
			n, _ := b.cq.Poll(wc[:])
			recvd += n
		}
	}()
	errc := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			for i := range each {
				wr := &uverbs.SendWR{WRID: uint64(g*each + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(g*16, 1)}}
				select {
				case <-credits:
				case <-guard.Done():
					errc <- fmt.Errorf("no CQ credit: %w", guard.Err())
					return
				}
				if recvCredits != nil {
					select {
					case <-recvCredits:
					case <-guard.Done():
						errc <- fmt.Errorf("no receive posted: %w", guard.Err())
						return
					}
				}
				for {
					err := a.qp.PostSend(wr)
					if errors.Is(err, uverbs.ErrBusy) && guard.Err() == nil {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					if err != nil {
						errc <- err
						return
					}
					break
				}
			}
			errc <- nil
		}()
	}
	var wc [8]uverbs.WorkCompletion
	for len(seen) < total && guard.Err() == nil {
		n, err := a.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v", w)
			}
			seen[w.WRID]++
			credits <- struct{}{}
		}
	}
	for range goroutines {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if len(seen) != total || recvd != total {
		var missing []uint64
		for id := range uint64(total) {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		var dups []uint64
		for id, n := range seen {
			if n > 1 || id >= uint64(total) {
				dups = append(dups, id)
			}
		}
		st, _ := a.qp.Query(uverbs.QPAttrState)
		t.Fatalf("%d distinct send completions and %d receives, want %d; missing %v; duplicated or foreign wr_ids %v; sender QP %v",
			len(seen), recvd, total, missing, dups, st.State)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("wr_id %d completed %d times", id, n)
		}
	}
}

// TestCQOverflowIsReported fills a send CQ that nobody polls. rxe cannot
// store the completion that finds the CQ full; the kernel reports that as
// a CQ_ERR asynchronous event, which must reach the Go caller with the CQ.
func TestCQOverflowIsReported(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	dst := b.mr.Addr()
	sent := 0
	deadline := time.Now().Add(20 * time.Second)
	for sent < a.cq.Size()+8 && time.Now().Before(deadline) {
		err := a.qp.PostSend(&uverbs.SendWR{WRID: uint64(sent), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: dst, RKey: b.mr.RKey()})
		if errors.Is(err, uverbs.ErrBusy) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := a.ctx.AsyncEvent(ctx)
		if err != nil {
			t.Fatalf("no CQ_ERR after %d signaled writes into a CQ of %d: %v", sent, a.cq.Size(), err)
		}
		if ev.Type == uverbs.EventCQErr && ev.CQ == a.cq {
			break
		}
		t.Logf("other event: %v", ev)
	}
	// One Poll with room for more than the CQ holds takes one snapshot
	// of the ring (the producer index is read once, the consumer index
	// published at the end), so it sees at most the CQ's size however
	// many writes rxe is still completing.
	wc := make([]uverbs.WorkCompletion, a.cq.Size()+8)
	got, err := a.cq.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	if got > a.cq.Size() || got == 0 {
		t.Errorf("polled %d completions from a full CQ of %d", got, a.cq.Size())
	}
	// Draining frees slots, and on 6.12 rxe's kworkers may still be
	// finishing writes (a loop of small polls once took 129 from a CQ of
	// 127); at least the completion that raised CQ_ERR is gone for good.
	for {
		n, err := a.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got += n
	}
	if got >= sent {
		t.Errorf("polled %d completions of %d signaled writes after CQ_ERR, want at most %d", got, sent, sent-1)
	}
	st, _ := a.qp.Query(uverbs.QPAttrState)
	t.Logf("%d writes posted, %d completions kept by a CQ of %d, QP %v", sent, got, a.cq.Size(), st.State)
}
