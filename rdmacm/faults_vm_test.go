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
func countFDs(t *testing.T) int {
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
	wait := goRun(t, func() error {
		var err error
		srv, smr, _, err = acceptRequest(ctx, l, 4096, 64)
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
