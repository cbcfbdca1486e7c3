package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/sys"
)

// Errors from this package match these with errors.Is, as well as the
// errno the kernel returned (errors.Is(err, syscall.EINVAL)).
var (
	// ErrNotSupported: the kernel, the device or its provider lacks the
	// feature; the message names it.
	ErrNotSupported = sys.ErrNotSupported
	// ErrClosed (= os.ErrClosed): the object, or its context, is closed.
	ErrClosed = sys.ErrClosed
	// ErrBusy: a bounded resource is full (a send or receive queue, a
	// completion channel that already has a waiter), or an object is in
	// use (Close refused while others depend on it). It is returned at
	// once; retry later. Every error matching ErrBusy matches EBUSY and
	// the other way round.
	ErrBusy = sys.ErrBusy
)

var errClosedContext = &sys.Error{Op: "uverbs: context", Err: ErrClosed}

// errInvalid is EINVAL for bad input caught before a kernel call.
var errInvalid = sys.ErrInvalid

// errNil is the error for a nil receiver, argument or context: op names
// the call ("QP.PostSend"), what the nil thing ("QP", "work request").
// It matches EINVAL.
func errNil(op, what string) error {
	return fmt.Errorf("uverbs: %s: nil %s: %w", op, what, errInvalid)
}

// PostError reports a post list that failed part way: the work requests
// before Index were posted, the one at Index and after were not. A post
// that fails at its first work request returns the cause itself, not a
// PostError: nothing was posted.
type PostError struct {
	Index int    // position of the failing request in the list
	WRID  uint64 // its WRID
	Err   error
}

func (e *PostError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("uverbs: work request %d (wr_id %#x): %v", e.Index, e.WRID, e.Err)
}

func (e *PostError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

func postError(i int, wrid uint64, err error) error {
	if i == 0 {
		return err
	}
	return &PostError{Index: i, WRID: wrid, Err: err}
}
