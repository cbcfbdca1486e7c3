// Package testutils holds helpers shared by the tests of this module. Main
// is the TestMain of every test package: it runs the tests, then fails the
// run if they leaked file descriptors or goroutines.
package testutils

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// Main runs the tests of m and exits. The run fails (exit status 1, with a
// report on stderr) if file descriptors opened during the tests are still
// open afterwards, or goroutines started by them are still running.
//
//	func TestMain(m *testing.M) { testutils.Main(m) }
func Main(m *testing.M) {
	os.Exit(run(m, os.Stderr))
}

func run(m *testing.M, stderr io.Writer) int {
	warmUp()
	before, err := openFDs()
	if err != nil {
		fmt.Fprintf(stderr, "testutils: %v\n", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		// The failure is already reported; leaks from a failed test
		// would only add noise.
		return code
	}
	failed := false
	after, err := openFDs()
	if err != nil {
		fmt.Fprintf(stderr, "testutils: %v\n", err)
		failed = true
	}
	if leaked := leakedFDs(before, after); len(leaked) > 0 {
		fmt.Fprintf(stderr, "testutils: %d file descriptor(s) leaked by the tests:\n", len(leaked))
		for _, l := range leaked {
			fmt.Fprintf(stderr, "\tfd %s\n", l)
		}
		failed = true
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(stderr, "testutils: goroutines leaked by the tests: %v\n", err)
		failed = true
	}
	if failed {
		fmt.Fprintln(stderr, "FAIL: leak check")
		return 1
	}
	return 0
}

// warmUp makes the runtime open the descriptors it keeps for the life of
// the process (the network poller's epoll and wake-up descriptors), so
// that they are already in the "before" list.
func warmUp() {
	r, w, err := os.Pipe() // pipes go through the runtime poller
	if err == nil {
		r.Close()
		w.Close()
	}
}

// openFDs maps each open descriptor of the process to what it refers to.
func openFDs() (map[int]string, error) {
	if runtime.GOOS != "linux" {
		return map[int]string{}, nil
	}
	const dir = "/proc/self/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing open file descriptors: %w", err)
	}
	fds := make(map[int]string, len(entries))
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			// Most likely the descriptor ReadDir itself used, closed
			// by now.
			continue
		}
		fds[fd] = target
	}
	return fds, nil
}

// leakedFDs lists the descriptors open in after that were not open, to
// the same target, in before, as "N -> target", sorted by number.
func leakedFDs(before, after map[int]string) []string {
	var fds []int
	for fd, target := range after {
		if before[fd] == target {
			continue
		}
		fds = append(fds, fd)
	}
	sort.Ints(fds)
	leaked := make([]string, len(fds))
	for i, fd := range fds {
		leaked[i] = fmt.Sprintf("%d -> %s", fd, after[fd])
	}
	return leaked
}

// HostOnly skips, inside the soft-RoCE VM, a test that checks the host's
// sources or toolchain (layering, the ABI against the C headers): the
// host phase of make test (make unit) runs it against the same files,
// and under emulation it would only cost time.
func HostOnly(t testing.TB) {
	t.Helper()
	if os.Getenv("PURERDMA_VM") != "" {
		t.Skip("a host check: make unit runs it outside the VM")
	}
}

// NeedTool handles a missing tool (gcc, headers): the test fails when
// the environment variable env is 1 (make unit sets it), and skips with
// a hint otherwise.
func NeedTool(t testing.TB, env string, err error) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s=1 but: %v", env, err)
	}
	t.Skipf("%v (%s=1 makes this a failure; scripts/install-deps installs it)", err, env)
}
