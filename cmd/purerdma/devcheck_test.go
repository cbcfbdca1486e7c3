package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs"
)

// useDevDir points the device checks at a /dev/infiniband of the test's
// own, which exists or not, and returns its path.
func useDevDir(t *testing.T, exists bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infiniband")
	if exists {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := devDir
	devDir = dir
	t.Cleanup(func() { devDir = old })
	return dir
}

// useDeviceFakes makes the commands see only devs, whose network
// interfaces have the addresses in addrs.
func useDeviceFakes(t *testing.T, devs []uverbs.Device, addrs map[string][]netip.Addr) {
	t.Helper()
	oldList, oldAddrs := listDevices, netdevAddrs
	listDevices = func() ([]uverbs.Device, error) { return devs, nil }
	netdevAddrs = func(name string) []netip.Addr { return addrs[name] }
	t.Cleanup(func() { listDevices, netdevAddrs = oldList, oldAddrs })
}

// The VM's devices as the fakes describe them.
var (
	fakeRxe = []uverbs.Device{
		{Name: "rxe0", Ports: []uverbs.Port{{Num: 1, LinkLayer: "Ethernet", Netdev: "veth0"}}},
		{Name: "rxe1", Ports: []uverbs.Port{{Num: 1, LinkLayer: "Ethernet", Netdev: "veth1"}}},
		{Name: "mlx5_0", Ports: []uverbs.Port{{Num: 1, LinkLayer: "InfiniBand"}}},
	}
	fakeRxeAddrs = map[string][]netip.Addr{
		"veth0": {netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("fd00:198:18::1")},
		"veth1": {netip.MustParseAddr("198.18.0.2")},
	}
	fakeRxeList = "rxe0 (veth0 198.18.0.1 fd00:198:18::1), rxe1 (veth1 198.18.0.2), mlx5_0"
)

// deviceCheckTimeout bounds a command that should fail at once: one that
// waits for a peer instead runs into it and fails the test.
const deviceCheckTimeout = 20 * time.Second

// runChecked runs a command line that must fail its device check: exit
// status 1, nothing on stdout, and stderr with want, without waiting for
// a peer.
func runChecked(t *testing.T, args []string, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deviceCheckTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := runContext(ctx, args, &stdout, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("%q still waited after %v: exit %d, stderr %q", args, deviceCheckTimeout, code, stderr.String())
	}
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("%q = %d, stdout %q, stderr %q; want 1, nothing and %q", args, code, stdout.String(), stderr.String(), want)
	}
}

func TestFindDevice(t *testing.T) {
	useDeviceFakes(t, fakeRxe, fakeRxeAddrs)
	if d, err := findDevice("rxe1"); err != nil || d.Name != "rxe1" {
		t.Errorf(`findDevice("rxe1") = %q, %v`, d.Name, err)
	}
	if d, err := findDevice(""); err != nil || d.Name != "rxe0" {
		t.Errorf(`findDevice("") = %q, %v; want the first device`, d.Name, err)
	}
	_, err := findDevice("rxe9")
	want := `no RDMA device named "rxe9"; the RDMA devices here: ` + fakeRxeList
	if err == nil || err.Error() != want {
		t.Errorf("findDevice(rxe9) = %v, want %q", err, want)
	}

	for _, exists := range []bool{false, true} {
		useDeviceFakes(t, nil, nil)
		dir := useDevDir(t, exists)
		want := "no RDMA device: " + dir + " does not exist (no RDMA driver is loaded); " + linkAddHint
		if exists {
			want = "no RDMA device: " + dir + " has no verbs device; " + linkAddHint
		}
		for _, name := range []string{"", "rxe0"} {
			if _, err := findDevice(name); err == nil || err.Error() != want {
				t.Errorf("findDevice(%q) without devices, %s there: %v, want %q", name, dir, err, want)
			}
		}
	}
}

func TestBindError(t *testing.T) {
	useDeviceFakes(t, fakeRxe, fakeRxeAddrs)
	kernel := os.ErrNotExist // stands in for the kernel's error
	for _, tt := range []struct {
		addr string
		want string // "" for the kernel's error unchanged
	}{
		{"198.18.0.99:7174", "no RDMA device has the address 198.18.0.99; the RDMA devices here: " + fakeRxeList + " (file does not exist)"},
		{"127.0.0.1:1", "no RDMA device has the address 127.0.0.1; the RDMA devices here: " + fakeRxeList + " (file does not exist)"},
		{"198.18.0.2:7174", ""}, // a device has it: the kernel's reason stands
		{"[::ffff:198.18.0.1]:7174", ""},
		{"0.0.0.0:7174", ""},
	} {
		err := bindError(netip.MustParseAddrPort(tt.addr), kernel)
		want := tt.want
		if want == "" {
			want = kernel.Error()
		}
		if err.Error() != want {
			t.Errorf("bindError(%s) = %q, want %q", tt.addr, err, want)
		}
	}
}

