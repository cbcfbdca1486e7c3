package rdmacm_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// compResult is what a blocking completion call returned.
type compResult struct {
	wc  uverbs.WorkCompletion
	err error
}

func goComp(get func(context.Context) (uverbs.WorkCompletion, error), ctx context.Context) <-chan compResult {
	r := make(chan compResult, 1)
	go func() {
		wc, err := get(ctx)
		r <- compResult{wc, err}
	}()
	return r
}

// TestGetRecvCompDisconnected: a client blocked in GetRecvComp, with a
// receive posted that no message will fill, learns of the server's
// Disconnect from an error matching ErrDisconnected, whether it was
// waiting already or called after the DISCONNECTED arrived. Without
// the ID's channel in the wait, GetRecvComp would wait for its
// context. The DISCONNECTED it saw stays on the channel for Next.
func TestGetRecvCompDisconnected(t *testing.T) {
	needDevices(t)
	for _, waiting := range []bool{true, false} {
		name := "called after the disconnect"
		if waiting {
			name = "waiting before the disconnect"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			c, s := connectedPair(t, ctx)
			mr, _ := regMsgs(t, c, 64)
			if err := c.PostRecv(1, mr, 0, 64); err != nil {
				t.Fatal(err)
			}
			var got <-chan compResult
			if waiting {
				got = goComp(c.GetRecvComp, ctx)
				time.Sleep(50 * time.Millisecond) // most likely parked by now; either way the result is the same
			}
			if err := s.Disconnect(); err != nil {
				t.Fatal(err)
			}
			if !waiting {
				time.Sleep(50 * time.Millisecond) // most likely arrived by now; either way the result is the same
				got = goComp(c.GetRecvComp, ctx)
			}
			r := <-got
			if !errors.Is(r.err, rdmacm.ErrDisconnected) {
				t.Fatalf("GetRecvComp after the peer's Disconnect = %+v, %v; want an error matching ErrDisconnected", r.wc, r.err)
			}
			t.Logf("GetRecvComp: %v", r.err)
			// Again, at once: the state stays.
			if _, err := c.GetRecvComp(ctx); !errors.Is(err, rdmacm.ErrDisconnected) {
				t.Errorf("second GetRecvComp = %v, want ErrDisconnected", err)
			}
			ev, err := c.Channel().Next(ctx)
			if err != nil || ev.Type != rdmacm.EventDisconnected || ev.ID != c {
				t.Fatalf("Next after ErrDisconnected = %v, %v; want the client's DISCONNECTED", ev, err)
			}
			if err := c.Disconnect(); err != nil { // answer it
				t.Error(err)
			}
		})
	}
}

