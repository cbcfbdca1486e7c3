package uverbs_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/uverbs"
)

type pollResult struct {
	n   int
	wc  uverbs.WorkCompletion
	err error
}

func goPollContext(ctx context.Context, cq *uverbs.CQ) <-chan pollResult {
	r := make(chan pollResult, 1)
	go func() {
		var wc [4]uverbs.WorkCompletion
		n, err := cq.PollContext(ctx, wc[:])
		r <- pollResult{n, wc[0], err}
	}()
	return r
}

// TestPollContext: PollContext returns at once what the CQ has, waits
// on the channel when it has nothing (woken by the next completion),
// ends with its context and with Close, and refuses a CQ without a
// channel and an empty slice.
//
//purerdma:race
func TestPollContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, channel: true})
	for i := range 2 {
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(10 + i), SGL: []uverbs.SGE{b.sge(64*i, 64)}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(wrid uint64) {
		t.Helper()
		if err := a.qp.PostSend(&uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}); err != nil {
			t.Fatal(err)
		}
	}

	// Waiting first: the send wakes it.
	got := goPollContext(ctx, b.cq)
	time.Sleep(50 * time.Millisecond) // most likely parked by now; either way the result is the same
	send(1)
	if r := <-got; r.err != nil || r.n != 1 || r.wc.WRID != 10 || r.wc.Opcode != uverbs.WCRecv {
		t.Fatalf("PollContext woken by a receive = %d %+v, %v", r.n, r.wc, r.err)
	}
	if b.cq.Unacked() != 0 {
		t.Errorf("%d completion events left unacknowledged", b.cq.Unacked())
	}
	// Completions there already: returned at once, as many as fit.
	var wc [4]uverbs.WorkCompletion
	if n, err := a.cq.PollContext(ctx, wc[:]); err != nil || n != 1 || wc[0].WRID != 1 || wc[0].Opcode != uverbs.WCSend {
		t.Fatalf("PollContext of the send = %d %+v, %v", n, wc[0], err)
	}
	send(2)
	if n, err := b.cq.PollContext(ctx, wc[:]); err != nil || n != 1 || wc[0].WRID != 11 {
		t.Fatalf("PollContext of the second receive = %d %+v, %v", n, wc[0], err)
	}

	// Nothing to come: the context ends it.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if n, err := b.cq.PollContext(short, wc[:]); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PollContext with nothing to come = %d, %v; want DeadlineExceeded", n, err)
	}
	if _, err := b.cq.PollContext(ctx, nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PollContext into no slice = %v, want EINVAL", err)
	}
	noch := newCQ(t, b.ctx, uverbs.CQConfig{Size: 4})
	if _, err := noch.PollContext(ctx, wc[:]); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PollContext of a CQ without a channel = %v, want EINVAL", err)
	}

	// Close wakes it.
	got = goPollContext(ctx, b.cq)
	time.Sleep(50 * time.Millisecond)
	if err := b.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !errors.Is(r.err, uverbs.ErrClosed) {
		t.Fatalf("PollContext after Close = %d, %v; want ErrClosed", r.n, r.err)
	}
}

