package sys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// This file holds the memory calls behind registered memory: anonymous
// mappings for buffers that never move, and madvise for fork protection.

// MmapAnon maps length bytes of private anonymous memory, read-write and
// page aligned. The memory is outside the Go heap: the garbage collector
// neither moves nor frees it. Release it with Munmap.
func MmapAnon(length int) ([]byte, error) {
	b, err := rawMmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	return b, errnoErr("mmap anonymous", err)
}

// MmapFile maps the first length bytes of the open file fd, shared
// read-write: stores reach the file, and on a DAX file system the
// mapping is the persistent memory itself. Release it with Munmap.
func MmapFile(fd, length int) ([]byte, error) {
	b, err := rawMmap(fd, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	return b, errnoErr("mmap file", err)
}

// DontFork marks the pages of [addr, addr+length) so that a child process
// does not inherit them (madvise MADV_DONTFORK). addr and length must be
// page aligned, and the memory must stay mapped across the call.
func DontFork(addr, length uint64) error {
	return madvise("madvise MADV_DONTFORK", addr, length, unix.MADV_DONTFORK)
}

// DoFork undoes DontFork (madvise MADV_DOFORK).
func DoFork(addr, length uint64) error {
	return madvise("madvise MADV_DOFORK", addr, length, unix.MADV_DOFORK)
}

func madvise(op string, addr, length uint64, advice int) error {
	_, _, e := unix.RawSyscall(unix.SYS_MADVISE, uintptr(addr), uintptr(length), uintptr(advice))
	if e != 0 {
		return &Error{Op: fmt.Sprintf("%s %#x+%#x", op, addr, length), Err: e}
	}
	return nil
}
