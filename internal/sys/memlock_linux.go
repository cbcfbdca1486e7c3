package sys

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A memory registration pins its pages, and the kernel counts them
// against the process's locked-memory limit (RLIMIT_MEMLOCK) unless the
// process has CAP_IPC_LOCK: ib_umem_get refuses a registration that
// would take the pinned total past the limit with ENOMEM, and with a
// limit of 0 refuses every registration with EPERM (can_do_mlock). The
// errno alone reads "cannot allocate memory" or "operation not
// permitted", so MemlockError adds what the limit was and how to raise
// it.

// MemlockError is a registration the kernel refused (ENOMEM, or EPERM
// at a limit of 0) with what the process's locked-memory limit was at
// that moment. It matches the errno and the *Error underneath.
type MemlockError struct {
	Err   error  // the failed call: a *Error naming the operation, with the errno
	Bytes uint64 // what the registration asked to pin
	Limit uint64 // soft RLIMIT_MEMLOCK in bytes when it failed; unix.RLIM_INFINITY for unlimited
	Max   uint64 // the hard limit
	// Pinned is the process's pinned memory (VmPin) in bytes when it
	// failed, -1 when /proc could not tell.
	Pinned int64
	// Exempt means the process has CAP_IPC_LOCK in the initial user
	// namespace, which lifts the limit.
	Exempt bool
}

func (e *MemlockError) Unwrap() error { return e.Err }

// LimitReached reports whether the limit explains the refusal: the
// process has no CAP_IPC_LOCK and the limit is 0, or finite and the
// registration with what is pinned already (when /proc tells) passes it.
func (e *MemlockError) LimitReached() bool {
	switch {
	case e.Exempt || e.Limit == unix.RLIM_INFINITY:
		return false
	case e.Limit == 0 || e.Pinned < 0:
		return true
	}
	return uint64(e.Pinned)+e.Bytes+uint64(os.Getpagesize()) > e.Limit
}

func (e *MemlockError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, ": registering %s pins them, and RLIMIT_MEMLOCK, the locked-memory limit, is %s", memBytes(e.Bytes), memBytes(e.Limit))
	if e.Limit != unix.RLIM_INFINITY {
		fmt.Fprintf(&b, ", hard limit %s", memBytes(e.Max))
	}
	switch {
	case e.Exempt:
		b.WriteString(", but the process has CAP_IPC_LOCK, which lifts the limit: the limit is not the cause")
	case e.Limit == unix.RLIM_INFINITY:
		b.WriteString(": the limit is not the cause")
	case e.Limit == 0:
		b.WriteString(": the kernel pins nothing")
	case e.Pinned >= 0:
		fmt.Fprintf(&b, ", with %s pinned by this process already", memBytes(uint64(e.Pinned)))
		if !e.LimitReached() {
			b.WriteString(": within the limit, so the limit is not the cause")
		}
	}
	if !e.LimitReached() {
		return b.String()
	}
	b.WriteString(`; raise the limit: "ulimit -l unlimited" (or a size in KiB) in the shell that starts the program, ` +
		`LimitMEMLOCK=infinity in its systemd unit, "--ulimit memlock=-1:-1" for a container (docker, podman), ` +
		"or give the process CAP_IPC_LOCK")
	if e.Max != unix.RLIM_INFINITY {
		b.WriteString("; without root, only up to the hard limit (/etc/security/limits.conf sets it for logins)")
	}
	return b.String()
}

// memBytes formats a size in bytes, with KiB, MiB or GiB when it is a
// whole number of them: "65536 bytes (64 KiB)"; "unlimited".
func memBytes(n uint64) string {
	if n == unix.RLIM_INFINITY {
		return "unlimited"
	}
	s := strconv.FormatUint(n, 10) + " bytes"
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return s + " (" + strconv.FormatUint(n>>u.shift, 10) + " " + u.name + ")"
		}
	}
	return s
}

// memlockState reads the process's locked-memory limit, its pinned
// memory and whether CAP_IPC_LOCK exempts it; tests replace it.
var memlockState = func() (lim unix.Rlimit, pinned int64, exempt bool, err error) {
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, nil, &lim); err != nil {
		return lim, -1, false, err
	}
	pinned = -1
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "VmPin":
			if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64); err == nil {
				pinned = kb << 10
			}
		case "CapEff":
			if caps, err := strconv.ParseUint(v, 16, 64); err == nil {
				exempt = caps&(1<<unix.CAP_IPC_LOCK) != 0 && initialUserNS()
			}
		}
	}
	return lim, pinned, exempt, nil
}

// initialUserNS reports whether the process is in the initial user
// namespace, where the kernel checks CAP_IPC_LOCK for pinning.
func initialUserNS() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// Memlock explains err, the error of a kernel call that pins bytes of
// memory (a memory registration), when it may be the locked-memory
// limit: ENOMEM, or EPERM with a limit of 0. It returns a *MemlockError
// with the limit read now, or err unchanged (nil stays nil).
func Memlock(err error, bytes uint64) error {
	if err == nil {
		return nil
	}
	enomem, eperm := errors.Is(err, syscall.ENOMEM), errors.Is(err, syscall.EPERM)
	if !enomem && !eperm {
		return err
	}
	var me *MemlockError
	if errors.As(err, &me) {
		return err
	}
	lim, pinned, exempt, lerr := memlockState()
	if lerr != nil || eperm && (lim.Cur != 0 || exempt) {
		// EPERM at a limit above 0 is not the limit's.
		return err
	}
	return &MemlockError{Err: err, Bytes: bytes, Limit: lim.Cur, Max: lim.Max, Pinned: pinned, Exempt: exempt}
}

// NobodyUID is the user (and group) BecomeNobody switches to.
const NobodyUID = 65534

// BecomeNobody lowers RLIMIT_MEMLOCK to memlock bytes (soft and hard)
// and gives up root: no supplementary groups, group and user NobodyUID.
// The kernel enforces the limit only on a process without CAP_IPC_LOCK,
// which root has; tests that must see its refusal run this in a process
// of their own (it cannot be undone).
func BecomeNobody(memlock uint64) error {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: memlock, Max: memlock}); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_MEMLOCK %d: %w", memlock, err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(NobodyUID); err != nil {
		return fmt.Errorf("setgid %d: %w", NobodyUID, err)
	}
	if err := syscall.Setuid(NobodyUID); err != nil {
		return fmt.Errorf("setuid %d: %w", NobodyUID, err)
	}
	return nil
}
