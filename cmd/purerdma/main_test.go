package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/uverbs"
)

// TestMain runs the tests or, with mainEnv set, the command itself with
// the arguments after the program name, as a process the tests start.
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" {
		os.Exit(runContext(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	testutils.Main(m)
}

// mainEnv makes the test binary the purerdma command (TestMain).
const mainEnv = "PURERDMA_TEST_RUN_COMMAND"

// fakeClient records the link requests it gets.
type fakeClient struct {
	calls  []string
	links  []rdmactl.Link
	err    error
	closed int
}

func (f *fakeClient) AddLink(name, linkType, netdev string) error {
	f.calls = append(f.calls, "NewLink "+name+" "+linkType+" "+netdev)
	return f.err
}

func (f *fakeClient) DeleteLink(name string) error {
	f.calls = append(f.calls, "DelLink "+name)
	return f.err
}

func (f *fakeClient) Links() ([]rdmactl.Link, error) {
	f.calls = append(f.calls, "Links")
	return f.links, f.err
}

func (f *fakeClient) Close() error {
	f.closed++
	return nil
}

// useFakes points the commands at fakes for the rest of the test.
func useFakes(t *testing.T, devs []uverbs.Device, c *fakeClient) {
	t.Helper()
	oldList, oldDial := listDevices, dialNetlink
	listDevices = func() ([]uverbs.Device, error) { return devs, nil }
	dialNetlink = func() (linkClient, error) { return c, nil }
	t.Cleanup(func() { listDevices, dialNetlink = oldList, oldDial })
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args    []string
		message string // the line before the usage text, if any
	}{
		{nil, ""},
		{[]string{"frobnicate"}, `purerdma: unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `purerdma: help: unknown command "frobnicate"`},
		{[]string{"help", "link", "devices"}, "purerdma: help takes at most one command"},
		{[]string{"devices", "extra"}, "purerdma: devices takes no arguments but -json"},
		{[]string{"link", "show", "-x"}, `purerdma: link show: unknown flag "-x"`},
		{[]string{"link", "frob"}, `purerdma: unknown link command "frob"`},
		{[]string{"link", "add"}, "purerdma: link add needs a device name"},
		{[]string{"link", "add", "rxe0"}, "purerdma: link add needs both type and netdev"},
		{[]string{"link", "add", "rxe0", "type", "rxe"}, "purerdma: link add needs both type and netdev"},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev"}, `purerdma: link add: "netdev" needs a value`},
		{[]string{"link", "add", "rxe0", "kind", "rxe", "netdev", "eth0"}, `purerdma: link add: unknown keyword "kind"`},
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev", "eth0", "mtu"}, `purerdma: link add: "mtu" needs a value`},
		{[]string{"link", "del"}, "purerdma: link del takes one device name"},
		{[]string{"link", "delete", "a", "b"}, "purerdma: link delete takes one device name"},
		{[]string{"link", "show", "a", "b"}, "purerdma: link show takes at most one device"},
		{[]string{"link", "show", "rxe0/x"}, `purerdma: bad port in "rxe0/x"`},
		{[]string{"link", "show", "rxe0/0"}, `purerdma: bad port in "rxe0/0"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := &fakeClient{}
			useFakes(t, nil, c)
			code, stdout, stderr := runArgs(tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			want := usage()
			if tt.message != "" {
				want = tt.message + "\n" + usage()
			}
			if diff := cmp.Diff(want, stderr); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
			if len(c.calls) != 0 {
				t.Errorf("a bad command line reached netlink: %v", c.calls)
			}
		})
	}
}

