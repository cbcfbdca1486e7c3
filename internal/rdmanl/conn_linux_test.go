//go:build linux

package rdmanl

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDial runs on every host: either the kernel has RDMA netlink, or Dial
// fails with EPROTONOSUPPORT and says why.
func TestDial(t *testing.T) {
	c, err := Dial()
	if err == nil {
		if c.nl.PID() == 0 {
			t.Error("the socket has no port id after bind")
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		return
	}
	t.Logf("Dial: %v", err)
	if !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Fatalf("Dial: %v; want success or EPROTONOSUPPORT", err)
	}
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != "socket" {
		t.Errorf("Dial error %#v is not an *OpError for socket", err)
	}
	if !strings.Contains(err.Error(), "CONFIG_INFINIBAND") {
		t.Errorf("Dial error %q does not say what the kernel lacks", err)
	}
}

// TestRequestOverRouteNetlink drives the socket code (send, receive, port
// id and sequence checks, error decoding) through NETLINK_ROUTE, which
// every Linux host has: rtnetlink rejects the nldev message types with
// EOPNOTSUPP.
func TestRequestOverRouteNetlink(t *testing.T) {
	c, err := dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		op   string
		call func() error
	}{
		{"GET", func() error { _, err := c.Devices(); return err }},
		{"GET", func() error { _, err := c.Links(); return err }},
		{"NEWLINK", func() error { return c.NewLink("rxe0", "rxe", "lo") }},
		{"GET", func() error { return c.DelLink("rxe0") }}, // fails at the device lookup
	} {
		err := tt.call()
		var oe *OpError
		if !errors.As(err, &oe) || oe.Op != tt.op {
			t.Errorf("%s: err = %v, want an *OpError for %s", tt.op, err, tt.op)
			continue
		}
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("%s: err = %v, want EOPNOTSUPP", tt.op, err)
		}
	}
	if oe := new(OpError); errors.As(c.NewLink("rxe0", "rxe", "lo"), &oe) && oe.Device != "rxe0" {
		t.Errorf("NEWLINK error names device %q, want rxe0", oe.Device)
	}
}

func TestClose(t *testing.T) {
	c, err := dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Devices(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Devices after Close: err = %v, want os.ErrClosed", err)
	}
}
