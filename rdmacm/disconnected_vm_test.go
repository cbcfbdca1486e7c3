package rdmacm_test

import (
	"context"
	"errors"
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
