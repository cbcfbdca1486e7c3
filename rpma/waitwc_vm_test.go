package rpma_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// TestWaitWC: WaitWC returns completions that are there at once, waits
// for the next one when there are none, leaves the CQ armed for Wait,
// ends with its context, and refuses a shared channel and an empty
// slice.
//
//purerdma:race
func TestWaitWC(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, nil)
	cmr := regMR(t, cp, 4096, rpma.UsageRecv)
	smr := regMR(t, sp, 4096, rpma.UsageSend)
	for i := range 4 {
		if err := p.c.Recv(cmr, 64*i, 64, uint64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	send := func(opctx uint64) {
		t.Helper()
		if err := p.s.Send(smr, 0, 8, rpma.CompletionOnError, opctx); err != nil {
			t.Fatal(err)
		}
	}

	// Waiting first: the send wakes it.
	type result struct {
		n   int
		wc  uverbs.WorkCompletion
		err error
	}
	got := make(chan result, 1)
	go func() {
		wc := make([]uverbs.WorkCompletion, 4)
		n, err := p.c.CQ().WaitWC(ctx, wc)
		got <- result{n, wc[0], err}
	}()
	time.Sleep(50 * time.Millisecond) // most likely parked by now; either way the result is the same
	send(1)
	if r := <-got; r.err != nil || r.n != 1 || r.wc.WRID != 10 || r.wc.Opcode != uverbs.WCRecv {
		t.Fatalf("WaitWC woken by a receive = %d %+v, %v", r.n, r.wc, r.err)
	}

	// Ready already: returned at once, as many as fit.
	send(2)
	send(3)
	wc := make([]uverbs.WorkCompletion, 2)
	for got := 0; got < 2; {
		n, err := p.c.CQ().WaitWC(ctx, wc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if wc[0].WRID != 11 || wc[1].WRID != 12 {
		t.Fatalf("WaitWC = %+v, want the receives 11 and 12", wc)
	}

	// The CQ is armed again: the librpma loop of Wait and GetWC works
	// after WaitWC.
	send(4)
	if w := waitWC(t, ctx, p.c.CQ()); w.WRID != 13 {
		t.Fatalf("GetWC and Wait after WaitWC: %+v", w)
	}

	// Nothing to come: the context ends it.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if n, err := p.c.CQ().WaitWC(short, wc); n != 0 || !errors.Is(err, rpma.ErrNoCompletion) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitWC with nothing to come = %d, %v; want ErrNoCompletion and DeadlineExceeded", n, err)
	}
	if _, err := p.c.CQ().WaitWC(ctx, nil); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("WaitWC into no slice = %v, want ErrInvalid", err)
	}
	var nilCQ *rpma.CQ
	if _, err := nilCQ.WaitWC(ctx, wc); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("WaitWC of a nil CQ = %v, want ErrInvalid", err)
	}

	cfg := rpma.NewConnCfg()
	cfg.SetCompletionChannel(true)
	cfg.SetRCQSize(4)
	shared := connect(t, ctx, sp, cp, cfg, cfg, nil, nil)
	if _, err := shared.c.CQ().WaitWC(ctx, wc); !errors.Is(err, rpma.ErrSharedChannel) {
		t.Errorf("WaitWC on a shared channel = %v, want ErrSharedChannel", err)
	}
}

// TestWaitWCAllocs: with completions waiting, WaitWC is GetWC: no
// allocation.
func TestWaitWCAllocs(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	p := connect(t, ctx, sp, cp, nil, nil, nil, nil)
	cmr := regMR(t, cp, 4096, rpma.UsageSend)
	smr := regMR(t, sp, 4096, rpma.UsageRecv)
	const runs = 10
	for i := range runs + 1 {
		if err := p.s.Recv(smr, 0, 64, uint64(i)); err != nil {
			t.Fatal(err)
		}
		if err := p.c.Send(cmr, 0, 8, rpma.CompletionAlways, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// A send completes when the receiver acknowledged it, after its
	// receive completed: once the client has every send's completion,
	// the server's CQ holds every receive.
	wc := make([]uverbs.WorkCompletion, 1)
	for got := 0; got < runs+1; {
		n, err := p.c.CQ().WaitWC(ctx, wc)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	allocs := testing.AllocsPerRun(runs, func() {
		if n, err := p.s.CQ().WaitWC(ctx, wc); n != 1 || err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Errorf("WaitWC with completions waiting allocates %v times per call, want 0", allocs)
	}
}
