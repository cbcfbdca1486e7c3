package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs"
)

// useDevDir is devstest.UseDir.
func useDevDir(t *testing.T, exists bool) string {
	t.Helper()
	return devstest.UseDir(t, exists)
}

// useDeviceFakes makes the commands see only devs, whose network
// interfaces have the addresses in addrs.
func useDeviceFakes(t *testing.T, devs []uverbs.Device, addrs map[string][]netip.Addr) {
	t.Helper()
	devstest.UseDevices(t, devs, addrs)
}

// The VM's devices as the fakes describe them.
var (
	fakeRxe      = devstest.Rxe
	fakeRxeAddrs = devstest.RxeAddrs
	fakeRxeList  = devstest.RxeList
)

// linkAddHint says how to get a device where there is none.
const linkAddHint = devs.LinkAddHint

// runChecked runs a command line that must fail its device check
// (clitest.RunChecked).
func runChecked(t *testing.T, args []string, want string) {
	t.Helper()
	clitest.RunChecked(t, runContext, args, want)
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
