package sys

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Doorbell is one write(2) of a fixed buffer to a command fd, made
// without the FD's lock: a send queue's doorbell (rxe's empty POST_SEND).
// FD.Write takes the FD's read lock so that the fd cannot be closed, and
// its number reused, during the call; a Doorbell leaves that to its
// owner, which must guarantee that the FD is not closed while Ring may
// run. uverbs' QPs do: the context closes its fd only after closing
// every QP, and a QP's Close waits for a post in progress (or, for a QP
// in a thread domain, must not run beside one, as its queue is unmapped).
type Doorbell struct {
	fd int
	p  unsafe.Pointer // keeps the buffer alive
	n  uintptr
}

// Doorbell makes a Doorbell that writes b (kept, not copied) to f, or
// fails with ErrClosed once f is closed.
func (f *FD) Doorbell(b []byte) (Doorbell, error) {
	if len(b) == 0 {
		return Doorbell{}, &Error{Op: "doorbell", Err: fmt.Errorf("empty buffer")}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.raw < 0 {
		return Doorbell{}, ErrClosed
	}
	return Doorbell{fd: f.raw, p: unsafe.Pointer(&b[0]), n: uintptr(len(b))}, nil
}

// Ring writes the buffer: the system call instruction itself
// (RawSyscallNoError), inlined into the caller (see docs/performance.md,
// "Instructions per call"). ok reports whether the kernel took the whole
// buffer; if not, Err(op, r) is the error.
func (d *Doorbell) Ring() (r uintptr, ok bool) {
	r, _ = unix.RawSyscallNoError(unix.SYS_WRITE, uintptr(d.fd), uintptr(d.p), d.n)
	return r, r == d.n
}

// Err is the error of a Ring that returned r: -errno from the kernel, or
// a short write.
func (d *Doorbell) Err(op string, r uintptr) error {
	if r > ^uintptr(0)-maxErrno {
		return errnoErr(op, unix.Errno(-r))
	}
	return &Error{Op: op, Err: fmt.Errorf("short write: %d of %d bytes", r, d.n)}
}
