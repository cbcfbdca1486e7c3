package rpma

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rdmacm"
)

// libTimer is a timeout of this package's own over the caller's ctx
// (ConnCfg's timeout for NewConnReq, DefaultTimeout for DeviceContext),
// so that its firing is reported as the library's timeout: an error
// matching ETIMEDOUT, not context.DeadlineExceeded, which stays the
// sign of the caller's own deadline.
type libTimer struct {
	d    time.Duration
	name string // "ConnCfg's timeout"
	hint string // how to change it, or ""
	own  bool   // it ends before ctx's deadline (or ctx has none)
	ctx  bool   // ctx has a deadline
}

// newLibTimer returns the timer and the context to run the steps with:
// ctx bounded by d.
func newLibTimer(ctx context.Context, d time.Duration, name, hint string) (*libTimer, context.Context, context.CancelFunc) {
	t := &libTimer{d: d, name: name, hint: hint, own: true}
	if dl, ok := ctx.Deadline(); ok {
		t.ctx, t.own = true, time.Now().Add(d).Before(dl)
	}
	rctx, cancel := context.WithTimeout(ctx, d)
	return t, rctx, cancel
}

// explain classes err, the failure of the step what ("address
// resolution of 198.18.0.99:7204"), as provider does, except that a
// failure for time when this timer ended first becomes a *timeoutError
// (class ErrProvider, as librpma reports a resolution that timed out).
func (t *libTimer) explain(op, what string, err error) error {
	if !t.own || !errors.Is(err, context.DeadlineExceeded) {
		return provider(op, err)
	}
	te := &timeoutError{what: what, t: *t}
	errors.As(err, &te.event)
	return newErr(op, ErrProvider, te)
}

// timeoutError is a step that this package's own timeout ended. It
// matches ETIMEDOUT and, when the kernel's timer fired, the
// *rdmacm.EventError of the resolution.
type timeoutError struct {
	what  string
	t     libTimer
	event *rdmacm.EventError
}

func (e *timeoutError) Error() string {
	s := fmt.Sprintf("%s timed out: %s of %v fired", e.what, e.t.name, e.t.d)
	switch {
	case e.t.ctx && e.t.hint != "":
		s += " before ctx's deadline (" + e.t.hint + ")"
	case e.t.ctx:
		s += " before ctx's deadline"
	case e.t.hint != "":
		s += " (" + e.t.hint + "; ctx has no deadline)"
	default:
		s += " (ctx has no deadline)"
	}
	return s
}

func (e *timeoutError) Unwrap() []error {
	if e.event != nil {
		return []error{sys.ErrTimedOut, e.event}
	}
	return []error{sys.ErrTimedOut}
}
