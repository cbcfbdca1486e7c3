package rpma

import (
	"errors"
	"fmt"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// The error classes of librpma (RPMA_E_*). Every error this package
// returns matches exactly one of them with errors.Is, and also matches
// what lies underneath: the errno of a failed kernel call
// (errors.Is(err, syscall.EINVAL)), uverbs.ErrBusy for a full queue,
// uverbs.ErrClosed for a closed object, a uverbs.WCStatus for a failed
// completion.
var (
	ErrNotSupported     = errors.New("not supported")                    // RPMA_E_NOSUPP
	ErrProvider         = errors.New("provider error occurred")          // RPMA_E_PROVIDER
	ErrNoMemory         = errors.New("out of memory")                    // RPMA_E_NOMEM
	ErrInvalid          = errors.New("invalid argument")                 // RPMA_E_INVAL
	ErrNoCompletion     = errors.New("no next completion available")     // RPMA_E_NO_COMPLETION
	ErrNoEvent          = errors.New("no next event available")          // RPMA_E_NO_EVENT
	ErrAgain            = errors.New("temporary error")                  // RPMA_E_AGAIN
	ErrSharedChannel    = errors.New("completion channel is shared")     // RPMA_E_SHARED_CHANNEL
	ErrNotSharedChannel = errors.New("completion channel is not shared") // RPMA_E_NOT_SHARED_CHNL
	ErrUnknown          = errors.New("unknown error")                    // RPMA_E_UNKNOWN
)

// Code is a librpma error code (RPMA_E_*), for programs that log or
// exchange them with C.
type Code int

// The librpma error codes, as librpma.h numbers them.
const (
	CodeUnknown          Code = -100000
	CodeNotSupported     Code = -100001
	CodeProvider         Code = -100002
	CodeNoMemory         Code = -100003
	CodeInvalid          Code = -100004
	CodeNoCompletion     Code = -100005
	CodeNoEvent          Code = -100006
	CodeAgain            Code = -100007
	CodeSharedChannel    Code = -100008
	CodeNotSharedChannel Code = -100009
)

var codeErrs = []struct {
	c   Code
	err error
}{
	{CodeNotSupported, ErrNotSupported}, {CodeProvider, ErrProvider}, {CodeNoMemory, ErrNoMemory},
	{CodeInvalid, ErrInvalid}, {CodeNoCompletion, ErrNoCompletion}, {CodeNoEvent, ErrNoEvent},
	{CodeAgain, ErrAgain}, {CodeSharedChannel, ErrSharedChannel}, {CodeNotSharedChannel, ErrNotSharedChannel},
	{CodeUnknown, ErrUnknown},
}

// String is librpma's text for the code (rpma_err_2str).
func (c Code) String() string {
	if c == 0 {
		return "Success"
	}
	for _, e := range codeErrs {
		if e.c == c {
			return capitalize(e.err.Error())
		}
	}
	return fmt.Sprintf("Unknown error code %d", int(c))
}

// Err is the sentinel of the code, nil for 0.
func (c Code) Err() error {
	if c == 0 {
		return nil
	}
	for _, e := range codeErrs {
		if e.c == c {
			return e.err
		}
	}
	return ErrUnknown
}

// CodeOf is the librpma code of err: 0 for nil, the code of the class
// err matches, CodeUnknown for an error of no class.
func CodeOf(err error) Code {
	if err == nil {
		return 0
	}
	for _, e := range codeErrs {
		if errors.Is(err, e.err) {
			return e.c
		}
	}
	return CodeUnknown
}

// ErrorString is rpma_err_2str: the text of a librpma error code.
func ErrorString(code int) string { return Code(code).String() }

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// Error is an error of this package: the operation, its class (one of
// the Err* sentinels) and, when there is one, the cause underneath.
type Error struct {
	Op    string // e.g. "write", "conn_req new"
	Class error  // ErrInvalid, ErrProvider, ...
	Err   error  // the cause; nil when Class says it all
}

func (e *Error) Error() string {
	s := "rpma: " + e.Op + ": " + e.Class.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches the error's class, so errors.Is(err, ErrNoCompletion)
// allocates nothing (an Unwrap returning both would build a slice per
// call, on every empty poll).
func (e *Error) Is(target error) bool { return target == e.Class }

// Unwrap gives the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

func newErr(op string, class, cause error) error { return &Error{Op: op, Class: class, Err: cause} }

func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Class: ErrInvalid, Err: fmt.Errorf(format, args...)}
}

// provider classifies an error of uverbs or rdmacm as librpma classes
// the same failure of the verbs: a closed object and bad input stay what
// they are (ErrInvalid), a missing feature ErrNotSupported, out of
// memory ErrNoMemory, anything else ErrProvider, EBUSY included (a
// protection domain with regions still registered: librpma's
// rpma_peer_delete returns RPMA_E_PROVIDER). A full queue or a waiter
// already waiting, which this package reports as ErrAgain, is classed by
// busyOr at the calls where that can happen.
func provider(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *Error
	if errors.As(err, &re) {
		return err
	}
	class := ErrProvider
	switch {
	case errors.Is(err, uverbs.ErrNotSupported):
		class = ErrNotSupported
	case errors.Is(err, sys.ErrNoMemory):
		class = ErrNoMemory
	case errors.Is(err, uverbs.ErrClosed), errors.Is(err, sys.ErrInvalid):
		class = ErrInvalid
	}
	return &Error{Op: op, Class: class, Err: err}
}

// busyOr classes a full queue, or a second waiter refused at once, as
// ErrAgain, and anything else as provider does.
func busyOr(op string, err error) error {
	if err != nil && errors.Is(err, uverbs.ErrBusy) {
		var re *Error
		if !errors.As(err, &re) {
			return &Error{Op: op, Class: ErrAgain, Err: err}
		}
	}
	return provider(op, err)
}

// CompletionError is a work completion with an error status: the
// operation the device reported, its status and the op context given
// when it was posted. It matches its uverbs.WCStatus with errors.Is.
type CompletionError struct {
	Opcode    uverbs.WCOpcode // as the device reported it: the verbs leave it undefined for most errors
	Status    uverbs.WCStatus
	VendorErr uint32
	OpContext uint64
}

func (e *CompletionError) Error() string {
	return fmt.Sprintf("rpma: operation with op context %#x failed: %v (vendor error %#x)", e.OpContext, e.Status.String(), e.VendorErr)
}

func (e *CompletionError) Unwrap() error { return e.Status }

// CompletionErr returns nil for a successful completion, else a
// *CompletionError describing it.
func CompletionErr(wc *uverbs.WorkCompletion) error {
	if wc == nil {
		return invalid("completion", "nil work completion")
	}
	if wc.Status == uverbs.WCSuccess {
		return nil
	}
	return &CompletionError{Opcode: wc.Opcode, Status: wc.Status, VendorErr: wc.VendorErr, OpContext: wc.WRID}
}