func TestLinkCommands(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"link", "add", "rxe0", "type", "rxe", "netdev", "eth0"}, []string{"NewLink rxe0 rxe eth0"}},
		{[]string{"link", "add", "siw0", "netdev", "eth1", "type", "siw"}, []string{"NewLink siw0 siw eth1"}},
		{[]string{"link", "del", "rxe0"}, []string{"DelLink rxe0"}},
		{[]string{"link", "delete", "rxe1"}, []string{"DelLink rxe1"}},
		{[]string{"link"}, []string{"Links"}},
		{[]string{"link", "show"}, []string{"Links"}},
		{[]string{"link", "list"}, []string{"Links"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := &fakeClient{}
			useFakes(t, nil, c)
			code, stdout, stderr := runArgs(tt.args...)
			if code != 0 || stdout != "" || stderr != "" {
				t.Errorf("run = %d, stdout %q, stderr %q; want 0 and no output", code, stdout, stderr)
			}
			if diff := cmp.Diff(tt.want, c.calls); diff != "" {
				t.Errorf("netlink calls mismatch (-want +got):\n%s", diff)
			}
			if c.closed != 1 {
				t.Errorf("connection closed %d times, want 1", c.closed)
			}
		})
	}
}

func TestLinkShow(t *testing.T) {
	links := []rdmactl.Link{
		{DevIndex: 1, Device: "rxe0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP", NetdevIndex: 3, Netdev: "veth0"},
		{DevIndex: 2, Device: "rxe1", Port: 1, State: "DOWN", PhysState: "DISABLED", NetdevIndex: 4, Netdev: "veth1"},
		{DevIndex: 3, Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP"},
		{DevIndex: 3, Device: "mlx5_0", Port: 2, State: "UNKNOWN", PhysState: "UNKNOWN"},
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"link"}, "" +
			"link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0\n" +
			"link rxe1/1 state DOWN physical_state DISABLED netdev veth1\n" +
			"link mlx5_0/1 state ACTIVE physical_state LINK_UP\n" +
			"link mlx5_0/2 state UNKNOWN physical_state UNKNOWN\n"},
		{[]string{"link", "show", "rxe1"}, "link rxe1/1 state DOWN physical_state DISABLED netdev veth1\n"},
		{[]string{"link", "list", "mlx5_0/2"}, "link mlx5_0/2 state UNKNOWN physical_state UNKNOWN\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			useFakes(t, nil, &fakeClient{links: links})
			code, stdout, stderr := runArgs(tt.args...)
			if code != 0 || stderr != "" {
				t.Errorf("run = %d, stderr %q; want 0 and no errors", code, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}

	useFakes(t, nil, &fakeClient{links: links})
	code, stdout, stderr := runArgs("link", "show", "rxe7")
	if code != 1 || stdout != "" || stderr != "purerdma: link show rxe7: no such RDMA device; the RDMA devices here: rxe0, rxe1, mlx5_0\n" {
		t.Errorf("link show rxe7 = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestDevices(t *testing.T) {
	useFakes(t, []uverbs.Device{
		{Name: "mlx5_0", NodeGUID: 0x0002c90300a0b0c0},
		{Name: "rxe0", NodeGUID: 0x505400fffe123456},
		{Name: "a_device_name_longer_than_16", NodeGUID: 1},
	}, &fakeClient{})
	code, stdout, stderr := runArgs("devices")
	want := "" +
		"    device          \t   node GUID\n" +
		"    ------          \t----------------\n" +
		"    mlx5_0          \t0002c90300a0b0c0\n" +
		"    rxe0            \t505400fffe123456\n" +
		"    a_device_name_longer_than_16\t0000000000000001\n"
	if code != 0 || stderr != "" {
		t.Errorf("run = %d, stderr %q", code, stderr)
	}
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	eexist := &rdmanl.OpError{Op: "NEWLINK", Device: "rxe0", Err: syscall.EEXIST}
	c := &fakeClient{err: eexist}
	useFakes(t, nil, c)
	code, stdout, stderr := runArgs("link", "add", "rxe0", "type", "rxe", "netdev", "eth0")
	if code != 1 || stdout != "" || stderr != "purerdma: rdma netlink NEWLINK rxe0: file exists\n" {
		t.Errorf("run = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if c.closed != 1 {
		t.Errorf("connection closed %d times after an error, want 1", c.closed)
	}

	dialNetlink = func() (linkClient, error) {
		return nil, &rdmanl.OpError{Op: "socket", Err: syscall.EPROTONOSUPPORT}
	}
	code, _, stderr = runArgs("link")
	if code != 1 || !strings.HasPrefix(stderr, "purerdma: rdma netlink socket: ") {
		t.Errorf("run with a failing dial = %d, stderr %q", code, stderr)
	}

	listDevices = func() ([]uverbs.Device, error) { return nil, errors.New("uverbs: listing devices: boom") }
	code, stdout, stderr = runArgs("devices")
	if code != 1 || stdout != "" || stderr != "purerdma: uverbs: listing devices: boom\n" {
		t.Errorf("devices with a failing listing = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestThisHost runs the commands against the real system: on a host
// without RDMA, devices prints only the header and link fails cleanly.
func TestThisHost(t *testing.T) {
	code, stdout, stderr := runArgs("devices")
	if code != 0 || stderr != "" {
		t.Errorf("devices = %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "    device          \t   node GUID\n    ------          \t----------------\n") {
		t.Errorf("devices printed no header:\n%s", stdout)
	}
	code, _, stderr = runArgs("link")
	switch {
	case code == 0 && stderr == "":
	case code == 1 && strings.HasPrefix(stderr, "purerdma: rdmactl Open: rdma netlink "):
		t.Logf("link: %s", stderr)
	default:
		t.Errorf("link = %d, stderr %q", code, stderr)
	}
}

// TestHelp asks every registered command for its help, in each way there
// is: each prints its usage and example command lines on stdout and
// exits 0.
func TestHelp(t *testing.T) {
	if len(commands) < 6 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for name, c := range commands {
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {name, "-help"}, {"help", name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				useFakes(t, nil, &fakeClient{})
				code, stdout, stderr := runArgs(args...)
				if code != 0 || stderr != "" {
					t.Errorf("exit status %d, stderr %q; want 0 and no errors", code, stderr)
				}
				if stdout != commandHelp(c) {
					t.Errorf("stdout = %q, want the command's help", stdout)
				}
				if !strings.Contains(stdout, "Examples:\n  purerdma "+name) {
					t.Errorf("the help has no example command line:\n%s", stdout)
				}
				if !strings.Contains(stdout, c.Usage) || !strings.Contains(stdout, exitText) {
					t.Errorf("the help lacks the usage or the exit statuses:\n%s", stdout)
				}
			})
		}
	}
	// Help flags further along the command line.
	for _, args := range [][]string{
		{"link", "show", "-h"}, {"link", "help"}, {"devinfo", "-v", "--help"}, {"devinfo", "-lh"},
		{"bench", "write_lat", "-h"}, {"bench", "connect", "-h"}, {"ping", "-s", "-h"},
	} {
		code, stdout, _ := runArgs(args...)
		if want := commandHelp(commands[args[0]]); code != 0 || stdout != want {
			t.Errorf("%q = %d, stdout %q; want 0 and the help", args, code, stdout)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		code, stdout, stderr := runArgs(args...)
		if code != 0 || stdout != usage() || stderr != "" {
			t.Errorf("%q = %d, stdout %q, stderr %q; want 0 and the usage", args, code, stdout, stderr)
		}
	}
	for name := range commands {
		if !strings.Contains(usage(), "\n  "+name+" ") {
			t.Errorf("the usage does not list %s", name)
		}
	}
}

// TestExitStatus checks each exit status the usage documents.
func TestExitStatus(t *testing.T) {
	for _, s := range []string{"0 success", "1 the operation failed", "2 bad command line"} {
		if !strings.Contains(usage(), s) {
			t.Errorf("the usage does not document exit status %q", s)
		}
	}
	useFakes(t, nil, &fakeClient{})
	if code, _, _ := runArgs("link", "show"); code != 0 {
		t.Errorf("a working command exited %d, want 0", code)
	}
	useFakes(t, nil, &fakeClient{err: &rdmanl.OpError{Op: "GET", Err: syscall.EPERM}})
	if code, _, _ := runArgs("link", "show"); code != 1 {
		t.Errorf("a failing command exited %d, want 1", code)
	}
	useFakes(t, nil, &fakeClient{})
	if code, _, stderr := runArgs("devinfo"); code != 1 || !strings.Contains(stderr, "no RDMA device") {
		t.Errorf("devinfo without devices exited %d (stderr %q), want 1 and a message", code, stderr)
	}
	if code, _, _ := runArgs("link", "frob"); code != 2 {
		t.Errorf("a bad command line exited %d, want 2", code)
	}
}

func TestDevicesJSON(t *testing.T) {
	useFakes(t, []uverbs.Device{
		{Name: "rxe0", NodeGUID: 0x505400fffe123456, Transport: uverbs.TransportIB, DriverName: "rxe",
			Ports: []uverbs.Port{{Num: 1, State: uverbs.PortActive, PhysState: "LinkUp", LinkLayer: "Ethernet", Netdev: "veth0"}}},
	}, &fakeClient{})
	code, stdout, stderr := runArgs("devices", "-json")
	if code != 0 || stderr != "" {
		t.Fatalf("run = %d, stderr %q", code, stderr)
	}
	var got map[string][]map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %q: %v", stdout, err)
	}
	if dec.More() {
		t.Errorf("more than one JSON document: %q", stdout)
	}
	if len(got["devices"]) != 1 {
		t.Fatalf("devices = %v, want one", got)
	}
	d := got["devices"][0]
	for _, k := range []string{"name", "node_guid", "sys_image_guid", "node_type", "transport", "node_desc",
		"fw_ver", "driver", "uverbs_device", "dev_path", "ports"} {
		if _, ok := d[k]; !ok {
			t.Errorf("device has no %q: %v", k, d)
		}
	}
	if d["name"] != "rxe0" || d["node_guid"] != "505400fffe123456" || d["driver"] != "rxe" {
		t.Errorf("device = %v", d)
	}
	want := []any{map[string]any{"port": 1.0, "state": "PORT_ACTIVE", "physical_state": "LinkUp", "link_layer": "Ethernet", "netdev": "veth0"}}
	if diff := cmp.Diff(want, d["ports"]); diff != "" {
		t.Errorf("ports mismatch (-want +got):\n%s", diff)
	}

	useFakes(t, nil, &fakeClient{})
	code, stdout, _ = runArgs("devices", "-json")
	if code != 0 || stdout != "{\n  \"devices\": []\n}\n" {
		t.Errorf("no devices: %d, %q", code, stdout)
	}
}

func TestLinkShowJSON(t *testing.T) {
	links := []rdmactl.Link{
		{DevIndex: 1, Device: "rxe0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP", NetdevIndex: 3, Netdev: "veth0"},
		{DevIndex: 3, Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP"},
	}
	for _, tt := range []struct {
		args []string
		want []linkJSON
	}{
		{[]string{"link", "-json"}, []linkJSON{
			{Device: "rxe0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP", Netdev: "veth0"},
			{Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP"},
		}},
		{[]string{"link", "show", "mlx5_0", "-json"}, []linkJSON{{Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP"}}},
	} {
		useFakes(t, nil, &fakeClient{links: links})
		code, stdout, stderr := runArgs(tt.args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q = %d, stderr %q", tt.args, code, stderr)
		}
		var raw map[string][]map[string]any
		if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
			t.Fatalf("%q: decoding %q: %v", tt.args, stdout, err)
		}
		for _, l := range raw["links"] {
			for _, k := range []string{"device", "port", "state", "physical_state", "netdev"} {
				if _, ok := l[k]; !ok {
					t.Errorf("%q: link has no %q: %v", tt.args, k, l)
				}
			}
		}
		var got struct{ Links []linkJSON }
		json.Unmarshal([]byte(stdout), &got)
		if diff := cmp.Diff(tt.want, got.Links); diff != "" {
			t.Errorf("%q mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}
