package rdmacm_test

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
)

// TestDeviceRemoval removes a device of the fabric (rxe or siw) under a listening ID: the ID
// gets DEVICE_REMOVAL, and closing it afterwards works and lets the
// removal finish.
//
//purerdma:race
func TestDeviceRemoval(t *testing.T) {
	notSiwDeviceRemoval61(t)
	needDevices(t)
	testenv.RequireRoot(t)
	const netdev = "rxrm0"
	name := testenv.CurrentFabric().Name + "remove"
	addr := netip.MustParseAddr("198.18.2.1")
	nl, removed := linkOn(t, netdev, name, addr)
	sysfs := "/sys/class/infiniband/" + name
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sysfs); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", sysfs)
		}
	}

	ctx := testContext(t)
	id := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := id.Bind(netip.AddrPortFrom(addr, 0)); err != nil {
		t.Fatal(err)
	}
	if d, ok := id.Device(); !ok || d.Name != name {
		t.Fatalf("bound to %q (%v), want %s", d.Name, ok, name)
	}
	if err := id.Listen(0); err != nil {
		t.Fatal(err)
	}
	// The kernel waits for the ID to be released before the device is
	// gone, so the removal runs on its own goroutine.
	delDone := make(chan error, 1)
	start := time.Now()
	go func() { delDone <- nl.DelLink(name) }()
	ev, err := id.Channel().Next(ctx)
	if err != nil {
		t.Fatalf("no event after removing the device: %v", err)
	}
	if ev.Type != rdmacm.EventDeviceRemoval || ev.ID != id {
		t.Fatalf("got %v, want DEVICE_REMOVAL of ID %d", ev, id.Handle())
	}
	t.Logf("DEVICE_REMOVAL after %v", time.Since(start))
	if err := id.Close(); err != nil {
		t.Errorf("Close after DEVICE_REMOVAL: %v", err)
	}
	select {
	case err := <-delDone:
		if err != nil {
			t.Fatalf("removing %s: %v", name, err)
		}
		*removed = true
	case <-time.After(10 * time.Second):
		t.Fatal("the device removal did not finish within 10 s of closing the ID")
	}
}