// TestCommandsCheckTheDevice: every command that takes a device fails at
// once, naming it and listing the devices, when it does not exist; the
// servers among them (no SERVER argument) would otherwise wait for a
// client first.
func TestCommandsCheckTheDevice(t *testing.T) {
	useDeviceFakes(t, fakeRxe, fakeRxeAddrs)
	notFound := `no RDMA device named "nosuch"; the RDMA devices here: ` + fakeRxeList + "\n"
	for _, args := range [][]string{
		{"bench", "write_lat", "-d", "nosuch"},
		{"bench", "send_bw", "-d", "nosuch", "-p", "1"},
		{"bench", "read_lat", "-d", "nosuch", "198.18.0.1"},
		{"pingpong", "rc", "-d", "nosuch", "-g", "1"},
		{"pingpong", "uc", "-d", "nosuch", "-g", "1"},
		{"pingpong", "ud", "-d", "nosuch", "-g", "1"},
		{"pingpong", "srq", "-d", "nosuch", "-g", "1", "198.18.0.1"},
		{"devinfo", "-d", "nosuch"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			want := "purerdma: " + args[0] + " " + args[1] + ": " + notFound
			switch args[0] {
			case "pingpong":
				want = "purerdma: pingpong: IB device nosuch not found: " + notFound
			case "devinfo":
				want = "purerdma: devinfo: " + notFound
			}
			runChecked(t, args, want)
		})
	}
}

// TestCommandsWithoutDevices: on a machine without RDMA devices every
// command that needs one fails at once and says how to add one.
func TestCommandsWithoutDevices(t *testing.T) {
	useDeviceFakes(t, nil, nil)
	dir := useDevDir(t, false)
	none := "no RDMA device: " + dir + " does not exist (no RDMA driver is loaded); " + linkAddHint + "\n"
	for _, tt := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"bench", "write_lat"}, "bench write_lat: "},
		{[]string{"bench", "atomic_lat", "-d", "rxe0"}, "bench atomic_lat: "},
		{[]string{"bench", "write_bw", "198.18.0.1"}, "bench write_bw: "},
		{[]string{"bench", "connect", "-b", "198.18.0.1"}, "bench connect: "},
		{[]string{"bench", "connect", "-s", "198.18.0.1", "-c", "1"}, "bench connect: "},
		{[]string{"pingpong", "rc", "-g", "1"}, "pingpong: "},
		{[]string{"pingpong", "ud", "-d", "rxe0", "-g", "1"}, "pingpong: "},
		{[]string{"ping", "-s"}, "ping: "},
		{[]string{"ping", "-s", "-a", "198.18.0.1", "-P"}, "ping: "},
		{[]string{"ping", "-c", "-a", "198.18.0.1", "-C", "1"}, "ping: "},
		{[]string{"devinfo"}, "devinfo: "},
		{[]string{"devinfo", "-d", "rxe0"}, "devinfo: "},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			runChecked(t, tt.args, "purerdma: "+tt.prefix+none)
		})
	}
}

// TestThisHostWithoutDevices runs the server commands for real on a host
// without RDMA devices (the development machines): each fails at once
// and says how to add a device, instead of waiting for a client.
func TestThisHostWithoutDevices(t *testing.T) {
	testutils.HostOnly(t)
	if devs, err := uverbs.Devices(); err != nil || len(devs) > 0 {
		t.Skipf("this host has RDMA devices (%d, %v): TestCommandsWithoutDevices covers the case with fakes", len(devs), err)
	}
	for _, args := range [][]string{
		{"bench", "write_lat"},
		{"bench", "connect", "-b", "127.0.0.1"},
		{"pingpong", "rc", "-g", "1"},
		{"ping", "-s"},
		{"devinfo", "-d", "rxe0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			runChecked(t, args, "purerdma link add rxe0 type rxe netdev ETH")
		})
	}
}
