package uverbs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The test binary run again with helperEnv set is a helper process
// (init, below, runs it before the tests): "memlock" registers memory
// under a low RLIMIT_MEMLOCK without CAP_IPC_LOCK.
const (
	helperEnv       = "UVERBS_TEST_HELPER"
	memlockLimitEnv = "UVERBS_TEST_MEMLOCK"  // the limit, in bytes
	memlockDontFork = "UVERBS_TEST_DONTFORK" // "1": ForkDontFork mode
	memlockSize     = 1 << 20                // what the helper tries to register
)

func init() {
	switch os.Getenv(helperEnv) {
	case "":
	case "memlock":
		os.Exit(memlockHelper())
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// memlockResult is what the memlock helper reports, as JSON on stdout.
type memlockResult struct {
	CapEff       string // CapEff of /proc/self/status after dropping root
	Err          string // the failed registration's error
	ENOMEM       bool   // it matches ENOMEM
	EPERM        bool   // it matches EPERM
	Again        string // a second try's error
	FDs          [2]int // open descriptors before and after the failures
	PinnedKB     [2]int // VmPin before and after
	DontFork     [2]bool
	SmallErr     string // a registration within the limit: "" when it worked
	SmallPinned  int    // VmPin with it registered
	SmallMarked  bool   // its first page is marked DONTFORK
	ClosedPinned int    // VmPin after it closed
}

// procStatusKB reads a "kB" field of /proc/self/status.
func procStatusKB(field string) int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

func procStatus(field string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func openFDCount() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// memlockHelper lowers RLIMIT_MEMLOCK, becomes nobody (no CAP_IPC_LOCK:
// root's is what lets the tests pin memory without limit), opens the
// first device and registers memlockSize bytes, twice; then a region
// within the limit. It prints a memlockResult.
func memlockHelper() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "memlock helper:", err)
		return 1
	}
	lim, err := strconv.ParseUint(os.Getenv(memlockLimitEnv), 10, 64)
	if err != nil {
		return fail(err)
	}
	if err := sys.BecomeNobody(lim); err != nil {
		return fail(err)
	}
	if os.Getenv(memlockDontFork) == "1" {
		uverbs.ForceForkMode(uverbs.ForkDontFork)
	}
	r := memlockResult{CapEff: procStatus("CapEff")}
	devs, err := uverbs.Devices()
	if err != nil || len(devs) == 0 {
		return fail(fmt.Errorf("no device: %v", err))
	}
	c, err := devs[0].Open(nil)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		return fail(err)
	}
	buf, err := uverbs.AllocBuffer(memlockSize)
	if err != nil {
		return fail(err)
	}
	defer buf.Close()
	dontFork := func() bool {
		flags, err := uverbs.VMFlags(addrOf(buf.Bytes()))
		return err == nil && slices.Contains(flags, "dc")
	}
	r.FDs[0], r.PinnedKB[0], r.DontFork[0] = openFDCount(), procStatusKB("VmPin"), dontFork()
	mr, err := pd.RegBuffer(buf, uverbs.AccessLocalWrite)
	if err == nil {
		mr.Close()
		return fail(fmt.Errorf("registered %d bytes under a limit of %d", memlockSize, lim))
	}
	r.Err, r.ENOMEM, r.EPERM = err.Error(), errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.EPERM)
	if mr, err := pd.RegBuffer(buf, uverbs.AccessLocalWrite); err == nil {
		mr.Close()
		return fail(errors.New("the second try registered"))
	} else {
		r.Again = err.Error()
	}
	r.FDs[1], r.PinnedKB[1], r.DontFork[1] = openFDCount(), procStatusKB("VmPin"), dontFork()
	if lim > 0 {
		small, err := pd.RegMR(buf.Bytes()[:lim/2], uverbs.AccessLocalWrite)
		if err != nil {
			r.SmallErr = err.Error()
		} else {
			r.SmallPinned, r.SmallMarked = procStatusKB("VmPin"), dontFork()
			if err := small.Close(); err != nil {
				return fail(err)
			}
			r.ClosedPinned = procStatusKB("VmPin")
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return fail(err)
	}
	return 0
}

