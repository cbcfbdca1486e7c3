// Package evfd waits on kernel event file descriptors (the uverbs
// completion channel and async event fds, rdma_cm's fd) through the Go
// runtime poller: a waiting goroutine is parked, no thread is held in a
// syscall, and a wait returns on data, on its context, or on Close.
package evfd

import (
	"context"
	"errors"
	"os"
	"sync"
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

	// raw is the fd for Write, which holds mu's read lock so that Close
	// cannot release the number under it; a RawConn callback would cost
	// an allocation per call.
	mu  sync.RWMutex
	raw int

	// The state of the one wait in progress (waiting is set), kept here
	// so that the poller's callback, bound once, allocates nothing.
	onReady       func(uintptr) bool // f.ready
	expire        func()             // f.setExpired
	ctx           context.Context
	try           func(fd int) error
	tryErr        error
	armErr        error
	stopAfterFunc func() bool
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
	ef := &File{f: f, rc: rc, op: op, raw: fd}
	ef.onReady = ef.ready
	ef.expire = ef.setExpired
	return ef, nil
}

// Close closes the fd and wakes a waiting Read, which returns
// sys.ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	f.closed.Store(true)
	f.mu.Unlock()
	return f.f.Close()
}

// Write writes b to the fd once, without waiting: the write()-shaped
// commands of rdma_cm. It returns an error matching sys.ErrClosed after
// Close.
func (f *File) Write(b []byte) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return 0, &sys.Error{Op: f.op, Err: sys.ErrClosed}
	}
	return sys.RawWrite(f.raw, b)
}

// Fd returns the descriptor number, for a caller's own epoll. The number
// is valid until Close.
func (f *File) Fd() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return -1
	}
	return f.raw
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
// ready, returns anything but EAGAIN; that is Wait's result. When the fd
// is ready at once, Wait allocates nothing.
func (f *File) Wait(ctx context.Context, try func(fd int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !f.waiting.CompareAndSwap(false, true) {
		return &sys.Error{Op: f.op, Err: sys.ErrBusy}
	}
	f.ctx, f.try = ctx, try
	defer f.endWait()
	for {
		err := f.rc.Read(f.onReady)
		if f.armErr != nil {
			return f.mapErr(f.armErr)
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
	if f.tryErr != nil {
		return &sys.Error{Op: f.op, Err: f.tryErr}
	}
	return nil
}

// ready is the poller's callback: it tries, and before the first park
// arms the context's cancellation. The deadline and the context callback
// are armed only when the first try finds nothing: the fd is often ready
// already (events queue up under load).
func (f *File) ready(raw uintptr) bool {
	f.tryErr = f.try(int(raw))
	if f.tryErr != unix.EAGAIN {
		return true
	}
	if f.stopAfterFunc == nil {
		// A past deadline left by an earlier cancelled wait must not end
		// this one.
		if f.expired.Swap(false) {
			if f.armErr = f.f.SetReadDeadline(time.Time{}); f.armErr != nil {
				return true
			}
		}
		f.stopAfterFunc = context.AfterFunc(f.ctx, f.expire)
	}
	return false
}

// setExpired ends a parked wait whose context ended.
func (f *File) setExpired() {
	f.f.SetReadDeadline(time.Unix(1, 0))
	f.expired.Store(true)
}

// endWait disarms the context and frees the waiter slot.
func (f *File) endWait() {
	if f.stopAfterFunc != nil {
		f.stopAfterFunc()
	}
	f.ctx, f.try, f.tryErr, f.armErr, f.stopAfterFunc = nil, nil, nil, nil, nil
	f.waiting.Store(false)
}

// mapErr turns the poller's "use of closed file" (which RawConn does not
// translate to os.ErrClosed) into sys.ErrClosed.
func (f *File) mapErr(err error) error {
	if f.closed.Load() || errors.Is(err, os.ErrClosed) {
		return &sys.Error{Op: f.op, Err: sys.ErrClosed}
	}
	return &sys.Error{Op: f.op, Err: err}
}