// TestCompletionsBeforeDisconnected: a message that arrived before the
// peer disconnected is returned first; only an empty CQ ends with
// ErrDisconnected.
func TestCompletionsBeforeDisconnected(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	c, s := connectedPair(t, ctx)
	cmr, cbuf := regMsgs(t, c, 64)
	for i := range 2 {
		if err := c.PostRecv(uint64(i), cmr, 32*i, 32); err != nil {
			t.Fatal(err)
		}
	}
	smr, sbuf := regMsgs(t, s, 64)
	n := copy(sbuf, "last words")
	if err := s.PostSend(9, smr, 0, n, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSendComp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Disconnect(); err != nil {
		t.Fatal(err)
	}
	// The DISCONNECTED is taken off the channel and processed before
	// the first GetRecvComp looks.
	ev, err := c.Channel().Next(ctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("Next = %v, %v; want DISCONNECTED", ev, err)
	}
	wc, err := c.GetRecvComp(ctx)
	if err != nil || wc.WRID != 0 || string(cbuf[:wc.ByteLen]) != "last words" {
		t.Fatalf("first GetRecvComp = %+v, %v; want the message sent before the disconnect", wc, err)
	}
	if _, err := c.GetRecvComp(ctx); !errors.Is(err, rdmacm.ErrDisconnected) {
		t.Fatalf("second GetRecvComp = %v, want ErrDisconnected", err)
	}
	if err := c.Disconnect(); err != nil {
		t.Error(err)
	}
}

// TestCompDisconnectedWithNext: with another goroutine in Next on the
// client's channel (the pattern of a program that watches for the
// peer's close), that Next gets the DISCONNECTED, and a GetRecvComp and
// a GetSendComp waiting on other goroutines both end with
// ErrDisconnected: the Next's processing wakes them.
//
//purerdma:race
func TestCompDisconnectedWithNext(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	c, s := connectedPair(t, ctx)
	mr, _ := regMsgs(t, c, 64)
	if err := c.PostRecv(1, mr, 0, 64); err != nil {
		t.Fatal(err)
	}
	next := make(chan *rdmacm.Event, 1)
	go func() {
		ev, err := c.Channel().Next(ctx)
		if err != nil {
			t.Error(err)
		}
		next <- ev
	}()
	recv, send := goComp(c.GetRecvComp, ctx), goComp(c.GetSendComp, ctx)
	time.Sleep(50 * time.Millisecond) // most likely all parked by now; either way the results are the same
	if err := s.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev := <-next; ev == nil || ev.Type != rdmacm.EventDisconnected || ev.ID != c {
		t.Errorf("the watching Next got %v, want the client's DISCONNECTED", ev)
	}
	for what, got := range map[string]<-chan compResult{"GetRecvComp": recv, "GetSendComp": send} {
		if r := <-got; !errors.Is(r.err, rdmacm.ErrDisconnected) {
			t.Errorf("%s = %+v, %v; want ErrDisconnected", what, r.wc, r.err)
		}
	}
	if err := c.Disconnect(); err != nil {
		t.Error(err)
	}
}

// TestCompWaitClose: of two GetRecvComp calls on the same CQ, one
// fails at once with ErrBusy (the CQ has one waiter) and the other
// waits; Close wakes it with ErrClosed.
//
//purerdma:race
func TestCompWaitClose(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	c, _ := connectedPair(t, ctx)
	a, b := goComp(c.GetRecvComp, ctx), goComp(c.GetRecvComp, ctx)
	var waiting <-chan compResult
	select {
	case r := <-a:
		if !errors.Is(r.err, rdmacm.ErrBusy) {
			t.Fatalf("GetRecvComp with nothing to receive = %v, want ErrBusy for the second of two", r.err)
		}
		waiting = b
	case r := <-b:
		if !errors.Is(r.err, rdmacm.ErrBusy) {
			t.Fatalf("GetRecvComp with nothing to receive = %v, want ErrBusy for the second of two", r.err)
		}
		waiting = a
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; !errors.Is(r.err, rdmacm.ErrClosed) {
		t.Fatalf("GetRecvComp after Close = %v, want ErrClosed", r.err)
	}
}

// TestCompWaitAfterQPRecreated: a GetRecvComp that waited on the CQ of
// a QP the ID destroyed waits on the CQ of the QP made after it, and
// gets its completion.
func TestCompWaitAfterQPRecreated(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetRecvComp(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetRecvComp with nothing to come = %v, want DeadlineExceeded", err)
	}
	if err := c.DestroyQP(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	mr, buf := regMsgs(t, c, 64)
	if err := c.PostRecv(1, mr, 0, 64); err != nil {
		t.Fatal(err)
	}
	sendNow, received := make(chan struct{}), make(chan struct{})
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		s := req.ID
		defer s.Close()
		if _, err := s.CreateQP(nil, qpConfig()); err != nil {
			return err
		}
		smr, err := s.RegMsgs(make([]byte, 64))
		if err != nil {
			return err
		}
		defer smr.Close()
		if _, err := s.AcceptContext(ctx, nil); err != nil {
			return err
		}
		<-sendNow
		n := copy(smr.Bytes(), "to the new QP")
		if err := s.PostSend(2, smr, 0, n, uverbs.SendSignaled); err != nil {
			return err
		}
		if _, err := s.GetSendComp(ctx); err != nil {
			return err
		}
		<-received // no DISCONNECTED, which would wake the client, before
		return nil
	})
	defer wait()
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got := goComp(c.GetRecvComp, ctx)
	time.Sleep(50 * time.Millisecond) // most likely waiting by now; either way the result is the same
	close(sendNow)
	r := <-got
	close(received)
	if r.err != nil || string(buf[:r.wc.ByteLen]) != "to the new QP" {
		t.Fatalf("GetRecvComp on the new QP = %+v, %v", r.wc, r.err)
	}
}

// TestWaitCompChannel: WaitCompChannel on a completion channel of the
// caller's own (the QP's CQs made on it) returns the CQ of a completion
// event; once the server disconnected and the channel has no event, it
// returns an error matching ErrDisconnected, on every fabric, and the
// DISCONNECTED it took from the ID's channel stays for Next; after
// Close it fails with ErrClosed. A nil channel is refused.
func TestWaitCompChannel(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	var s *rdmacm.ID
	var smr *uverbs.MR
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		var err error
		s, smr, _, err = acceptRequest(ctx, l, 4096, 64, gate)
		return err
	})
	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	vctx, err := c.Context()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := vctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	scq, err := vctx.CreateCQ(uverbs.CQConfig{Size: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scq.Close() })
	rcq, err := vctx.CreateCQ(uverbs.CQConfig{Size: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcq.Close() })
	cfg := qpConfig()
	cfg.SendCQ, cfg.RecvCQ = scq, rcq
	if _, err := c.CreateQP(nil, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cmr, _ := regMsgs(t, c, 4096)
	if _, err := c.WaitCompChannel(ctx, nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("WaitCompChannel(nil) = %v, want EINVAL", err)
	}

	// A completion event names its CQ.
	if err := scq.RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	gate.wait(t, ctx)
	if err := c.PostSend(1, cmr, 0, 8, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	got, err := c.WaitCompChannel(ctx, ch)
	if err != nil || got != scq {
		t.Fatalf("WaitCompChannel after a send = %p, %v; want the send CQ %p", got, err, scq)
	}
	got.AckEvents(1)
	var wc [1]uverbs.WorkCompletion
	if n, err := scq.Poll(wc[:]); n != 1 || err != nil || wc[0].Status != uverbs.WCSuccess {
		t.Fatalf("send completion: %d %+v %v", n, wc[0], err)
	}
	wait()
	if s == nil {
		t.FailNow()
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(func() { smr.Close() })

	// The server disconnects; nothing will complete on the client.
	if err := rcq.RequestNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := s.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitCompChannel(ctx, ch); !errors.Is(err, rdmacm.ErrDisconnected) {
		t.Fatalf("WaitCompChannel after the server's Disconnect = %v, want ErrDisconnected", err)
	}
	if ev, err := c.Channel().Next(ctx); err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("Next after the wait = %v, %v; want DISCONNECTED", ev, err)
	}
	if err := c.Disconnect(); err != nil {
		t.Errorf("client Disconnect: %v", err)
	}
	// The QP, then the caller's CQs and channel, then the ID, which
	// closes the shared context they were made on.
	for _, x := range []struct {
		what  string
		close func() error
	}{{"client MR", cmr.Close}, {"client QP", c.DestroyQP}, {"send CQ", scq.Close}, {"receive CQ", rcq.Close}, {"channel", ch.Close}, {"client", c.Close}} {
		if err := x.close(); err != nil {
			t.Fatalf("%s Close: %v", x.what, err)
		}
	}
	if _, err := c.WaitCompChannel(ctx, ch); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("WaitCompChannel after Close = %v, want ErrClosed", err)
	}
}
