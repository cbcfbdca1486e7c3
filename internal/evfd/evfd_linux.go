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
	// interrupt is Interrupt's flag, taken by the ReadUntil it ends.
	interrupt atomic.Bool
	until     bool // the wait in progress is a ReadUntil: its deadline is its own
	// dl is the read deadline the waiter set last, and dlStale says
	// another goroutine has moved it since (Interrupt, a context's
	// expiry): ReadUntil sets a deadline only when it differs.
	dl      time.Time
	dlStale atomic.Bool
	closed  atomic.Bool
	op      string

	// mu's read lock keeps the fd open for Write, Control and Fd: Close
	// takes the write lock before it closes. (A RawConn callback would do
	// the same at the cost of an allocation per call.)
	mu  sync.RWMutex
	raw int

	// The state of the one wait in progress (waiting is set), kept here
	// so that the poller's callback, bound once, allocates nothing.
	onReady       func(uintptr) bool // f.ready
	expire        func()             // f.setExpired
	ctx           context.Context
	io            func(fd int, b []byte) (int, error) // sys.RawRead or sys.RawWrite
	buf           []byte
	n             int
	ioErr         error
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

// Close closes the fd and wakes a waiting Read or WaitWrite, which
// returns sys.ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	f.closed.Store(true)
	f.mu.Unlock()
	return f.f.Close()
}

// Control runs fn with the raw fd while it cannot be closed, or returns
// an error matching sys.ErrClosed after Close.
func (f *File) Control(fn func(fd int) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return &sys.Error{Op: f.op, Err: sys.ErrClosed}
	}
	return fn(f.raw)
}

// Write writes b to the fd once, without waiting: the write()-shaped
// commands of rdma_cm.
func (f *File) Write(b []byte) (n int, err error) {
	err = f.Control(func(fd int) error {
		n, err = sys.RawWrite(fd, b)
		return err
	})
	return n, err
}

// RawConn is syscall.RawConn, named here so that packages that may not
// import syscall can hand one out.
type RawConn = syscall.RawConn

// SyscallConn is the fd's raw connection, registered with the runtime
// poller: Control runs a function with the fd while it is open, and
// Read and Write wait for readiness in the poller.
func (f *File) SyscallConn() RawConn { return f.rc }

// Fd returns the descriptor number, for a caller's own epoll, or -1
// after Close. The number is valid until Close.
func (f *File) Fd() int {
	fd := -1
	f.Control(func(raw int) error { fd = raw; return nil })
	return fd
}

// Read waits until the fd is readable and reads into p. It returns
// ctx.Err() when ctx ends first and sys.ErrClosed after Close. When the
// fd is readable at once, Read allocates nothing.
func (f *File) Read(ctx context.Context, p []byte) (int, error) {
	return f.wait(ctx, sys.RawRead, p)
}

// WaitWrite waits until the fd takes a write of b: rdma_cm's GET_EVENT,
// a write() that fails with EAGAIN until an event is queued. Otherwise
// as Read.
func (f *File) WaitWrite(ctx context.Context, b []byte) (int, error) {
	return f.wait(ctx, sys.RawWrite, b)
}

// wait calls io on the fd and b whenever the fd may be ready, until it
// returns anything but EAGAIN; that is wait's result.
func (f *File) wait(ctx context.Context, io func(int, []byte) (int, error), b []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !f.waiting.CompareAndSwap(false, true) {
		return 0, &sys.Error{Op: f.op, Err: sys.ErrBusy}
	}
	f.ctx, f.io, f.buf = ctx, io, b
	defer f.endWait()
	for {
		err := f.rc.Read(f.onReady)
		if f.armErr != nil {
			return 0, f.mapErr(f.armErr)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, f.mapErr(err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		// The callback of an earlier wait's context set it just now.
		f.expired.Store(false)
		if err := f.f.SetReadDeadline(time.Time{}); err != nil {
			return 0, f.mapErr(err)
		}
		f.dl = time.Time{}
	}
	if f.ioErr != nil {
		return 0, &sys.Error{Op: f.op, Err: f.ioErr}
	}
	return f.n, nil
}

// ready is the poller's callback: it tries, and before the first park
// arms the context's cancellation. The deadline and the context callback
// are armed only when the first try finds nothing: the fd is often ready
// already (events queue up under load).
func (f *File) ready(raw uintptr) bool {
	f.n, f.ioErr = f.io(int(raw), f.buf)
	if f.ioErr != unix.EAGAIN {
		return true
	}
	if f.stopAfterFunc == nil && !f.until {
		// A past deadline left by an earlier cancelled wait must not end
		// this one.
		if f.expired.Swap(false) {
			if f.armErr = f.f.SetReadDeadline(time.Time{}); f.armErr != nil {
				return true
			}
			f.dl = time.Time{}
		}
		if f.ctx.Done() != nil { // a context that cannot end needs no callback
			f.stopAfterFunc = context.AfterFunc(f.ctx, f.expire)
		}
	}
	return false
}

// setExpired ends a parked wait whose context ended.
func (f *File) setExpired() {
	f.f.SetReadDeadline(time.Unix(1, 0))
	f.dlStale.Store(true)
	f.expired.Store(true)
}

// endWait disarms the context and frees the waiter slot.
func (f *File) endWait() {
	if f.stopAfterFunc != nil {
		f.stopAfterFunc()
	}
	f.ctx, f.io, f.buf, f.n, f.ioErr, f.armErr, f.stopAfterFunc = nil, nil, nil, 0, nil, nil, nil
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
