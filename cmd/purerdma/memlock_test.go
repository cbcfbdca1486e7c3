package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
)

// TestMemlockHint runs a command that fails as a registration past the
// locked-memory limit fails, and checks the message names the limit and
// how to raise it; other errors stay as they are.
func TestMemlockHint(t *testing.T) {
	limits := filepath.Join(t.TempDir(), "limits")
	os.WriteFile(limits, []byte(""+
		"Limit                     Soft Limit           Hard Limit           Units     \n"+
		"Max open files            1024                 524288               files     \n"+
		"Max locked memory         65536                unlimited            bytes     \n"), 0o644)
	old := procLimits
	procLimits = limits
	defer func() { procLimits = old }()

	errnos := map[string]error{"ENOMEM": syscall.ENOMEM, "EPERM": syscall.EPERM, "EINVAL": syscall.EINVAL}
	defer delete(commands, "failtest")
	commands["failtest"] = command{name: "failtest", usage: "  failtest\n", run: func(ctx context.Context, args []string, _, _ io.Writer) error {
		return fmt.Errorf("bench write_bw: %w", &sys.Error{Op: args[0], Err: errnos[args[1]]})
	}}
	for _, tt := range []struct {
		op, errno string
		hint      bool
	}{
		{"uverbs REG_MR", "ENOMEM", true},
		{"uverbs REG_MR", "EPERM", true},
		{"uverbs REG_MR", "EINVAL", false},
		{"uverbs CREATE_CQ", "ENOMEM", false},
	} {
		code, stdout, stderr := runArgs("failtest", tt.op, tt.errno)
		if code != 1 || stdout != "" {
			t.Errorf("%s %s: exit %d, stdout %q", tt.op, tt.errno, code, stdout)
		}
		base := "purerdma: bench write_bw: " + tt.op + ": " + errnos[tt.errno].Error()
		if !tt.hint {
			if stderr != base+"\n" {
				t.Errorf("%s %s: stderr %q, want %q", tt.op, tt.errno, stderr, base+"\n")
			}
			continue
		}
		for _, want := range []string{base + "; ", "locked-memory limit (RLIMIT_MEMLOCK) is 64 KiB (hard limit unlimited)",
			`"ulimit -l unlimited"`, "--ulimit memlock=-1:-1"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s %s: stderr %q lacks %q", tt.op, tt.errno, stderr, want)
			}
		}
	}

	procLimits = filepath.Join(t.TempDir(), "none")
	if got := memlockLimit(); !strings.HasPrefix(got, "unknown (") {
		t.Errorf("memlockLimit without the file = %q", got)
	}
	procLimits = "/proc/self/limits"
	if got := memlockLimit(); strings.HasPrefix(got, "unknown") {
		t.Errorf("memlockLimit of this process = %q", got)
	}
}
