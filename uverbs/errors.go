package uverbs

import "github.com/purerdma/rdma/internal/sys"

// Errors from this package match these with errors.Is, as well as the
// errno the kernel returned (errors.Is(err, unix.EINVAL)).
var (
	// ErrNotSupported: the kernel, the device or its provider lacks the
	// feature; the message names it.
	ErrNotSupported = sys.ErrNotSupported
	// ErrClosed (= os.ErrClosed): the object, or its context, is closed.
	ErrClosed = sys.ErrClosed
	// ErrBusy: a bounded resource is full (a send or receive queue, a
	// completion channel that already has a waiter). It is returned at
	// once; retry later.
	ErrBusy = sys.ErrBusy
)

var errClosedContext = &sys.Error{Op: "uverbs: context", Err: ErrClosed}
