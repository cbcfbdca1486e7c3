package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/internal/sys"
)

// A memory registration pins its pages, which counts against the
// process's locked-memory limit (RLIMIT_MEMLOCK): past it the kernel
// refuses REG_MR with ENOMEM (EPERM on some kernels and drivers). The
// default limit (64 KiB or 8 MiB) is smaller than many a benchmark's
// buffers, so that error gets the current limit and how to raise it.

// procLimits is where the process's limits are read; tests point it
// elsewhere.
var procLimits = "/proc/self/limits"

// memlockHint explains err when it is a memory registration refused
// with ENOMEM or EPERM, and returns it unchanged otherwise.
func memlockHint(err error) error {
	var se *sys.Error
	if !errors.As(err, &se) || !strings.Contains(se.Op, "REG_MR") {
		return err
	}
	if !errors.Is(err, sys.ErrNoMemory) && !errors.Is(err, os.ErrPermission) {
		return err
	}
	return fmt.Errorf("%w; the kernel refused to pin the memory: the locked-memory limit (RLIMIT_MEMLOCK) is %s; "+
		`raise it with "ulimit -l unlimited" in the shell that starts purerdma (as root, or after raising the hard limit in /etc/security/limits.conf), `+
		"or run the container with --ulimit memlock=-1:-1", err, memlockLimit())
}

// memlockLimit describes the current soft and hard RLIMIT_MEMLOCK, from
// /proc/self/limits: "8192 KiB (hard limit 8192 KiB)".
func memlockLimit() string {
	b, err := os.ReadFile(procLimits)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		return fmt.Sprintf("%s (hard limit %s)", limitBytes(f[0]), limitBytes(f[1]))
	}
	return "unknown (no \"Max locked memory\" in " + procLimits + ")"
}

// limitBytes formats a limit in bytes, or "unlimited".
func limitBytes(s string) string {
	n, err := strconv.ParseUint(s, 10, 64)
	switch {
	case err != nil:
		return s
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
