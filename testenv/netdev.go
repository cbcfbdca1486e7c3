package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// AddNetdev creates an up network device named name for the test, with
// the given addresses ("198.18.2.1/24"), and removes it at cleanup. It
// uses a dummy device, or a veth pair when the kernel has no dummy
// driver. It needs root and the ip command (RequireRoot first).
func AddNetdev(t testing.TB, name string, addrs ...string) {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("the test needs the ip command: %v", err)
	}
	out, err := exec.Command(ip, "link", "add", name, "type", "dummy").CombinedOutput()
	if err != nil {
		t.Logf("ip link add %s type dummy: %v: %s; trying veth", name, err, out)
		out, err = exec.Command(ip, "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput()
		if err != nil {
			t.Fatalf("ip link add %s type veth: %v: %s", name, err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "link", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip link del %s: %v: %s", name, err, out)
		}
	})
	for _, a := range addrs {
		if out, err := exec.Command(ip, "addr", "add", a, "dev", name).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s dev %s: %v: %s", a, name, err, out)
		}
	}
	if out, err := exec.Command(ip, "link", "set", name, "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s up: %v: %s", name, err, out)
	}
}

// SetLinkDown sets netdev, one of the VM's veths, down, and returns the
// function that sets it up again and puts back what the kernel removed
// with it: its routes in every table (the VM's policy routing), IPv4 and
// IPv6, and its permanent neighbours (the VM pins them). Its IPv6
// addresses are kept over the down (keep_addr_on_down; IPv4 keeps its
// own). If the test does not call up, cleanup does. It needs root and
// the ip command (RequireRoot first).
func SetLinkDown(t testing.TB, netdev string) (up func()) {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("the test needs the ip command: %v", err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	var routes [][]string // replace arguments, after "route replace"
	for _, fam := range []string{"-4", "-6"} {
		out, err := run(fam, "-o", "route", "show", "table", "all", "dev", netdev)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var args []string
			for _, f := range strings.Fields(l) {
				if f != "linkdown" && f != "dead" { // states, not attributes
					args = append(args, f)
				}
			}
			if len(args) > 0 {
				routes = append(routes, append([]string{fam, "route", "replace"}, append(args, "dev", netdev)...))
			}
		}
	}
	var neighs [][]string
	out, err := run("-o", "neigh", "show", "dev", netdev, "nud", "permanent")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[1] == "lladdr" {
			neighs = append(neighs, []string{"neigh", "replace", f[0], "lladdr", f[2], "dev", netdev, "nud", "permanent"})
		}
	}
	keep := "/proc/sys/net/ipv6/conf/" + netdev + "/keep_addr_on_down"
	oldKeep, err := os.ReadFile(keep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run("link", "set", netdev, "down"); err != nil {
		t.Fatal(err)
	}
	done := false
	up = func() {
		t.Helper()
		if done {
			return
		}
		done = true
		if _, err := run("link", "set", netdev, "up"); err != nil {
			t.Error(err)
		}
		for _, r := range routes {
			if _, err := run(r...); err != nil && !slices.Contains(r, "kernel") {
				// The kernel puts its own routes back with the link;
				// the others are the VM's.
				t.Error(err)
			}
		}
		for _, n := range neighs {
			if _, err := run(n...); err != nil {
				t.Error(err)
			}
		}
		if err := os.WriteFile(keep, bytes.TrimSpace(oldKeep), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(up)
	return up
}
