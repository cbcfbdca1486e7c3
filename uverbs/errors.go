package uverbs

import (
	"fmt"
	"strings"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
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

// closedContext is the error for a call on a closed context; op is the
// call's prefix ("uverbs AllocPD").
func closedContext(op string) error {
	return &sys.Error{Op: op, Err: fmt.Errorf("context: %w", ErrClosed)}
}

// errInvalid is EINVAL for bad input caught before a kernel call.
var errInvalid = sys.ErrInvalid

// nested is the error of a call this package made inside another
// (QueryPort inside ConnectRC): its text drops the package name, so the
// outer call's "uverbs <Operation>: " stays the only prefix, and the
// inner one reads as part of the cause. It unwraps to the error itself.
type nested struct{ err error }

func (e nested) Error() string { return strings.TrimPrefix(e.err.Error(), "uverbs ") }
func (e nested) Unwrap() error { return e.err }

// inner wraps err, from a call inside another, as nested; nil stays nil.
func inner(err error) error {
	if err == nil {
		return nil
	}
	return nested{err}
}

// providerErr names op in an error of the provider layer ("rxe map
// CQ: ..." becomes "uverbs CreateCQ: rxe map CQ: ..."). A provider error
// that names a uverbs operation itself (mlx5's still do) is returned as
// it is, so the text never carries two prefixes.
func providerErr(op string, err error) error {
	if strings.HasPrefix(err.Error(), "uverbs") {
		return err
	}
	return fmt.Errorf("uverbs %s: %w", op, err)
}

// errNil is the error for a nil receiver, argument or context: op names
// the call ("QP.PostSend"), what the nil thing ("QP", "work request").
// It matches EINVAL.
func errNil(op, what string) error {
	return fmt.Errorf("uverbs %s: nil %s: %w", op, what, errInvalid)
}

// PostError reports a post list that failed part way: the work requests
// before Index were posted, the one at Index and after were not. A post
// that fails at its first work request returns the cause itself, not a
// PostError: nothing was posted. Its fields:
//
//	Index int    // position of the failing request in the list
//	WRID  uint64 // its WRID
//	Err   error  // why it failed (Unwrap returns it)
//
// It is defined once, in the provider layer that makes it (providers
// report the index as they write the queue), and is the same type here:
// errors.As with a *uverbs.PostError finds it.
type PostError = provider.PostError
