package sys

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMemlock checks which registration errors Memlock explains and
// what the explanation says, with the process's state replaced; the
// kernel's refusal itself is TestFaultMemlock's (uverbs, in the VM).
func TestMemlock(t *testing.T) {
	old := memlockState
	defer func() { memlockState = old }()
	const inf = unix.RLIM_INFINITY
	for _, tc := range []struct {
		name          string
		errno         syscall.Errno
		cur, max      uint64
		pinned        int64
		exempt        bool
		bytes         uint64
		explained     bool
		reached       bool // LimitReached
		want, notWant []string
	}{
		{name: "ENOMEM past the limit", errno: syscall.ENOMEM, cur: 64 << 10, max: 64 << 10, pinned: 8 << 10, bytes: 1 << 20, explained: true, reached: true,
			want: []string{"uverbs RegMR: REG_MR: cannot allocate memory: registering 1048576 bytes (1 MiB) pins them",
				"RLIMIT_MEMLOCK, the locked-memory limit, is 65536 bytes (64 KiB), hard limit 65536 bytes (64 KiB), with 8192 bytes (8 KiB) pinned by this process already",
				`"ulimit -l unlimited"`, "LimitMEMLOCK=infinity", `"--ulimit memlock=-1:-1"`, "CAP_IPC_LOCK", "without root, only up to the hard limit"},
			notWant: []string{"not the cause"}},
		{name: "ENOMEM, hard limit unlimited", errno: syscall.ENOMEM, cur: 8 << 20, max: inf, pinned: -1, bytes: 9 << 20, explained: true, reached: true,
			want:    []string{"is 8388608 bytes (8 MiB), hard limit unlimited", `"ulimit -l unlimited"`},
			notWant: []string{"pinned by this process", "without root", "not the cause"}},
		{name: "EPERM at 0", errno: syscall.EPERM, cur: 0, max: 0, pinned: 0, bytes: 4096, explained: true, reached: true,
			want: []string{"uverbs RegMR: REG_MR: operation not permitted: registering 4096 bytes (4 KiB) pins them",
				"RLIMIT_MEMLOCK, the locked-memory limit, is 0 bytes, hard limit 0 bytes: the kernel pins nothing", `"ulimit -l unlimited"`}},
		{name: "ENOMEM within the limit", errno: syscall.ENOMEM, cur: 64 << 20, max: inf, pinned: 0, bytes: 4096, explained: true,
			want:    []string{"is 67108864 bytes (64 MiB), hard limit unlimited, with 0 bytes pinned by this process already: within the limit, so the limit is not the cause"},
			notWant: []string{"ulimit"}},
		{name: "ENOMEM unlimited", errno: syscall.ENOMEM, cur: inf, max: inf, pinned: 0, bytes: 1000, explained: true,
			want:    []string{"registering 1000 bytes pins them, and RLIMIT_MEMLOCK, the locked-memory limit, is unlimited: the limit is not the cause"},
			notWant: []string{"ulimit", "hard limit"}},
		{name: "ENOMEM with CAP_IPC_LOCK", errno: syscall.ENOMEM, cur: 0, max: 0, exempt: true, bytes: 1 << 20, explained: true,
			want:    []string{"the process has CAP_IPC_LOCK, which lifts the limit: the limit is not the cause"},
			notWant: []string{"ulimit"}},
		{name: "EPERM above 0", errno: syscall.EPERM, cur: 64 << 10, max: 64 << 10, bytes: 1 << 20},
		{name: "EPERM with CAP_IPC_LOCK", errno: syscall.EPERM, cur: 0, max: 0, exempt: true, bytes: 1 << 20},
		{name: "EINVAL", errno: syscall.EINVAL, cur: 0, max: 0, bytes: 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			memlockState = func() (unix.Rlimit, int64, bool, error) {
				return unix.Rlimit{Cur: tc.cur, Max: tc.max}, tc.pinned, tc.exempt, nil
			}
			kerr := &Error{Op: "uverbs RegMR: REG_MR", Err: tc.errno}
			err := Memlock(kerr, tc.bytes)
			if !errors.Is(err, tc.errno) || !errors.As(err, new(*Error)) {
				t.Errorf("%v does not match %v and *Error", err, tc.errno)
			}
			var me *MemlockError
			if errors.As(err, &me) != tc.explained {
				t.Fatalf("Memlock(%v) = %q: explained %v, want %v", kerr, err, !tc.explained, tc.explained)
			}
			if !tc.explained {
				if err != kerr {
					t.Errorf("Memlock(%v) = %v, want it unchanged", kerr, err)
				}
				return
			}
			if me.LimitReached() != tc.reached {
				t.Errorf("LimitReached() = %v, want %v", !tc.reached, tc.reached)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("%q says %q", msg, w)
				}
			}
			if again := Memlock(err, tc.bytes); again != err {
				t.Errorf("explained twice: %q", again)
			}
		})
	}
	if Memlock(nil, 1) != nil {
		t.Error("Memlock(nil) is not nil")
	}
	memlockState = old
	lim, pinned, _, err := memlockState()
	if err != nil || pinned < 0 || lim.Cur > lim.Max {
		t.Errorf("this process: limit %+v, pinned %d, %v", lim, pinned, err)
	}
}
