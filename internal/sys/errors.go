package sys

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Sentinels, re-exported by the public packages.
var (
	// ErrNotSupported matches errors for features the kernel, the device
	// or this library does not have.
	ErrNotSupported = errors.New("not supported")
	// ErrClosed is os.ErrClosed: the object was closed.
	ErrClosed = os.ErrClosed
	// ErrBusy means a resource is busy: a bounded one is full (a send
	// queue, a waiter slot), or an object is in use by others (a Close
	// refused for dependents). Retrying later may succeed. It is
	// returned at once instead of blocking. One rule for both: every
	// error matching ErrBusy matches EBUSY, and every error of this
	// project carrying EBUSY matches ErrBusy.
	ErrBusy error = busyError{}
	// ErrInvalid is EINVAL, for bad input caught before a kernel call,
	// so callers can match it as they would the kernel's.
	ErrInvalid error = syscall.EINVAL
	// ErrNoMemory is ENOMEM, for packages that classify kernel errors
	// without importing syscall.
	ErrNoMemory error = syscall.ENOMEM
	// ErrIO is EIO, for a device whose state user space reads
	// contradicts what it must be (completions lost).
	ErrIO error = syscall.EIO
	// ErrTimedOut is ETIMEDOUT: a resolution or connection whose timer
	// fired (the kernel's, or a library's own timeout).
	ErrTimedOut error = syscall.ETIMEDOUT
	// ErrNoDevice is ENODEV: no RDMA device where one is needed (rdma_cm
	// on a network interface without one).
	ErrNoDevice error = syscall.ENODEV
	// The errnos of a stream connection (rsocket), for its net.Conn
	// errors: reset, refused, written after a shutdown.
	ErrConnReset   error = syscall.ECONNRESET
	ErrConnRefused error = syscall.ECONNREFUSED
	ErrPipe        error = syscall.EPIPE
)

type busyError struct{}

func (busyError) Error() string        { return "resource busy" }
func (busyError) Is(target error) bool { return target == syscall.EBUSY }

// Error is a failed call: the operation and the cause, usually an errno.
//
// The library's errors, this type or not, share one shape: the text
// starts with "<package> <Operation>", Operation being the exported Go
// API the caller called, spelled as in Go ("uverbs CreateQP", "uverbs
// PostSend"; Type.Method only where the bare name would be ambiguous:
// "uverbs QP.Modify", "uverbs CQ.Close"), then ": " and the cause. A
// kernel command that failed is named in the cause, after the operation
// ("uverbs CreateQP: QP_CREATE: invalid argument"); what the operation
// applied to may follow its name ("uverbs QueryPort rxe0/1: ..."). An
// error carries one prefix: a call a package makes inside another of its
// operations is named in the cause without the package ("uverbs
// ConnectRC: QueryPort rxe0/1: ..."), never "uverbs ConnectRC: uverbs
// QueryPort". So Op holds "uverbs CreateQP: QP_CREATE" for a kernel
// call made by CreateQP, "uverbs PostSend" for a refusal before one, or
// the command alone ("EX_MODIFY_QP") when the caller names the
// operation around it. Errors that wrap another package's error name it
// in the cause ("rdmacm: ...: uverbs RegMR: REG_MR: ...").
type Error struct {
	Op  string // e.g. "uverbs CreateCQ: CQ_CREATE"
	Err error  // usually a syscall.Errno
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Is makes errno values that mean "not supported" match ErrNotSupported.
func (e *Error) Is(target error) bool {
	if target == ErrBusy {
		return errors.Is(e.Err, syscall.EBUSY)
	}
	if target != ErrNotSupported {
		return false
	}
	switch e.Err {
	case syscall.EOPNOTSUPP, syscall.EPROTONOSUPPORT, syscall.ENOSYS:
		return true
	}
	return false
}

// NotSupported is an error matching ErrNotSupported that names the
// feature and, when known, the kernel version that added it.
func NotSupported(feature string) error {
	return &notSupported{feature}
}

type notSupported struct{ feature string }

func (e *notSupported) Error() string        { return e.feature + ": not supported" }
func (e *notSupported) Is(target error) bool { return target == ErrNotSupported }

// errnoErr wraps err from a syscall; nil stays nil.
func errnoErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Err: err}
}

// InUse is the error for closing an object others still depend on: it
// matches EBUSY.
func InUse(op string, users int) error {
	return &Error{Op: op, Err: fmt.Errorf("%w: %d objects still use it", syscall.EBUSY, users)}
}

// ErrnoText is the text of errno n ("connection reset by peer"), for
// statuses the kernel reports as numbers.
func ErrnoText(n int) string { return syscall.Errno(n).Error() }
