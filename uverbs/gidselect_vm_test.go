package uverbs_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// sysfsGID is one RoCE v2 entry of a port's GID table as sysfs shows
// it, read apart from the query code under test.
type sysfsGID struct {
	index  int
	addr   netip.Addr
	netdev string
}

func sysfsRoCEv2GIDs(t *testing.T, dev string) []sysfsGID {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	var out []sysfsGID
	for i := range 256 {
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", strconv.Itoa(i)))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue
		}
		s, err := os.ReadFile(filepath.Join(dir, "gids", strconv.Itoa(i)))
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(string(s)))
		if err != nil {
			t.Fatalf("%s GID %d: %v", dev, i, err)
		}
		nd, _ := os.ReadFile(filepath.Join(dir, "gid_attrs/ndevs", strconv.Itoa(i)))
		out = append(out, sysfsGID{index: i, addr: a.Unmap(), netdev: strings.TrimSpace(string(nd))})
	}
	return out
}

// TestRoCEv2GIDIndex finds each RoCE v2 GID of rxe0 by its address, as
// sysfs lists them, and refuses addresses the port does not have.
func TestRoCEv2GIDIndex(t *testing.T) {
	testenv.NotIWARP(t, "RoCE v2 GIDs: an iWARP port has one GID, made of its MAC address")
	c := openContextOn(t, 0)
	dev := c.Device().Name
	gids := sysfsRoCEv2GIDs(t, dev)
	if len(gids) < 2 {
		t.Fatalf("%s has RoCE v2 GIDs %v; the VM gives it an IPv4 and IPv6 addresses", dev, gids)
	}
	for _, g := range gids {
		idx, err := c.RoCEv2GIDIndex(1, g.addr)
		if err != nil || idx != g.index {
			t.Errorf("RoCEv2GIDIndex(%v) = %d, %v; want %d", g.addr, idx, err, g.index)
		}
		if g.addr.Is6() { // with the zone of the right device, and of another
			if idx, err := c.RoCEv2GIDIndex(1, g.addr.WithZone(g.netdev)); err != nil || idx != g.index {
				t.Errorf("RoCEv2GIDIndex(%v) = %d, %v; want %d", g.addr.WithZone(g.netdev), idx, err, g.index)
			}
			if _, err := c.RoCEv2GIDIndex(1, g.addr.WithZone("lo")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("RoCEv2GIDIndex(%v) = %v, want ErrNotExist", g.addr.WithZone("lo"), err)
			}
		}
	}
	// An IPv4-mapped IPv6 address is the same GID as the IPv4 address.
	var v4 sysfsGID
	for _, g := range gids {
		if g.addr.Is4() {
			v4 = g
		}
	}
	if !v4.addr.IsValid() {
		t.Fatalf("%s has no RoCE v2 IPv4 GID in sysfs", dev)
	}
	if idx, err := c.RoCEv2GIDIndex(1, netip.AddrFrom16(v4.addr.As16())); err != nil || idx != v4.index {
		t.Errorf("RoCEv2GIDIndex(::ffff:%v) = %d, %v; want %d", v4.addr, idx, err, v4.index)
	}

	other := netip.MustParseAddr("198.18.0.2") // rxe1's
	_, err := c.RoCEv2GIDIndex(1, other)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RoCEv2GIDIndex(%v) on %s = %v, want ErrNotExist", other, dev, err)
	}
	if msg := err.Error(); !strings.Contains(msg, other.String()) || !strings.Contains(msg, v4.addr.String()) {
		t.Errorf("the error should name the address and list the port's GIDs: %q", msg)
	}
	t.Log(err)
	if _, err := c.RoCEv2GIDIndex(1, netip.Addr{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RoCEv2GIDIndex(zero Addr) = %v, want EINVAL", err)
	}
	if _, err := c.RoCEv2GIDIndex(2, v4.addr); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RoCEv2GIDIndex on port 2 = %v, want EINVAL", err)
	}
}

// TestRoCEv2GID: rxe0's pick is its RoCE v2 GID of an IPv4 address,
// for any network device and for its own; another device's name finds
// nothing.
func TestRoCEv2GID(t *testing.T) {
	testenv.NotIWARP(t, "RoCE v2 GIDs: an iWARP port has one GID, made of its MAC address")
	c := openContextOn(t, 0)
	dev := c.Device().Name
	var want sysfsGID
	for _, g := range sysfsRoCEv2GIDs(t, dev) {
		if g.addr.Is4() {
			want = g
			break
		}
	}
	if !want.addr.IsValid() {
		t.Fatalf("%s has no RoCE v2 IPv4 GID in sysfs", dev)
	}
	for _, netdev := range []string{"", want.netdev} {
		e, err := c.RoCEv2GID(1, netdev)
		if err != nil || e.Index != want.index || e.GID.Addr() != want.addr || e.Type != uverbs.GIDTypeRoCEv2 ||
			e.Netdev != want.netdev || e.Port != 1 {
			t.Errorf("RoCEv2GID(1, %q) = %+v, %v; want index %d, %v on %s", netdev, e, err, want.index, want.addr, want.netdev)
		}
	}
	_, err := c.RoCEv2GID(1, "nosuchnetdev")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nosuchnetdev") {
		t.Errorf("RoCEv2GID of another network device = %v, want ErrNotExist naming it", err)
	}
	t.Log(err)
}

// TestRoCEv2GIDIPv6Only: on a network device with IPv6 addresses only,
// the pick is the port's first RoCE v2 GID, an IPv6 one, and
// RoCEv2GIDIndex finds the device's address.
func TestRoCEv2GIDIPv6Only(t *testing.T) {
	const name, netdev = "rxegid6", "gid6dev"
	testenv.Devices(t, 1)
	testenv.RequireRoot(t)
	addr := netip.MustParseAddr("fd00:198:77::1")
	testenv.AddNetdev(t, netdev, addr.String()+"/64")
	nl, err := rdmanl.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.NewLink(name, "rxe", netdev); err != nil {
		t.Fatalf("NEWLINK %s on %s: %v", name, netdev, err)
	}
	defer nl.DelLink(name)
	var gids []sysfsGID
	has := func() bool {
		for _, g := range gids {
			if g.addr == addr {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !has(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no RoCE v2 GID of %v within 10s: %v", name, addr, gids)
		}
		gids = sysfsRoCEv2GIDs(t, name)
	}
	for _, g := range gids {
		if g.addr.Is4() {
			t.Fatalf("%s has an IPv4 GID %v", name, g)
		}
	}
	c, err := uverbs.Open(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e, err := c.RoCEv2GID(1, "")
	if err != nil || e.Index != gids[0].index || e.GID.Addr() != gids[0].addr || e.Netdev != netdev {
		t.Errorf("RoCEv2GID = %+v, %v; want the first RoCE v2 GID, %+v", e, err, gids[0])
	}
	for _, g := range gids {
		if g.addr == addr {
			if idx, err := c.RoCEv2GIDIndex(1, addr); err != nil || idx != g.index {
				t.Errorf("RoCEv2GIDIndex(%v) = %d, %v; want %d", addr, idx, err, g.index)
			}
		}
	}
}
