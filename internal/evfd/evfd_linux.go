// Package evfd waits on kernel event file descriptors (the uverbs
// completion channel and async event fds, rdma_cm's fd) through the Go
// runtime poller: a waiting goroutine is parked, no thread is held in a
// syscall, and a wait returns on data, on its context, or on Close.
package evfd

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// File is a pollable kernel fd. One goroutine waits at a time: a second,
// concurrent wait fails at once with sys.ErrBusy instead of queueing
// behind the first (whose context the second could not cancel).
type File struct {
	f       *os.File
	rc      syscall.RawConn
	waiting atomic.Bool
	expired atomic.Bool // a cancelled wait set a past read deadline
	closed  atomic.Bool
	op      string
}

// New takes ownership of fd, makes it non-blocking and registers it with
// the poller. op names the fd in errors.
func New(fd int, op string) (*File, error) {
	if err := sys.RawSetNonblock(fd); err != nil {
		unix.Close(fd)
		return nil, &sys.Error{Op: op, Err: err}
	}
	f := os.NewFile(uintptr(fd), op)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, &sys.Error{Op: op, Err: err}
	}
	return &File{f: f, rc: rc, op: op}, nil
}

// Close closes the fd and wakes a waiting Read, which returns
// sys.ErrClosed.
func (f *File) Close() error {
	f.closed.Store(true)
	return f.f.Close()
}

// Fd returns the descriptor number, for a caller's own epoll. The number
// is valid until Close.
func (f *File) Fd() int {
	fd := -1
	f.rc.Control(func(raw uintptr) { fd = int(raw) })
	return fd
}

// Control runs fn with the raw fd while it cannot be closed: for the
// write()-shaped "read" of rdma_cm or ioctls on an event fd.
func (f *File) Control(fn func(fd int) error) error {
	var err error
	cerr := f.rc.Control(func(raw uintptr) { err = fn(int(raw)) })
	if cerr != nil {
		return f.mapErr(cerr)
	}
	return err
}

// Read waits until the fd is readable and reads into p. It returns
// ctx.Err() when ctx ends first and sys.ErrClosed after Close.
func (f *File) Read(ctx context.Context, p []byte) (int, error) {
	var n int
	err := f.Wait(ctx, func(fd int) error {
		var err error
		n, err = sys.RawRead(fd, p)
		return err
	})
	return n, err
}

// Wait waits until try, called with the raw fd whenever the fd may be
// ready, returns anything but EAGAIN; that is Wait's result.
func (f *File) Wait(ctx context.Context, try func(fd int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !f.waiting.CompareAndSwap(false, true) {
		return &sys.Error{Op: f.op, Err: sys.ErrBusy}
	}
	defer f.waiting.Store(false)
	// The deadline and the context callback are armed only when the first
	// try finds nothing: the fd is often ready already (events queue up
	// under load), and RawConn.Read tries before it waits anyway.
	var tryErr, armErr error
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		err := f.rc.Read(func(raw uintptr) bool {
			tryErr = try(int(raw))
			if tryErr != unix.EAGAIN {
				return true
			}
			if stop == nil {
				// A past deadline left by an earlier cancelled wait must
				// not end this one.
				if f.expired.Swap(false) {
					if armErr = f.f.SetReadDeadline(time.Time{}); armErr != nil {
						return true
					}
				}
				stop = context.AfterFunc(ctx, func() {
					f.f.SetReadDeadline(time.Unix(1, 0))
					f.expired.Store(true)
				})
			}
			return false
		})
		if armErr != nil {
			return f.mapErr(armErr)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return f.mapErr(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The callback of an earlier wait's context set it just now.
		f.expired.Store(false)
		if err := f.f.SetReadDeadline(time.Time{}); err != nil {
			return f.mapErr(err)
		}
	}
	if tryErr != nil {
		return &sys.Error{Op: f.op, Err: tryErr}
	}
	return nil
}

// mapErr turns the poller's "use of closed file" (which RawConn does not
// translate to os.ErrClosed) into sys.ErrClosed.
func (f *File) mapErr(err error) error {
	if f.closed.Load() || errors.Is(err, os.ErrClosed) {
		return &sys.Error{Op: f.op, Err: sys.ErrClosed}
	}
	return &sys.Error{Op: f.op, Err: err}
}
