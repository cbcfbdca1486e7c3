package rdmacm_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
)

// TestBindIPv6 binds and listens on veth0's IPv6 link-local address: the
// ID lands on rxe0 (whose GID table holds that address as a RoCE v2 GID)
// and reports the address, zone and a kernel-chosen port back.
func TestBindIPv6(t *testing.T) {
	needDevices(t)
	a := linkLocal(t, "veth0")
	id := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := id.Bind(netip.AddrPortFrom(a, 0)); err != nil {
		t.Fatalf("Bind([%v]:0): %v", a, err)
	}
	if d, ok := id.Device(); !ok || d.Name != "rxe0" {
		t.Errorf("bound to %q (%v), want rxe0", d.Name, ok)
	}
	if err := id.Listen(0); err != nil {
		t.Fatal(err)
	}
	got, err := id.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr().WithZone("") != a.WithZone("") || got.Port() == 0 {
		t.Errorf("LocalAddr = %v, want [%v] with a port", got, a)
	}
	t.Logf("listening on %v", got)
}

// linkLocal returns the interface's IPv6 link-local address, with the
// interface as zone, once duplicate address detection has finished (a
// tentative address cannot be bound).
func linkLocal(t *testing.T, ifname string) netip.Addr {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if a, ok := settledLinkLocal(t, ifi); ok {
			return a.WithZone(ifname)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no settled IPv6 link-local address after 10 s", ifname)
		}
	}
}

// settledLinkLocal reads /proc/net/if_inet6: address, index, prefix
// length, scope, flags (0x40: tentative), name.
func settledLinkLocal(t *testing.T, ifi *net.Interface) (netip.Addr, bool) {
	b, err := os.ReadFile("/proc/net/if_inet6")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[5] != ifi.Name || f[3] != "20" { // 0x20: link scope
			continue
		}
		var flags int
		if _, err := fmt.Sscanf(f[4], "%x", &flags); err != nil || flags&0x40 != 0 {
			continue
		}
		var raw [16]byte
		for i := range raw {
			var v int
			if _, err := fmt.Sscanf(f[0][2*i:2*i+2], "%02x", &v); err != nil {
				t.Fatalf("if_inet6 line %q: %v", line, err)
			}
			raw[i] = byte(v)
		}
		return netip.AddrFrom16(raw), true
	}
	return netip.Addr{}, false
}