// runMemlockHelper runs the helper with the limit and returns its report.
func runMemlockHelper(t *testing.T, limit int, dontFork bool) memlockResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=memlock", memlockLimitEnv+"="+strconv.Itoa(limit))
	if dontFork {
		cmd.Env = append(cmd.Env, memlockDontFork+"=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("memlock helper: %v; stderr: %s", err, stderr.String())
	}
	var r memlockResult
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() { // the report is the last line
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("helper: %s", sc.Text())
		}
	}
	return r
}

// TestFaultMemlock registers memory beyond RLIMIT_MEMLOCK in a process
// without CAP_IPC_LOCK (the test binary run again, as nobody, under a
// lower limit; the test itself runs as root and is not limited).
//
// With a limit of 0 the kernel refuses to pin anything: EPERM. With a
// limit below the region: ENOMEM. Either way the error names the
// operation, says RLIMIT_MEMLOCK, the limit, the bytes asked and how to
// raise the limit, nothing is left pinned or open, a DONTFORK mark made for
// the registration is taken back, a second try fails the same way and a
// region within the limit still registers.
func TestFaultMemlock(t *testing.T) {
	testenv.Devices(t, 1)
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name     string
		limit    int
		dontFork bool
		errno    syscall.Errno
	}{
		{"limit 0", 0, false, syscall.EPERM},
		{"limit 64 KiB", 64 << 10, false, syscall.ENOMEM},
		{"limit 64 KiB, DONTFORK", 64 << 10, true, syscall.ENOMEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runMemlockHelper(t, tc.limit, tc.dontFork)
			t.Logf("%s: %+v", os.Getenv("PURERDMA_VM"), r)
			if r.CapEff != "0000000000000000" {
				t.Fatalf("the helper kept capabilities %s", r.CapEff)
			}
			if got := map[syscall.Errno]bool{syscall.ENOMEM: r.ENOMEM, syscall.EPERM: r.EPERM}; !got[tc.errno] || got[syscall.ENOMEM] == got[syscall.EPERM] {
				t.Errorf("RegBuffer of %d bytes under a limit of %d: %q (ENOMEM %v, EPERM %v), want %v",
					memlockSize, tc.limit, r.Err, r.ENOMEM, r.EPERM, tc.errno)
			}
			if !strings.Contains(r.Err, "REG_MR") && !strings.Contains(r.Err, "RegMR") && !strings.Contains(r.Err, "reg MR") {
				t.Errorf("error %q does not name the operation", r.Err)
			}
			// The error says why: the limit in force, the bytes asked
			// and how to raise the limit.
			for _, want := range []string{"RLIMIT_MEMLOCK", fmt.Sprintf("is %d bytes", tc.limit),
				fmt.Sprintf("registering %d bytes", memlockSize), "ulimit -l", "LimitMEMLOCK", "--ulimit memlock"} {
				if !strings.Contains(r.Err, want) {
					t.Errorf("error %q does not say %q", r.Err, want)
				}
			}
			if r.Again != r.Err {
				t.Errorf("second try: %q, first: %q", r.Again, r.Err)
			}
			if r.FDs[0] != r.FDs[1] || r.PinnedKB[0] != r.PinnedKB[1] {
				t.Errorf("after the failures: %d fds (%d before), VmPin %d kB (%d before)", r.FDs[1], r.FDs[0], r.PinnedKB[1], r.PinnedKB[0])
			}
			if r.DontFork[0] || r.DontFork[1] {
				t.Errorf("buffer marked DONTFORK before / after the failures: %v", r.DontFork)
			}
			if tc.limit > 0 {
				if r.SmallErr != "" {
					t.Errorf("registration of %d bytes within the limit: %s", tc.limit/2, r.SmallErr)
				}
				if r.SmallMarked != tc.dontFork {
					t.Errorf("region within the limit marked DONTFORK: %v, want %v", r.SmallMarked, tc.dontFork)
				}
				if r.SmallPinned != r.PinnedKB[0]+tc.limit/2/1024 || r.ClosedPinned != r.PinnedKB[0] {
					t.Errorf("VmPin %d kB with %d bytes registered, %d kB after closing; %d kB before", r.SmallPinned, tc.limit/2, r.ClosedPinned, r.PinnedKB[0])
				}
			}
		})
	}
}
