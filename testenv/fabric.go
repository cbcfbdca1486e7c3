package testenv

import (
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// A Fabric is one pair of RDMA devices of the test VM, each on one end
// of a veth pair of its own (docs/testing.md): soft-RoCE (rxe0, rxe1) or
// soft-iWARP (siw0, siw1). Servers listen on Addrs[0], clients bind to
// Addrs[1], so that every connection crosses the veth pair.
type Fabric struct {
	Name    string // "rxe" or "siw"
	Devs    [2]string
	Netdevs [2]string // the veths Devs are on
	Addrs   [2]netip.Addr
	// IWARP: RC only, no atomics or immediate data, connections only
	// through the rdma_cm.
	IWARP bool
}

// The test VM's fabrics.
var (
	RXE = Fabric{Name: "rxe", Devs: [2]string{"rxe0", "rxe1"}, Netdevs: [2]string{"veth0", "veth1"},
		Addrs: [2]netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}}
	SIW = Fabric{Name: "siw", Devs: [2]string{"siw0", "siw1"}, Netdevs: [2]string{"veth2", "veth3"},
		Addrs: [2]netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.2")}, IWARP: true}
)

// fabricEnv selects the fabric of a test binary's run: PURERDMA_FABRIC=siw
// runs a package's fabric-aware tests on siw (make vmtest runs the
// packages that have them once per fabric).
const fabricEnv = "PURERDMA_FABRIC"

// CurrentFabric is the fabric this test binary runs on: RXE unless
// PURERDMA_FABRIC names another. An unknown name panics: it is a typo in
// a Makefile or a command line, never a reason to test something else.
func CurrentFabric() Fabric {
	switch v := os.Getenv(fabricEnv); v {
	case "", "rxe":
		return RXE
	case "siw":
		return SIW
	default:
		panic(fmt.Sprintf("testenv: %s=%q: want rxe or siw", fabricEnv, v))
	}
}

// Server and Client are the current fabric's server and client
// addresses.
func Server() netip.Addr { return CurrentFabric().Addrs[0] }
func Client() netip.Addr { return CurrentFabric().Addrs[1] }

// NeedFabric returns the current fabric after checking that both its
// devices are present and ACTIVE, skipping or failing the test as
// Devices does.
func NeedFabric(t testing.TB) Fabric {
	t.Helper()
	f := CurrentFabric()
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatalf("listing RDMA devices: %v", err)
	}
	for _, name := range f.Devs {
		found := false
		for _, d := range devs {
			if d.Name == name {
				found = len(d.Ports) > 0 && d.Ports[0].State == uverbs.PortActive
			}
		}
		if !found {
			unavailable(t, fmt.Sprintf("the %s fabric needs %s, ACTIVE", f.Name, name))
			return f
		}
	}
	return f
}

// NotIWARP skips a test that does what iWARP cannot (UD, atomics,
// immediate data, a QP moved by hand to RTR and RTS, multicast) when the
// current fabric is iWARP, saying why. The test runs on every fabric
// that can: this is the matrix's empty cell, not a missing device.
func NotIWARP(t testing.TB, why string) {
	t.Helper()
	if f := CurrentFabric(); f.IWARP {
		t.Skipf("not applicable to %s (iWARP): %s", f.Name, why)
	}
}
