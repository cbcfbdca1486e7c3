package ucma

import (
	"errors"
	"syscall"
)

// Errno is the errno n as an error (a syscall.Errno), nil for 0: the
// status of an rdma_cm event, given as a positive number.
func Errno(n int) error {
	if n == 0 {
		return nil
	}
	return syscall.Errno(n)
}

// ErrnoOf returns the errno err wraps, and EIO for an error that wraps
// none: the status to report for a failure the library met while
// processing an event.
func ErrnoOf(err error) int {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return int(errno)
	}
	return int(syscall.EIO)
}

// ErrConnRefused is ECONNREFUSED, which a refused connection matches.
var ErrConnRefused error = syscall.ECONNREFUSED
