package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/rdmacm"
)

// serverAddr is an address on rxe0 that resolves quickly: a target for
// tests that need an event and no peer.
var serverAddr = netip.AddrPortFrom(serverIP, 7471)

// nextWithin reads ch for d at most.
func nextWithin(ch *rdmacm.EventChannel, d time.Duration) (*rdmacm.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return ch.Next(ctx)
}

// TestMigrate moves IDs between channels: later events, and an event
// already pending at the move, arrive on the new channel only; an ID
// that leaves its private channel loses the blocking calls.
//
//purerdma:race
func TestMigrate(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	a, b := newChannel(t), newChannel(t)
	for _, tc := range []struct {
		name    string
		from    *rdmacm.EventChannel // nil: a private channel
		pending bool                 // resolve before the move
	}{
		{"later events", a, false},
		{"pending event", a, true},
		{"from a private channel", nil, false},
		{"pending on a private channel", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newID(t, tc.from, rdmacm.PortSpaceTCP)
			from := id.Channel()
			if tc.pending {
				if err := id.ResolveAddr(netip.AddrPort{}, serverAddr, time.Second); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond) // the event is queued on from
			}
			if err := id.Migrate(b); err != nil {
				t.Fatal(err)
			}
			if id.Channel() != b {
				t.Errorf("Channel() after Migrate is not the new channel")
			}
			if !tc.pending {
				if err := id.ResolveAddr(netip.AddrPort{}, serverAddr, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			ev, err := b.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != rdmacm.EventAddrResolved || ev.ID != id {
				t.Errorf("new channel: %v, want ADDR_RESOLVED of the migrated ID", ev)
			}
			if tc.from != nil {
				if ev, err := nextWithin(from, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("old channel: %v, %v; want nothing", ev, err)
				}
			} else if err := id.ResolveRouteContext(ctx); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("a blocking call after leaving the private channel = %v, want EINVAL", err)
			}
			if err := id.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	id := newID(t, a, rdmacm.PortSpaceTCP)
	for _, to := range []*rdmacm.EventChannel{nil, newID(t, nil, rdmacm.PortSpaceTCP).Channel()} {
		if err := id.Migrate(to); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Migrate to no channel or a private one = %v, want EINVAL", err)
		}
	}
}

// TestNextCancel: Next returns its context's error when the context
// ends, whether by deadline or by the cancel the test issues (no event
// is pending, so nothing else can end it), and the channel stays
// usable. How long the Nexts took is logged, not asserted.
//
//purerdma:race
func TestNextCancel(t *testing.T) {
	needDevices(t)
	ch := newChannel(t)
	start := time.Now()
	if _, err := nextWithin(ch, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past its deadline = %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := ch.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next cancelled = %v, want Canceled", err)
	}
	// Logged, not asserted: a loaded machine stretches any duration.
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("two cancelled Nexts took %v", d)
	}
	id := newID(t, ch, rdmacm.PortSpaceTCP)
	if err := id.ResolveAddr(netip.AddrPort{}, serverAddr, time.Second); err != nil {
		t.Fatal(err)
	}
	if ev, err := nextWithin(ch, 30*time.Second); err != nil || ev.Type != rdmacm.EventAddrResolved { // 30 s only ends a hang
		t.Fatalf("Next after cancels = %v, %v; want ADDR_RESOLVED", ev, err)
	}
}

