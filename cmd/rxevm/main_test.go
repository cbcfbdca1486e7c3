package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExitStatus boots real VMs: rxevm must exit with the command's status,
// 124 when the timeout kills it, and say why on stderr. It needs qemu and
// the kernel cache, so it runs on the host (make test sets
// PURERDMA_TEST_RXEVM=1 and then a missing qemu is a failure, not a skip).
func TestExitStatus(t *testing.T) {
	if os.Getenv("PURERDMA_VM") != "" {
		t.Skip("inside the VM: no nested VMs")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("PURERDMA_TEST_RXEVM") == "1" {
			t.Fatal("PURERDMA_TEST_RXEVM=1 but qemu-system-x86_64 is missing")
		}
		t.Skip("qemu-system-x86_64 not installed; run: make test")
	}
	bin := filepath.Join(t.TempDir(), "rxevm")
	// Static, so that -empty-root can use it as the VM's init.
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"exit3", []string{"--", "sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\nerr\n", "exit 3"},
		{"false", []string{"--", "false"}, 1, "", "exit 1"},
		{"notfound", []string{"--", "/no/such/command"}, 127, "", ""},
		{"device", []string{"--", "sh", "-c", `test "$PURERDMA_REQUIRE_DEVICE" = 1 && test -c /dev/infiniband/uverbs1 && pwd`}, 0, mustWd(t) + "\n", ""},
		{"timeout", []string{"-timeout", "20s", "--", "sleep", "600"}, 124, "", "timed out after 20s"},
		// The only program in an empty root is rxevm itself; with no
		// command it prints its usage and exits 2, which rxevm passes on.
		{"empty-root", []string{"-empty-root", "-add", bin + ":/bin/x", "--", "/bin/x"}, 2, "", "exit 2"},
		{"empty-root-dynamic", []string{"-empty-root", "-add", "/bin/true", "--", "/bin/true"}, 125, "", "dynamically linked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s took %v; stderr: %s", tc.name, time.Since(start).Round(time.Millisecond), stderr.String())
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			if tc.stdout != "" && stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.stderr)
			}
		})
	}
}

func mustWd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
