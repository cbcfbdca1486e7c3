package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
)

// noHost is an address in the VM's subnet that no host answers ARP for:
// its address resolution ends only by a timer.
var noHost = netip.MustParseAddrPort("198.18.0.99:7471")

// TestResolveErrors: a blocking resolution that fails names the step and
// the address, and says which timer fired (the kernel's, with its value
// and where it came from, or ctx's deadline) or that the address has no
// RDMA device; each error matches what it should with errors.Is:
// ETIMEDOUT for the kernel's timer, context.DeadlineExceeded only when
// ctx had the deadline, ENODEV for a missing device.
func TestResolveErrors(t *testing.T) {
	needDevices(t)
	type match struct {
		target error
		want   bool
	}
	check := func(t *testing.T, err error, says []string, matches []match) {
		t.Helper()
		if err == nil {
			t.Fatal("the resolution succeeded")
		}
		t.Logf("%s: %v", t.Name(), err)
		for _, w := range says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
		for _, m := range matches {
			if errors.Is(err, m.target) != m.want {
				t.Errorf("errors.Is(%q, %v) = %v", err, m.target, !m.want)
			}
		}
	}

	t.Run("kernel timer, no deadline", func(t *testing.T) {
		// No deadline, so the kernel gets DefaultResolveTimeout; the
		// cancel only bounds the test.
		ctx, cancel := context.WithCancel(context.Background())
		defer time.AfterFunc(30*time.Second, cancel).Stop()
		id := newID(t, nil, rdmacm.PortSpaceTCP)
		err := id.ResolveAddrContext(ctx, clientAP, noHost)
		check(t, err, []string{"rdmacm ResolveAddrContext (id ", "address resolution of " + noHost.String() + " timed out",
			"the kernel's timer of " + rdmacm.DefaultResolveTimeout.String() + " (DefaultResolveTimeout: ctx has no deadline) fired",
			"ADDR_ERROR: connection timed out"},
			[]match{{syscall.ETIMEDOUT, true}, {context.DeadlineExceeded, false}})
		var ee *rdmacm.EventError
		if !errors.As(err, &ee) || ee.Event.Type != rdmacm.EventAddrError {
			t.Errorf("%v: no ADDR_ERROR event (%v)", err, ee)
		}
	})

	t.Run("ctx deadline", func(t *testing.T) {
		// The kernel's timer is set to ctx's deadline: whichever fires
		// first, the error says ctx's deadline and matches
		// DeadlineExceeded.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		id := newID(t, nil, rdmacm.PortSpaceTCP)
		err := id.ResolveAddrContext(ctx, clientAP, noHost)
		check(t, err, []string{"address resolution of " + noHost.String(), "ctx's deadline"},
			[]match{{context.DeadlineExceeded, true}})
	})

	t.Run("127.0.0.1", func(t *testing.T) {
		id := newID(t, nil, rdmacm.PortSpaceTCP)
		dst := netip.MustParseAddrPort("127.0.0.1:7471")
		err := id.Resolve(testContext(t), netip.AddrPort{}, dst)
		check(t, err, []string{"rdmacm ResolveRouteContext (id ", "route resolution of 127.0.0.1:7471: no RDMA device on the netdev of 127.0.0.1 (lo)",
			"RDMA devices are on veth0 (port 1 of rxe0), veth1 (port 1 of rxe1)", "no such device"},
			[]match{{syscall.ENODEV, true}, {context.DeadlineExceeded, false}})
	})

	t.Run("netdev without RDMA", func(t *testing.T) {
		testenv.RequireRoot(t)
		testenv.AddNetdev(t, "nordma0", "198.19.7.1/24")
		for _, dst := range []struct{ addr, says string }{
			{"198.19.7.1:7471", "no RDMA device on the netdev of 198.19.7.1 (nordma0)"},
			{"198.19.7.5:7471", "no RDMA device on the netdev that reaches 198.19.7.5 (nordma0)"},
		} {
			id := newID(t, nil, rdmacm.PortSpaceTCP)
			err := id.ResolveAddrContext(testContext(t), netip.AddrPort{}, netip.MustParseAddrPort(dst.addr))
			check(t, err, []string{"address resolution of " + dst.addr + ": " + dst.says, "ADDR_ERROR: no such device"},
				[]match{{syscall.ENODEV, true}})
		}
	})
}
