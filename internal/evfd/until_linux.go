package evfd

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/purerdma/rdma/internal/sys"
)

// ErrInterrupted is what ReadUntil returns after Interrupt.
var ErrInterrupted = errors.New("evfd: wait interrupted")

// ReadUntil is Read with a deadline instead of a context: it waits until
// the fd is readable and reads into p, or until d (zero: no deadline),
// which ends it with os.ErrDeadlineExceeded, or until Interrupt, which
// ends it with ErrInterrupted. It allocates nothing when p does not
// escape (keep p in the caller's long-lived state): the deadline is the
// poller's own, and Interrupt moves it.
func (f *File) ReadUntil(d time.Time, p []byte) (int, error) {
	if !f.waiting.CompareAndSwap(false, true) {
		return 0, &sys.Error{Op: f.op, Err: sys.ErrBusy}
	}
	f.ctx, f.io, f.buf, f.until = context.Background(), sys.RawRead, p, true
	defer f.endUntil()
	for {
		if f.interrupt.Swap(false) {
			return 0, ErrInterrupted
		}
		// The poller's deadline is set only when it is not d already: an
		// unchanged deadline costs nothing.
		if f.dlStale.Swap(false) || !f.dl.Equal(d) {
			if err := f.f.SetReadDeadline(d); err != nil {
				return 0, f.mapErr(err)
			}
			f.dl = d
		}
		// An Interrupt before the deadline was set: its past deadline
		// was overwritten, but its flag is up. One after: its past
		// deadline ends the park below.
		if f.interrupt.Swap(false) {
			return 0, ErrInterrupted
		}
		err := f.rc.Read(f.onReady)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, f.mapErr(err)
		}
		if f.interrupt.Swap(false) {
			return 0, ErrInterrupted
		}
		if !d.IsZero() && !time.Now().Before(d) {
			return 0, os.ErrDeadlineExceeded
		}
		// A past deadline left by an earlier wait: set d again.
	}
	if f.ioErr != nil {
		return 0, &sys.Error{Op: f.op, Err: f.ioErr}
	}
	return f.n, nil
}

// Interrupt ends the ReadUntil in progress, or else the next one, with
// ErrInterrupted. It may be called from any goroutine, any number of
// times: the interruptions of one wait count as one.
func (f *File) Interrupt() {
	f.interrupt.Store(true)
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.closed.Load() {
		// A Read with a context that finds this past deadline sets its
		// own again.
		f.f.SetReadDeadline(time.Unix(1, 0))
		f.dlStale.Store(true)
	}
}

// endUntil frees the waiter slot. The deadline stays: the next
// ReadUntil most often wants the same one, and a Read with a context
// that meets it sets its own again.
func (f *File) endUntil() {
	f.ctx, f.io, f.buf, f.n, f.ioErr, f.armErr, f.until = nil, nil, nil, 0, nil, nil, false
	f.waiting.Store(false)
}
