// Package testenv tells tests what the machine they run on offers: RDMA
// devices, root. Tests that need something call a helper here, which skips
// the test on a plain development host, and fails it inside the soft-RoCE
// test VM, which sets PURERDMA_REQUIRE_DEVICE=1 because it promises two
// rxe devices (rxe0 on veth0, rxe1 on veth1) and root. PeerHost gives
// the tests of the two-VM bed (rxevm -peer) the other host.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// RequireDevice reports whether the environment promises RDMA devices, so
// that a missing one is a failure rather than a reason to skip.
func RequireDevice() bool {
	return os.Getenv("PURERDMA_REQUIRE_DEVICE") == "1"
}

// Device returns the first RDMA device by name, skipping or failing the
// test when there is none.
func Device(t testing.TB) uverbs.Device {
	t.Helper()
	devs := Devices(t, 1)
	if len(devs) == 0 {
		return uverbs.Device{} // only with a t whose Skipf returns
	}
	return devs[0]
}

// Devices returns the RDMA devices sorted by name, at least n of them,
// skipping or failing the test when there are fewer.
func Devices(t testing.TB, n int) []uverbs.Device {
	t.Helper()
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatalf("listing RDMA devices: %v", err)
		return nil
	}
	if len(devs) >= n {
		return devs
	}
	if len(devs) == 0 {
		unavailable(t, "no RDMA device on this host")
	} else {
		unavailable(t, fmt.Sprintf("%d RDMA devices needed, %d on this host", n, len(devs)))
	}
	return nil
}

// RequireRoot skips or fails the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "the test needs root")
	}
}

// unavailable ends a test whose requirement is not met: a failure when the
// environment promised it, a skip naming the way to run it otherwise.
func unavailable(t testing.TB, reason string) {
	t.Helper()
	if RequireDevice() {
		t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: the test VM promised RDMA devices and root, but %s", reason)
		return
	}
	t.Skipf("%s; run the tests in the soft-RoCE VM: go test -exec scripts/vmexec %s", reason, packagePattern())
}

// packagePattern names the package under test relative to the module root,
// such as "./uverbs", from the test's working directory (go test runs a
// test binary in its package directory).
func packagePattern() string {
	wd, err := os.Getwd()
	if err != nil {
		return "./..."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "./..."
		}
		dir = parent
	}
}
