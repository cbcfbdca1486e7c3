package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// PeerNetdev is the network device of the two-VM bed's data link on
// both VMs (docs/testing.md "The two-VM bed"); the faults of LinkFault
// and LinkDown go on it, never on the management link that carries
// rxevm-peer.
const PeerNetdev = "link0"

// faultLimit bounds each command that sets or clears a fault, a hang
// guard.
const faultLimit = 30 * time.Second

// local runs name with args on this VM.
func faultLocal(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), faultLimit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("this VM: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// remote runs name with args on the peer and returns its stdout.
func (p *Peer) faultRemote(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), faultLimit)
	defer cancel()
	cmd := p.Command(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("the peer: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// LinkFault puts a netem qdisc with the given parameters ("loss 5%",
// "delay 10ms 5ms") on the data link's netdev of both VMs, so that both
// directions see it:
//
//	tc qdisc replace dev link0 root netem PARAMS   (on each VM)
//
// and returns the function that removes it again on both
// (tc qdisc del dev link0 root); cleanup calls it if the test does not.
// The returned function may be called from any goroutine; it reports
// failures with t.Errorf.
func (p *Peer) LinkFault(t testing.TB, params string) (remove func()) {
	t.Helper()
	args := append([]string{"qdisc", "replace", "dev", PeerNetdev, "root", "netem"}, strings.Fields(params)...)
	if err := faultLocal("tc", args...); err != nil {
		t.Fatalf("link fault %q: %v", params, err)
	}
	var once sync.Once
	remove = func() {
		once.Do(func() {
			del := []string{"qdisc", "del", "dev", PeerNetdev, "root"}
			if err := faultLocal("tc", del...); err != nil {
				t.Errorf("removing link fault %q: %v", params, err)
			}
			if _, err := p.faultRemote("tc", del...); err != nil {
				t.Errorf("removing link fault %q: %v", params, err)
			}
		})
	}
	t.Cleanup(remove)
	if _, err := p.faultRemote("tc", args...); err != nil {
		t.Fatalf("link fault %q: %v", params, err)
	}
	return remove
}

// portActiveScript waits until port 1 of the RDMA device $1 is ACTIVE,
// giving up after 30 s (a hang guard).
const portActiveScript = `n=0; until grep -q ACTIVE /sys/class/infiniband/"$1"/ports/1/state; do n=$((n+1)); [ $n -gt 300 ] && { echo "port 1 of $1: $(cat /sys/class/infiniband/"$1"/ports/1/state)"; exit 1; }; sleep 0.1; done`

// LinkDown sets the data link's netdev down on both VMs
// (ip link set link0 down) and returns the function that sets it up
// again on both, puts back the permanent neighbour the bed pinned
// (ip neigh replace ADDR lladdr MAC dev link0 nud permanent; a down
// link drops it with its routes) and waits until port 1 of the rxe
// device on each end is ACTIVE. Cleanup calls it if the test does not.
// The returned function may be called from any goroutine; it reports
// failures with t.Errorf.
func (p *Peer) LinkDown(t testing.TB) (up func()) {
	t.Helper()
	neigh, err := p.faultRemote("ip", "-o", "neigh", "show", "dev", PeerNetdev, "nud", "permanent")
	if err != nil {
		t.Fatalf("link down: %v", err)
	}
	var restore [][]string
	for _, l := range strings.Split(strings.TrimSpace(neigh), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[1] == "lladdr" {
			restore = append(restore, []string{"neigh", "replace", f[0], "lladdr", f[2], "dev", PeerNetdev, "nud", "permanent"})
		}
	}
	localUp := SetLinkDown(t, PeerNetdev)
	var once sync.Once
	up = func() {
		once.Do(func() {
			localUp()
			if _, err := p.faultRemote("ip", "link", "set", PeerNetdev, "up"); err != nil {
				t.Errorf("link up: %v", err)
			}
			for _, r := range restore {
				if _, err := p.faultRemote("ip", r...); err != nil {
					t.Errorf("link up: %v", err)
				}
			}
			if err := faultLocal("sh", "-c", portActiveScript, "sh", p.LocalDev); err != nil {
				t.Errorf("link up: %v", err)
			}
			if _, err := p.faultRemote("sh", "-c", portActiveScript, "sh", p.Dev); err != nil {
				t.Errorf("link up: %v", err)
			}
		})
	}
	t.Cleanup(up)
	if _, err := p.faultRemote("ip", "link", "set", PeerNetdev, "down"); err != nil {
		t.Fatalf("link down: %v", err)
	}
	return up
}

// PortsActive fails the test unless port 1 of the data link's rxe
// device is ACTIVE on both VMs, waiting up to 30 s for it.
func (p *Peer) PortsActive(t testing.TB) {
	t.Helper()
	if err := faultLocal("sh", "-c", portActiveScript, "sh", p.LocalDev); err != nil {
		t.Fatal(err)
	}
	if _, err := p.faultRemote("sh", "-c", portActiveScript, "sh", p.Dev); err != nil {
		t.Fatal(err)
	}
}
