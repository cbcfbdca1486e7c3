package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// The cross pairs: every example with a wire protocol also runs with
// a C server and the Go client, and with the Go server and a C client,
// checked as the Go pair is. The C sides are testdata/cexample.c,
// written against C librpma (Debian's librpma-dev, 1.2) and compiled
// when the first test needs them. On the VM's persistent memory they
// keep their data as the Go examples do, and the PMem runs chain: each
// finds what the run before it persisted, whichever pair ran it.

// pair says which implementation runs each side of an example; the
// zero pair is Go-Go.
type pair struct{ cServer, cClient bool }

var (
	goGo  = pair{}
	cGo   = pair{cServer: true}
	goC   = pair{cClient: true}
	pairs = []pair{goGo, cGo, goC}
)

// String is the pair's subtest name: server-client.
func (p pair) String() string {
	name := func(c bool) string {
		if c {
			return "C"
		}
		return "Go"
	}
	return name(p.cServer) + "-" + name(p.cClient)
}

// forPairs runs f as one subtest per pair: Go-Go, C-Go (C server, Go
// client) and Go-C (Go server, C client).
func forPairs(t *testing.T, f func(t *testing.T, p pair)) {
	t.Helper()
	for _, p := range pairs {
		t.Run(p.String(), func(t *testing.T) { f(t, p) })
	}
}

// command is the program and leading arguments that run side
// ("server" or "client") of example in p's implementation.
func (p pair) command(t testing.TB, example, side string) (string, []string) {
	t.Helper()
	if c := map[string]bool{"server": p.cServer, "client": p.cClient}[side]; c {
		return cExample(t), []string{example, side}
	}
	return binary(t, example, side), nil
}

// startSide starts side of example in p's implementation with args
// (from <addr> on).
func (p pair) start(t testing.TB, ctx context.Context, name, example, side string, args ...string) *proc {
	t.Helper()
	path, lead := p.command(t, example, side)
	return start(t, ctx, name, path, append(lead, args...)...)
}

var cBuild struct {
	sync.Mutex
	path string
}

// cExample compiles testdata/cexample.c once per test binary, into a
// temporary directory that outlives the tests (the VM that runs them
// is thrown away). Missing gcc or headers fail the test in the VM,
// which promises them (scripts/install-deps), and skip it elsewhere.
func cExample(t testing.TB) string {
	t.Helper()
	cBuild.Lock()
	defer cBuild.Unlock()
	if cBuild.path != "" {
		return cBuild.path
	}
	unavailable := func(why string) {
		t.Helper()
		if testenv.RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: %s (scripts/install-deps installs it)", why)
		}
		t.Skip(why)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		unavailable("gcc is not installed")
	}
	for _, h := range []string{"/usr/include/librpma.h", "/usr/include/infiniband/verbs.h"} {
		if _, err := os.Stat(h); err != nil {
			unavailable(h + " is missing (librpma-dev, libibverbs-dev)")
		}
	}
	dir, err := os.MkdirTemp("", "cexample")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "cexample")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, gcc, "-O2", "-Wall", "-Werror", "-o", bin, "testdata/cexample.c",
		"-lrpma", "-libverbs").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling testdata/cexample.c: %v\n%s", err, out)
	}
	t.Logf("compiled testdata/cexample.c in %v", time.Since(start).Round(time.Millisecond))
	cBuild.path = bin
	return bin
}