// TestCloseWakesNext: closing a channel wakes its waiting Next with
// ErrClosed and closes the IDs on it; while one Next waits, a second
// concurrent Next is refused with ErrBusy instead of waiting out its
// context. No sleep decides which Next waits: the probe retries until
// one is refused, and the waiter retries when it was the refused one.
//
//purerdma:race
func TestCloseWakesNext(t *testing.T) {
	needDevices(t)
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	id, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			_, err := ch.Next(context.Background())
			if !errors.Is(err, rdmacm.ErrBusy) { // the probe held the slot: again
				done <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// No event is pending: a probe that got the slot itself ends by its
	// deadline, one that found the waiter parked is refused.
	guard := time.Now().Add(30 * time.Second) // only ends a hang
	for {
		start := time.Now()
		_, err := nextWithin(ch, 10*time.Millisecond)
		if errors.Is(err, rdmacm.ErrBusy) {
			// Logged, not asserted: a loaded machine stretches any duration.
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Logf("the busy Next took %v", d)
			}
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a second Next = %v, want ErrBusy", err)
		}
		if time.Now().After(guard) {
			t.Fatal("no second Next was refused with ErrBusy while the first waited")
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, rdmacm.ErrClosed) {
			t.Errorf("Next after Close = %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second): // only ends a hang
		t.Fatal("Close did not wake Next")
	}
	if err := id.Close(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("closing an ID of a closed channel = %v, want ErrClosed", err)
	}
	if err := ch.Close(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("CreateID on a closed channel = %v, want ErrClosed", err)
	}
}

// TestCloseWithPendingEvents: closing an ID whose events nobody read
// does not wait for them; the kernel drops them and counts only those
// reported.
//
//purerdma:race
func TestCloseWithPendingEvents(t *testing.T) {
	needDevices(t)
	ch := newChannel(t)
	for _, tc := range []struct {
		name     string
		read     bool
		reported int
	}{
		{"unread", false, 0},
		{"read", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			if err := id.ResolveAddr(netip.AddrPort{}, serverAddr, time.Second); err != nil {
				t.Fatal(err)
			}
			if tc.read {
				if _, err := nextWithin(ch, 30*time.Second); err != nil { // 30 s only ends a hang
					t.Fatal(err)
				}
			} else {
				time.Sleep(200 * time.Millisecond) // the event is queued
			}
			start := time.Now()
			if err := id.Close(); err != nil {
				t.Fatal(err)
			}
			// Logged, not asserted: a loaded machine stretches any duration.
			if d := time.Since(start); d > time.Second {
				t.Logf("Close took %v", d)
			}
			if got := id.EventsReported(); got != tc.reported {
				t.Errorf("EventsReported = %d, want %d", got, tc.reported)
			}
			if ev, err := nextWithin(ch, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("after Close the channel gave %v, %v", ev, err)
			}
			if err := id.Close(); !errors.Is(err, rdmacm.ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
			if err := id.Bind(netip.AddrPortFrom(serverIP, 0)); !errors.Is(err, rdmacm.ErrClosed) {
				t.Errorf("Bind after Close = %v, want ErrClosed", err)
			}
		})
	}
}

// TestEventLoop runs a client and a server on one shared channel with
// the asynchronous calls, in one goroutine, and checks the events each
// ID gets in order.
//
//purerdma:race
func TestEventLoop(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	ch := newChannel(t)
	l := newID(t, ch, rdmacm.PortSpaceTCP)
	if err := l.Bind(netip.AddrPortFrom(serverIP, 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(4); err != nil {
		t.Fatal(err)
	}
	addr, err := l.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	c := newID(t, ch, rdmacm.PortSpaceTCP)
	if err := c.ResolveAddr(clientAP, addr, time.Second); err != nil {
		t.Fatal(err)
	}
	got := map[string][]rdmacm.EventType{}
	var s *rdmacm.ID
	name := func(id *rdmacm.ID) string {
		switch id {
		case c:
			return "client"
		case l:
			return "listener"
		case s:
			return "server"
		}
		return "unknown"
	}
	disconnected, established := 0, 0
	for disconnected < 2 {
		ev, err := ch.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if ev.Type == rdmacm.EventConnectRequest {
			s = ev.ID
			t.Cleanup(func() { s.Close() })
			got["listener"] = append(got["listener"], ev.Type)
			if ev.Listener != l {
				t.Errorf("request's listener is not the listener")
			}
		} else {
			got[name(ev.ID)] = append(got[name(ev.ID)], ev.Type)
		}
		if err := ev.Err(); err != nil {
			t.Fatalf("%v: %v", ev, err)
		}
		switch {
		case ev.Type == rdmacm.EventAddrResolved:
			err = c.ResolveRoute(time.Second)
		case ev.Type == rdmacm.EventRouteResolved:
			if _, err = c.CreateQP(nil, qpConfig()); err == nil {
				err = c.Connect(nil)
			}
		case ev.Type == rdmacm.EventConnectRequest:
			if _, err = s.CreateQP(nil, qpConfig()); err == nil {
				err = s.Accept(nil)
			}
		case ev.Type == rdmacm.EventEstablished:
			// Disconnect once both sides are established: a DREQ that
			// overtakes the RTU leaves the passive side without its
			// ESTABLISHED event.
			if established++; established == 2 {
				err = c.Disconnect()
			}
		case ev.Type == rdmacm.EventDisconnected:
			disconnected++
			if ev.ID == s {
				err = s.Disconnect() // answer the client's
			}
		}
		if err != nil {
			t.Fatalf("on %v: %v", ev, err)
		}
	}
	want := map[string][]rdmacm.EventType{
		"client":   {rdmacm.EventAddrResolved, rdmacm.EventRouteResolved, rdmacm.EventEstablished, rdmacm.EventDisconnected},
		"listener": {rdmacm.EventConnectRequest},
		"server":   {rdmacm.EventEstablished, rdmacm.EventDisconnected},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if d, ok := s.Device(); !ok || d.Name != serverDev {
		t.Errorf("server's device %q", d.Name)
	}
	// A listener's own Accept or Connect has nothing to answer.
	if err := l.Accept(rdmacm.DefaultConnParam()); err == nil {
		t.Error("Accept on a listener succeeded")
	}
}

// TestOptions sets each ID option, and checks REUSEADDR's effect.
func TestOptions(t *testing.T) {
	needDevices(t)
	for _, tc := range []struct {
		name string
		set  func(id *rdmacm.ID) error
		want error
	}{
		{"TOS", func(id *rdmacm.ID) error { return id.SetTOS(0x20) }, nil},
		{"ACK timeout", func(id *rdmacm.ID) error { return id.SetAckTimeout(14) }, nil},
		{"ACK timeout too long", func(id *rdmacm.ID) error { return id.SetAckTimeout(32) }, syscall.EINVAL},
		{"AFONLY", func(id *rdmacm.ID) error { return id.SetAFOnly(true) }, nil},
		{"REUSEADDR", func(id *rdmacm.ID) error { return id.SetReuseAddr(true) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newID(t, nil, rdmacm.PortSpaceTCP)
			if err := tc.set(id); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Two IDs on one address and port: only with REUSEADDR on both.
	for _, reuse := range []bool{false, true} {
		a, b := newID(t, nil, rdmacm.PortSpaceTCP), newID(t, nil, rdmacm.PortSpaceTCP)
		for _, id := range []*rdmacm.ID{a, b} {
			if err := id.SetReuseAddr(reuse); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Bind(netip.AddrPortFrom(serverIP, 0)); err != nil {
			t.Fatal(err)
		}
		addr, err := a.LocalAddr()
		if err != nil {
			t.Fatal(err)
		}
		err = b.Bind(addr)
		if reuse && err != nil {
			t.Errorf("second bind with REUSEADDR: %v", err)
		}
		if !reuse && !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("second bind without REUSEADDR = %v, want EADDRINUSE", err)
		}
	}
}
