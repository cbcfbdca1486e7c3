package testenv

import (
	"os/exec"
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
