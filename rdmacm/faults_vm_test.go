package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// countFDs is the number of open file descriptors of the process.
func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// nextEvent waits at most d for ch's next event.
func nextEvent(ch *rdmacm.EventChannel, d time.Duration) (*rdmacm.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return ch.Next(ctx)
}

// TestFaultLinkDeletedConnected removes a device of the fabric (RDMA netlink
// DELLINK) under an established connection whose two ends, and the
// listener, are on it (rxe loops the traffic back). Each of the three
// IDs gets DEVICE_REMOVAL on its channel; until they are closed the
// kernel's removal waits, and on rxe the connection still carries
// messages (siw stops it at DEVICE_REMOVAL).
// Closing the IDs (which closes the QPs, CQs and the uverbs context the
// package opened for them) succeeds and lets the removal finish; no
// file descriptor is left.
func TestFaultLinkDeletedConnected(t *testing.T) {
	notSiwDeviceRemoval61(t)
	needDevices(t)
	testenv.RequireRoot(t)
	const netdev = "rxcmflt0"
	name := testenv.CurrentFabric().Name + "cmfault"
	ip := netip.MustParseAddr("198.18.5.1")
	nl, removed := linkOn(t, netdev, name, ip)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := uverbs.DeviceByName(name)
		if err == nil && len(d.Ports) > 0 && d.Ports[0].State == uverbs.PortActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ACTIVE after 10s: %+v %v", name, d, err)
		}
	}
	fds0 := countFDs(t)

	ctx := testContext(t)
	l, addr := listenOn(t, rdmacm.PortSpaceTCP, ip)
	if d, ok := l.Device(); !ok || d.Name != name {
		t.Fatalf("listener bound to %q (%v), want %s", d.Name, ok, name)
	}
	var srv *rdmacm.ID
	var smr *uverbs.MR
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		var err error
		srv, smr, _, err = acceptRequest(ctx, l, 4096, 64, gate)
		return err
	})
	c := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := c.Resolve(ctx, netip.AddrPortFrom(ip, 0), addr); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cmr, _ := regMsgs(t, c, 4096)
	gate.wait(t, ctx)
	if err := c.PostSend(1, cmr, 0, 8, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSendComp(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	if srv == nil {
		t.FailNow()
	}
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { smr.Close() })
	if d, ok := c.Device(); !ok || d.Name != name {
		t.Fatalf("client bound to %q (%v), want %s", d.Name, ok, name)
	}

	delDone := make(chan error, 1)
	start := time.Now()
	go func() { delDone <- nl.DelLink(name) }()
	for _, x := range []struct {
		what string
		id   *rdmacm.ID
	}{{"listener", l}, {"client", c}, {"server", srv}} {
		ev, err := nextEvent(x.id.Channel(), 10*time.Second)
		if err != nil {
			t.Fatalf("%s: no event after DELLINK: %v", x.what, err)
		}
		t.Logf("%s: %s: %v after %v", os.Getenv("PURERDMA_VM"), x.what, ev, time.Since(start).Round(time.Millisecond))
		// The server may first see the client's side go
		// (DISCONNECTED: both ends are on the removed device, and
		// the client's removal can reach the server before its own);
		// DEVICE_REMOVAL must still follow.
		if x.what == "server" && ev.Type == rdmacm.EventDisconnected && ev.ID == x.id {
			if ev, err = nextEvent(x.id.Channel(), 10*time.Second); err != nil {
				t.Fatalf("%s: no DEVICE_REMOVAL after DISCONNECTED: %v", x.what, err)
			}
			t.Logf("%s: %s: then %v after %v", os.Getenv("PURERDMA_VM"), x.what, ev, time.Since(start).Round(time.Millisecond))
		}
		if ev.Type != rdmacm.EventDeviceRemoval || ev.ID != x.id {
			t.Errorf("%s: %v, want DEVICE_REMOVAL of its ID", x.what, ev)
		}
	}
	// The removal waits for the IDs.
	select {
	case err := <-delDone:
		t.Fatalf("DELLINK returned (%v) with the IDs open", err)
	case <-time.After(500 * time.Millisecond):
	}
	// rxe keeps moving messages until the IDs close. siw stops its
	// connection at DEVICE_REMOVAL: a send posted then neither runs nor
	// completes (the QP is flushed when it is destroyed), so there the
	// test goes straight on to closing.
	if !testenv.CurrentFabric().IWARP {
		if err := srv.PostRecv(2, smr, 0, 64); err != nil {
			t.Fatal(err)
		}
		copy(cmr.Bytes(), "after removal")
		if err := c.PostSend(3, cmr, 0, 13, uverbs.SendSignaled); err != nil {
			t.Fatal(err)
		}
		swc, serr := c.GetSendComp(ctx)
		rwc, rerr := srv.GetRecvComp(ctx)
		t.Logf("send during the removal: %v %v; receive %v %v", swc.Status, serr, rwc.Status, rerr)
		if serr != nil || rerr != nil || string(smr.Bytes()[:13]) != "after removal" {
			t.Errorf("send during the removal: %v, receive: %v, %q", serr, rerr, smr.Bytes()[:13])
		}
	}

	for _, x := range []struct {
		what  string
		close func() error
	}{{"client MR", cmr.Close}, {"client", c.Close}, {"server MR", smr.Close}, {"server", srv.Close}, {"listener", l.Close}} {
		if err := x.close(); err != nil {
			t.Errorf("%s Close: %v", x.what, err)
		}
	}
	closed := time.Now()
	select {
	case err := <-delDone:
		if err != nil {
			t.Fatalf("DELLINK: %v", err)
		}
		*removed = true
		t.Logf("DELLINK returned %v after the IDs closed", time.Since(closed).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("DELLINK did not return within 10s of closing the IDs")
	}
	if n := countFDs(t); n != fds0 {
		t.Errorf("%d file descriptors open after the removal, %d before", n, fds0)
	}
	if err := c.Close(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// TestFaultNetdevDownUp sets the netdev of the server's device down
// under an established connection, sends, then sets it up again and
// sends the other way. Nothing waits for ever, and every send either
// fails with an error (the post refused, a completion in error, or
// ErrDisconnected) or delivers its bytes. On rxe the server's packets
// go nowhere: its send completes with an error, which moves its QP to
// ERR, and the client's send after the outage is never answered. On
// siw with Linux 6.1 the netdev's going down moves the device's QPs to
// ERR and ends their connections (siw_netdev_down): DISCONNECTED on the
// server, and on the client once the link is up. Linux 6.12's siw no
// longer does that: the TCP connection rides out a short outage and
// carries both messages. A new connection then works, and after
// everything closed no file descriptor is left.
func TestFaultNetdevDownUp(t *testing.T) {
	f := testenv.NeedFabric(t)
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a safety net
	defer cancel()
	fds0 := countFDs(t)

	// The first connection, with a message each way so both QPs run.
	type side struct {
		id *rdmacm.ID
		mr *uverbs.MR
	}
	connect := func() (c, s side, l *rdmacm.ID) {
		t.Helper()
		l, addr := listen(t, rdmacm.PortSpaceTCP)
		gate := newAcceptGate()
		wait := goRun(t, func() error {
			var err error
			s.id, s.mr, _, err = acceptRequest(ctx, l, 4096, 64, gate)
			return err
		})
		c.id = connected(t, ctx, addr)
		var err error
		if c.mr, err = c.id.RegMsgs(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		if err := c.id.PostRecv(2, c.mr, 1024, 64); err != nil {
			t.Fatal(err)
		}
		gate.wait(t, ctx)
		copy(c.mr.Bytes(), "hello")
		if err := c.id.PostSend(1, c.mr, 0, 5, uverbs.SendSignaled); err != nil {
			t.Fatal(err)
		}
		if _, err := c.id.GetSendComp(ctx); err != nil {
			t.Fatal(err)
		}
		wait()
		if s.id == nil {
			t.FailNow()
		}
		if err := s.id.PostRecv(3, s.mr, 1024, 64); err != nil {
			t.Fatal(err)
		}
		copy(s.mr.Bytes(), "olleh")
		if err := s.id.PostSend(4, s.mr, 0, 5, uverbs.SendSignaled); err != nil {
			t.Fatal(err)
		}
		if _, err := s.id.GetSendComp(ctx); err != nil {
			t.Fatal(err)
		}
		if wc, err := c.id.GetRecvComp(ctx); err != nil || string(c.mr.Bytes()[1024:1024+wc.ByteLen]) != "olleh" {
			t.Fatalf("client receive: %+v, %v", wc, err)
		}
		return c, s, l
	}
	closeAll := func(c, s side, l *rdmacm.ID) {
		t.Helper()
		for _, x := range []struct {
			what  string
			close func() error
		}{{"client MR", c.mr.Close}, {"client", c.id.Close}, {"server MR", s.mr.Close}, {"server", s.id.Close}, {"listener", l.Close}} {
			if err := x.close(); err != nil {
				t.Errorf("%s Close: %v", x.what, err)
			}
		}
	}
	// send posts msg from x and waits for its completion: it reports
	// whether the send completed successfully, and otherwise how the
	// connection's failure showed (the post refused, the completion an
	// error, or the wait ended by the disconnect).
	send := func(what string, x side, msg string) (ok bool, how string) {
		t.Helper()
		n := copy(x.mr.Bytes(), msg)
		if err := x.id.PostSend(9, x.mr, 0, n, uverbs.SendSignaled); err != nil {
			return false, "post refused: " + err.Error()
		}
		if _, err := x.id.GetSendComp(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("%s: send of %q: %v", what, msg, err)
			}
			return false, "the send's wait: " + err.Error()
		}
		return true, "sent"
	}
	// recv waits for x's posted receive: the message, or how the
	// connection's failure showed (ErrDisconnected: a flush on iWARP,
	// or DISCONNECTED with nothing received).
	recv := func(what string, x side) (msg string, how string) {
		t.Helper()
		wc, err := x.id.GetRecvComp(ctx)
		if err != nil {
			if !errors.Is(err, rdmacm.ErrDisconnected) {
				t.Fatalf("%s: receive: %v, want a message or ErrDisconnected", what, err)
			}
			return "", err.Error()
		}
		return string(x.mr.Bytes()[1024 : 1024+wc.ByteLen]), "received"
	}

	c, s, l := connect()
	if d, ok := s.id.Device(); !ok || d.Name != f.Devs[0] {
		t.Fatalf("server on %q, want %s", d.Name, f.Devs[0])
	}
	if err := c.id.PostRecv(5, c.mr, 1024, 64); err != nil {
		t.Fatal(err)
	}
	vm := os.Getenv("PURERDMA_VM") + " " + f.Name
	up := testenv.SetLinkDown(t, f.Netdevs[0])
	// The server sends while its link is down. rxe's send is never
	// acknowledged: it fails. siw's completes once TCP took it, unless
	// the QP went to ERR first (Linux 6.1's siw moves the device's QPs
	// to ERR when its netdev goes down; 6.12's leaves the TCP connection
	// to ride out the outage).
	taken, how := send("server", s, "down!")
	t.Logf("%s: %s down; server: %s", vm, f.Netdevs[0], how)
	if taken && !f.IWARP {
		t.Fatalf("%s: a send while the link is down completed", f.Name)
	}
	up()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := uverbs.DeviceByName(f.Devs[0])
		if err == nil && len(d.Ports) > 0 && d.Ports[0].State == uverbs.PortActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ACTIVE again after 30s: %+v %v", f.Devs[0], d, err)
		}
	}
	if taken {
		// What TCP took arrives once the link is up, unless the
		// connection ended first.
		msg, how := recv("client", c)
		if how == "received" && msg != "down!" {
			t.Fatalf("client received %q, want %q", msg, "down!")
		}
		t.Logf("%s: %s up; client: the server's message: %s", vm, f.Netdevs[0], how)
	}
	// The client sends: the connection either failed, and the failure
	// shows on both sides, or (siw on 6.12) it lived through the outage
	// and carries the message.
	sent, how := send("client", c, "after")
	if sent {
		msg, rhow := recv("server", s)
		switch {
		case rhow != "received":
			how += "; server: " + rhow
		case msg != "after":
			t.Fatalf("server received %q, want %q", msg, "after")
		case !f.IWARP:
			t.Fatalf("%s: the connection carried a message after a send on it failed", f.Name)
		default:
			how += "; server received it: the connection lived through the outage"
		}
	}
	t.Logf("%s: %s up; client: %s", vm, f.Netdevs[0], how)
	closeAll(c, s, l)

	// A new connection over the same devices works.
	c, s, l = connect()
	closeAll(c, s, l)
	if n := countFDs(t); n != fds0 {
		t.Errorf("%d file descriptors open after the connections closed, %d before", n, fds0)
	}
}
