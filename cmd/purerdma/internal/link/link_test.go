package link

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/rdmactl"
)

// runArgs runs a purerdma command line with link its one command.
func runArgs(args ...string) (code int, stdout, stderr string) {
	return clitest.Run(Command, args...)
}

func TestUsage(t *testing.T) {
	usage := clitest.Set(Command).Usage()
	for _, tt := range []struct {
		args    []string
		message string // the line before the usage text
	}{
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
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := &devstest.Netlink{}
			devstest.UseNetlink(t, c)
			code, stdout, stderr := runArgs(tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if diff := cmp.Diff(tt.message+"\n"+usage, stderr); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
			if len(c.Calls) != 0 {
				t.Errorf("a bad command line reached netlink: %v", c.Calls)
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
			c := &devstest.Netlink{}
			devstest.UseNetlink(t, c)
			code, stdout, stderr := runArgs(tt.args...)
			if code != 0 || stdout != "" || stderr != "" {
				t.Errorf("run = %d, stdout %q, stderr %q; want 0 and no output", code, stdout, stderr)
			}
			if diff := cmp.Diff(tt.want, c.Calls); diff != "" {
				t.Errorf("netlink calls mismatch (-want +got):\n%s", diff)
			}
			if c.Closed != 1 {
				t.Errorf("connection closed %d times, want 1", c.Closed)
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
			devstest.UseNetlink(t, &devstest.Netlink{LinkList: links})
			code, stdout, stderr := runArgs(tt.args...)
			if code != 0 || stderr != "" {
				t.Errorf("run = %d, stderr %q; want 0 and no errors", code, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}

	devstest.UseNetlink(t, &devstest.Netlink{LinkList: links})
	code, stdout, stderr := runArgs("link", "show", "rxe7")
	if code != 1 || stdout != "" || stderr != "purerdma: link show rxe7: no such RDMA device; the RDMA devices here: rxe0, rxe1, mlx5_0\n" {
		t.Errorf("link show rxe7 = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	devstest.UseNetlink(t, &devstest.Netlink{})
	code, stdout, stderr = runArgs("link", "show", "rxe7")
	if code != 1 || stdout != "" || stderr != "purerdma: link show rxe7: no such RDMA device; "+devs.LinkAddHint+"\n" {
		t.Errorf("link show rxe7 without devices = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestErrors(t *testing.T) {
	eexist := &rdmanl.OpError{Op: "NEWLINK", Device: "rxe0", Err: syscall.EEXIST}
	c := &devstest.Netlink{Err: eexist}
	devstest.UseNetlink(t, c)
	code, stdout, stderr := runArgs("link", "add", "rxe0", "type", "rxe", "netdev", "eth0")
	if code != 1 || stdout != "" || stderr != "purerdma: rdma netlink NEWLINK rxe0: file exists\n" {
		t.Errorf("run = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if c.Closed != 1 {
		t.Errorf("connection closed %d times after an error, want 1", c.Closed)
	}

	old := devs.DialNetlink
	t.Cleanup(func() { devs.DialNetlink = old })
	devs.DialNetlink = func() (devs.Netlink, error) {
		return nil, &rdmanl.OpError{Op: "socket", Err: syscall.EPROTONOSUPPORT}
	}
	code, _, stderr = runArgs("link")
	if code != 1 || !strings.HasPrefix(stderr, "purerdma: rdma netlink socket: ") {
		t.Errorf("run with a failing dial = %d, stderr %q", code, stderr)
	}
}

// TestThisHost runs link against the real system: it lists the ports or
// fails cleanly where RDMA netlink is missing.
func TestThisHost(t *testing.T) {
	code, _, stderr := runArgs("link")
	switch {
	case code == 0 && stderr == "":
	case code == 1 && strings.HasPrefix(stderr, "purerdma: rdmactl Open: rdma netlink "):
		t.Logf("link: %s", stderr)
	default:
		t.Errorf("link = %d, stderr %q", code, stderr)
	}
}

// TestHelpWords: a help flag or word after the verb asks for the help.
func TestHelpWords(t *testing.T) {
	for _, args := range [][]string{{"link", "show", "-h"}, {"link", "help"}, {"link", "add", "-h"}} {
		code, stdout, stderr := runArgs(args...)
		if code != 0 || stderr != "" || stdout != Command.HelpText() {
			t.Errorf("%q = %d, stdout %q, stderr %q; want 0 and the help", args, code, stdout, stderr)
		}
	}
}

func TestLinkShowJSON(t *testing.T) {
	links := []rdmactl.Link{
		{DevIndex: 1, Device: "rxe0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP", NetdevIndex: 3, Netdev: "veth0"},
		{DevIndex: 3, Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP"},
	}
	for _, tt := range []struct {
		args []string
		want []Link
	}{
		{[]string{"link", "-json"}, []Link{
			{Device: "rxe0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP", Netdev: "veth0"},
			{Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP"},
		}},
		{[]string{"link", "show", "mlx5_0", "-json"}, []Link{{Device: "mlx5_0", Port: 1, State: "ACTIVE", PhysicalState: "LINK_UP"}}},
	} {
		devstest.UseNetlink(t, &devstest.Netlink{LinkList: links})
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
		var got struct{ Links []Link }
		json.Unmarshal([]byte(stdout), &got)
		if diff := cmp.Diff(tt.want, got.Links); diff != "" {
			t.Errorf("%q mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}
