// Package devstest gives tests of the purerdma commands a machine of
// their own: fake device lists, interface addresses, /dev/infiniband and
// RDMA netlink, each restored when the test ends.
package devstest

import (
	"net/netip"
	"os"
	"path/filepath"

	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/uverbs"
)

// T is the part of *testing.T (or *testing.B) the fakes use.
type T interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Fatal(args ...any)
}

// UseDir points the device checks at a /dev/infiniband of the test's
// own, which exists or not, and returns its path.
func UseDir(t T, exists bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infiniband")
	if exists {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := devs.Dir
	devs.Dir = dir
	t.Cleanup(func() { devs.Dir = old })
	return dir
}

// UseDevices makes the commands see only ds, whose network interfaces
// have the addresses in addrs.
func UseDevices(t T, ds []uverbs.Device, addrs map[string][]netip.Addr) {
	t.Helper()
	oldList, oldAddrs := devs.List, devs.NetdevAddrs
	devs.List = func() ([]uverbs.Device, error) { return ds, nil }
	devs.NetdevAddrs = func(name string) []netip.Addr { return addrs[name] }
	t.Cleanup(func() { devs.List, devs.NetdevAddrs = oldList, oldAddrs })
}

// UseNetlink makes the commands' RDMA netlink connections c.
func UseNetlink(t T, c devs.Netlink) {
	t.Helper()
	old := devs.DialNetlink
	devs.DialNetlink = func() (devs.Netlink, error) { return c, nil }
	t.Cleanup(func() { devs.DialNetlink = old })
}

// Netlink records the link requests it gets and answers them with
// LinkList and Err.
type Netlink struct {
	Calls    []string
	LinkList []rdmactl.Link
	Err      error
	Closed   int
}

// AddLink records "NewLink NAME TYPE NETDEV".
func (f *Netlink) AddLink(name, linkType, netdev string) error {
	f.Calls = append(f.Calls, "NewLink "+name+" "+linkType+" "+netdev)
	return f.Err
}

// DeleteLink records "DelLink NAME".
func (f *Netlink) DeleteLink(name string) error {
	f.Calls = append(f.Calls, "DelLink "+name)
	return f.Err
}

// Links records "Links".
func (f *Netlink) Links() ([]rdmactl.Link, error) {
	f.Calls = append(f.Calls, "Links")
	return f.LinkList, f.Err
}

// Close counts the calls.
func (f *Netlink) Close() error {
	f.Closed++
	return nil
}

// The VM's devices as the fakes describe them: Rxe with the addresses
// RxeAddrs, which the commands' errors list as RxeList.
var (
	Rxe = []uverbs.Device{
		{Name: "rxe0", Ports: []uverbs.Port{{Num: 1, LinkLayer: "Ethernet", Netdev: "veth0"}}},
		{Name: "rxe1", Ports: []uverbs.Port{{Num: 1, LinkLayer: "Ethernet", Netdev: "veth1"}}},
		{Name: "mlx5_0", Ports: []uverbs.Port{{Num: 1, LinkLayer: "InfiniBand"}}},
	}
	RxeAddrs = map[string][]netip.Addr{
		"veth0": {netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("fd00:198:18::1")},
		"veth1": {netip.MustParseAddr("198.18.0.2")},
	}
	RxeList = "rxe0 (veth0 198.18.0.1 fd00:198:18::1), rxe1 (veth1 198.18.0.2), mlx5_0"
)
