package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// TestCreateEP makes both ends from GetAddrInfo answers: a passive
// endpoint whose requests come with QPs, and an active one resolved and
// with its QP, then connects them and sends a message.
func TestCreateEP(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	opts := &rdmacm.QPOptions{Config: qpConfig()}
	pai, err := rdmacm.GetAddrInfo(ctx, serverIP.String(), "0", &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		t.Fatal(err)
	}
	l, err := rdmacm.CreateEP(ctx, &pai[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Listen(0); err != nil {
		t.Fatal(err)
	}
	addr, err := l.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		s := req.ID
		defer s.Close()
		if s.QP() == nil {
			return errors.New("the request's ID has no QP")
		}
		mr, msg, err := acceptMessage(ctx, s, 64, 64, gate)
		if err != nil {
			return err
		}
		defer mr.Close()
		got = string(msg)
		return s.Disconnect()
	})
	defer wait()

	aai, err := rdmacm.GetAddrInfo(ctx, addr.Addr().String(), strconv.Itoa(int(addr.Port())),
		&rdmacm.AddrInfoHints{Src: clientAP, Flags: rdmacm.NumericHost})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rdmacm.CreateEP(ctx, &aai[0], opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.QP() == nil || c.QP().State() != uverbs.QPStateInit {
		t.Fatalf("active endpoint's QP %v", c.QP())
	}
	mr, buf := regMsgs(t, c, 64)
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	gate.wait(t, ctx)
	copy(buf, "via CreateEP")
	if err := c.PostSend(1, mr, 0, 12, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSendComp(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	if got != "via CreateEP" {
		t.Errorf("server received %q", got)
	}
	if ev, err := c.Channel().Next(ctx); err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Errorf("client: %v, %v; want DISCONNECTED", ev, err)
	}
	// A failed endpoint leaves nothing open (TestMain checks fds).
	bad := rdmacm.AddrInfo{Dst: netip.MustParseAddrPort("198.18.0.99:1"), Src: clientAP}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if id, err := rdmacm.CreateEP(short, &bad, opts); err == nil {
		id.Close()
		t.Error("CreateEP to an unreachable address succeeded")
	}
}

// TestSharedContext: IDs on one device share one uverbs.Context, which
// stays open while any of them is, and closes with the last.
//
//purerdma:race
func TestSharedContext(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	var ids []*rdmacm.ID
	var ctxs []*uverbs.Context
	for range 2 {
		id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := id.Context(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Context before the ID has a device = %v, want EINVAL", err)
		}
		if err := id.ResolveAddrContext(ctx, clientAP, serverAddr); err != nil {
			t.Fatal(err)
		}
		c, err := id.Context()
		if err != nil {
			t.Fatal(err)
		}
		ids, ctxs = append(ids, id), append(ctxs, c)
	}
	if ctxs[0] != ctxs[1] || ctxs[0].Device().Name != clientDev {
		t.Fatalf("two IDs on %s got Contexts %p (%s) and %p", clientDev, ctxs[0], ctxs[0].Device().Name, ctxs[1])
	}
	if err := ids[0].Close(); err != nil {
		t.Fatal(err)
	}
	pd, err := ctxs[1].AllocPD()
	if err != nil {
		t.Fatalf("the Context closed while an ID still held it: %v", err)
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ids[1].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctxs[1].AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocPD after the last ID closed = %v, want ErrClosed", err)
	}
}

// TestCloseDuringNext closes IDs while another goroutine takes their
// events: no Close hangs, and the loop ends cleanly.
//
//purerdma:race
func TestCloseDuringNext(t *testing.T) {
	needDevices(t)
	ch := newChannel(t)
	loopCtx, stop := context.WithCancel(context.Background())
	events := 0
	wait := goRun(t, func() error {
		for {
			_, err := ch.Next(loopCtx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if err != nil {
				return err
			}
			events++
		}
	})
	for i := range 20 {
		id, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveAddr(clientAP, serverAddr, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%5) * time.Millisecond)
		start := time.Now()
		if err := id.Close(); err != nil {
			t.Fatal(err)
		}
		// Logged, not asserted: a loaded machine stretches any duration.
		if d := time.Since(start); d > time.Second {
			t.Logf("Close %d took %v", i, d)
		}
	}
	stop()
	wait()
	t.Logf("the loop saw %d events of 20 IDs", events)
}
