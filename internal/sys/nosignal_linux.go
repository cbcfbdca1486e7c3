package sys

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawWriteNoSignals is RawWrite with every signal blocked on the calling
// thread for the duration of the call. It is for commands whose kernel
// side blocks without restarting cleanly: rdma_cm's CONNECT on siw
// connects a kernel TCP socket, blocking, inside the write; a signal
// (the Go runtime's preemption signal, SIGURG, comes every 10 ms to a
// busy thread) aborts that connect with ERESTARTSYS after the kernel had
// bound the local port, and the restarted write then fails with
// EADDRNOTAVAIL. Signals arriving meanwhile stay pending, or go to
// another thread of the process.
func RawWriteNoSignals(fd int, b []byte) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all := ^uint64(0)
	var old uint64
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
		return 0, e
	}
	n, err := RawWrite(fd, b)
	unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	return n, err
}
