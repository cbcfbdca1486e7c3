package uverbs

import (
	"fmt"

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