// TestPollContextSharedChannel: two CQs share one channel; PollContext
// on one takes the other's event while it waits, and the other's
// completion is not lost: its PollContext polls first.
//
//purerdma:race
func TestPollContextSharedChannel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC})
	b := &end{ctx: openContextOn(t, 1)}
	b.pd = newPD(t, b.ctx)
	ch, err := b.ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	scq := newCQ(t, b.ctx, uverbs.CQConfig{Size: 16, Channel: ch})
	rcq := newCQ(t, b.ctx, uverbs.CQConfig{Size: 16, Channel: ch})
	b.cq, b.ch = rcq, ch
	setQP(t, b, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	b.buf = make([]byte, 4096)
	if b.mr, err = b.pd.RegMR(b.buf, allAccess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.mr.Close() })
	if !iwarp() {
		b.gidx, b.gid = roceV2GID(t, b.ctx.Device().Name)
	}
	connectPair(t, a, b)

	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{b.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := rcq.RequestNotify(false); err != nil { // so the receive queues an event on the channel
		t.Fatal(err)
	}
	sent := goPollContext(ctx, scq)
	time.Sleep(50 * time.Millisecond)
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the receive's event most likely reached the waiting PollContext
	select {
	case r := <-sent:
		t.Fatalf("PollContext of the send CQ returned %d %+v, %v with nothing sent", r.n, r.wc, r.err)
	default:
	}
	if err := a.qp.PostRecv(&uverbs.RecvWR{WRID: 3, SGL: []uverbs.SGE{a.sge(64, 64)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostSend(&uverbs.SendWR{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{b.sge(128, 8)}}); err != nil {
		t.Fatal(err)
	}
	if r := <-sent; r.err != nil || r.n != 1 || r.wc.WRID != 4 {
		t.Fatalf("PollContext of the send CQ = %d %+v, %v; want the send", r.n, r.wc, r.err)
	}
	var wc [2]uverbs.WorkCompletion
	if n, err := rcq.PollContext(ctx, wc[:]); err != nil || n != 1 || wc[0].WRID != 1 {
		t.Fatalf("PollContext of the receive CQ = %d %+v, %v; want the receive", n, wc[0], err)
	}
	if rcq.Unacked() != 0 || scq.Unacked() != 0 {
		t.Errorf("unacknowledged events: receive CQ %d, send CQ %d", rcq.Unacked(), scq.Unacked())
	}
}

// TestPollContextAllocs: with completions waiting, PollContext is Poll:
// no allocation.
func TestPollContextAllocs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, td := range []bool{false, true} {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, channel: true, td: td})
		const runs = 10
		for i := range runs + 1 {
			if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{b.sge(0, 64)}}); err != nil {
				t.Fatal(err)
			}
			if err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}); err != nil {
				t.Fatal(err)
			}
		}
		// A send completes when the receiver acknowledged it, after its
		// receive completed: once a has every send's completion, b's
		// CQ holds every receive.
		var wc [1]uverbs.WorkCompletion
		for got := 0; got < runs+1; {
			n, err := a.cq.PollContext(ctx, wc[:])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if iwarp() {
			// An iWARP SEND completes once sent, not once received. An
			// RDMA READ behind the sends is answered after the peer took
			// them in, in order: its completion means b's CQ holds every
			// receive.
			mustPostSend(t, a, &uverbs.SendWR{WRID: 99, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(128, 8)}, RemoteAddr: b.mr.Addr() + 128, RKey: b.mr.RKey()})
			if n, err := a.cq.PollContext(ctx, wc[:]); n != 1 || err != nil || wc[0].WRID != 99 || wc[0].Status != uverbs.WCSuccess {
				t.Fatalf("the RDMA READ behind the sends: %d %+v, %v", n, wc[0], err)
			}
		}
		allocs := testing.AllocsPerRun(runs, func() {
			if n, err := b.cq.PollContext(ctx, wc[:]); n != 1 || err != nil {
				panic(err)
			}
		})
		if allocs != 0 {
			t.Errorf("TD %v: PollContext with completions waiting allocates %v times per call, want 0", td, allocs)
		}
	}
}

// TestCompChannelWakesOnFlush arms a CQ, then moves a QP holding a
// receive from INIT to ERR: the kernel flushes the receive, the
// channel reports the CQ and Poll returns the flush. It needs no
// connection, so it runs on every fabric (siw included).
func TestCompChannelWakesOnFlush(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq := newCQ(t, c, uverbs.CQConfig{Size: 4, Channel: ch})
	pd := newPD(t, c)
	qp := newQP(t, pd, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	buf := make([]byte, 64)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv(&uverbs.RecvWR{WRID: 7, SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if err := cq.RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := ch.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got != cq {
		t.Fatal("Wait returned another CQ")
	}
	got.AckEvents(1)
	var wc [2]uverbs.WorkCompletion
	n, err := cq.Poll(wc[:])
	if err != nil || n != 1 || wc[0].WRID != 7 || wc[0].Status != uverbs.WCWRFlushErr || wc[0].QPNum != qp.Num() {
		t.Errorf("Poll after the event = %d, %v, %+v; want the receive flushed", n, err, wc[0])
	}
	if cq.Unacked() != 0 {
		t.Errorf("Unacked = %d", cq.Unacked())
	}
}
