package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls in this file use RawSyscall, not Syscall: they do not tell
// the Go scheduler that the thread enters the kernel.
//
// Why: entering a system call the ordinary way wakes the runtime's
// sysmon thread whenever it sleeps because every P was idle, and a woken
// sysmon polls every 20 µs for at least a millisecond before it sleeps
// again. An rdma_cm server wakes up for every event and makes a dozen
// control calls per connection; with Syscall that restarted sysmon's
// polling for each event, which cost more CPU than the calls themselves
// (measured in docs/performance.md). A doorbell written with Syscall
// also let sysmon hand the poller's P to another thread mid-post.
//
// When it is safe: only for calls that return without waiting for
// anything outside the kernel, such as a peer, the network or a timer.
// uverbs and rdma_cm commands create, modify and destroy objects and
// queue work; the waits some of them do (a destroy waiting for the
// object's running tasks) are short and bounded. Reads here are only on
// non-blocking fds. A call that can block indefinitely (a blocking read,
// netlink, open) must keep using Syscall, so the runtime can run other
// goroutines on the P meanwhile.

// RawWrite is write(2) for a command fd.
func RawWrite(fd int, b []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, b) }

// RawRead is read(2) for a non-blocking fd.
func RawRead(fd int, b []byte) (int, error) { return rawIO(unix.SYS_READ, fd, b) }

// rawIO makes the call with RawSyscallNoError, the one entry point of
// x/sys that is itself the system call instruction: RawSyscall passes
// through four more frames (an ABI wrapper among them), and for a
// doorbell those were 40 % of the instructions of a post (callgrind, in
// docs/performance.md). The kernel returns -errno in r1.
func rawIO(trap uintptr, fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	r, _ := unix.RawSyscallNoError(trap, uintptr(fd), uintptr(p), uintptr(len(b)))
	if r > ^uintptr(0)-maxErrno {
		return 0, unix.Errno(-r)
	}
	return int(r), nil
}

// maxErrno is the largest errno Linux returns as -errno (MAX_ERRNO).
const maxErrno = 4095

// RawClose is close(2) for a device fd (no file system flush to wait for).
func RawClose(fd int) error {
	_, _, e := unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// RawSetNonblock sets O_NONBLOCK on fd.
func RawSetNonblock(fd int) error {
	flags, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(fd), unix.F_GETFL, 0)
	if e != 0 {
		return e
	}
	if flags&unix.O_NONBLOCK != 0 {
		return nil
	}
	if _, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETFL, flags|unix.O_NONBLOCK); e != 0 {
		return e
	}
	return nil
}

func rawMmap(fd int, offset int64, length, prot, flags int) ([]byte, error) {
	if length <= 0 {
		return nil, unix.EINVAL
	}
	addr, _, e := unix.RawSyscall6(unix.SYS_MMAP, 0, uintptr(length), uintptr(prot), uintptr(flags), uintptr(fd), uintptr(offset))
	if e != 0 {
		return nil, e
	}
	// The mapping is outside the Go heap; reinterpret the address without
	// a uintptr-to-pointer conversion the checker cannot follow.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), length), nil
}

func rawMunmap(b []byte) error {
	if len(b) == 0 {
		return unix.EINVAL
	}
	_, _, e := unix.RawSyscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}
