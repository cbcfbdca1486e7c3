package rdmacm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/internal/ucma"
)

// Errors from this package match these with errors.Is, as well as the
// errno the kernel returned (errors.Is(err, syscall.EADDRINUSE)).
var (
	// ErrNotSupported: the kernel or the device lacks the feature; the
	// message names it.
	ErrNotSupported = sys.ErrNotSupported
	// ErrClosed (= os.ErrClosed): the ID or the event channel is closed.
	ErrClosed = sys.ErrClosed
	// ErrBusy: Next was called while another Next waits on the same
	// channel. It is returned at once.
	ErrBusy = sys.ErrBusy
	// ErrRejected matches the error of a connection the peer refused
	// (a REJECTED event, or the UNREACHABLE of a refused UD Connect:
	// see Event.Refused); errors.As with *EventError gives the event,
	// its reject reason and private data.
	ErrRejected = errors.New("connection rejected")
	// ErrDisconnected matches the error of GetSendComp and GetRecvComp
	// when the ID's CQ has no completion and its channel reported
	// DISCONNECTED: the peer closed the connection (or answered this
	// side's Disconnect), so none will come.
	ErrDisconnected = errors.New("connection disconnected")
	// ErrNoListener matches the error of a connect that nothing listens
	// for at the destination: on InfiniBand and RoCE a REJECTED event
	// with reason RejectInvalidServiceID (a UD connect's SIDR status 1);
	// on iWARP the TCP connect that Connect makes, refused. Such an
	// error matches ErrRejected and ECONNREFUSED too.
	ErrNoListener = errors.New("nothing listens on the port")
)

// noListenerError is an iWARP connect refused inside the CONNECT
// command (iWARP's CM connects its TCP stream there).
type noListenerError struct {
	dst string // the destination, or "the address"
	err error  // the command's error (ECONNREFUSED)
}

func (e *noListenerError) Error() string {
	return "connection refused: nothing listens on " + e.dst + " (the TCP connect was refused: iWARP)"
}

func (e *noListenerError) Unwrap() []error { return []error{ErrRejected, ErrNoListener, e.err} }

// errInvalid is EINVAL for bad input caught before a kernel call.
var errInvalid = sys.ErrInvalid

// opError names the operation and the ID in an error: "rdmacm Connect
// (id 3): ...".
func opError(op string, handle uint32, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("rdmacm %s (id %d): %w", op, handle, err)
}

// EventError is the error of an event that failed, or of a blocking
// call that got another event than the one it waited for: an error
// event (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, REJECTED, CONNECT_ERROR,
// ...) or an unexpected one. It matches the event's errno with
// errors.Is (ETIMEDOUT for a resolution that timed out), and for
// REJECTED ErrRejected and ECONNREFUSED; the event has the reject
// reason and the peer's private data.
type EventError struct {
	Op    string    // the blocking call, e.g. "ConnectContext"; "" for Event.Err
	Want  EventType // the event the call waited for
	Event *Event
}

func (e *EventError) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString("rdmacm " + e.Op + ": ")
	} else {
		b.WriteString("rdmacm Event.Err: ")
	}
	if e.noListener() {
		// The port has no listener: say so, keeping the event's words.
		dst := "the address"
		if e.Event.ID != nil {
			if a, err := e.Event.ID.RemoteAddr(); err == nil && a.IsValid() {
				dst = a.String()
			}
		}
		b.WriteString("connection refused: nothing listens on " + dst + " (" + e.Event.Type.String())
		if e.Event.Type == EventRejected {
			b.WriteString(", reason " + e.Event.RejectReason().String())
		} else {
			b.WriteString(", SIDR status " + strconv.Itoa(e.Event.Status))
		}
		b.WriteString(")")
		return b.String()
	}
	b.WriteString(e.Event.Type.String())
	if e.Op != "" && e.Want != e.Event.Type {
		b.WriteString(" instead of " + e.Want.String())
	}
	if e.Event.Type == EventRejected {
		b.WriteString(" (reason " + e.Event.RejectReason().String() + ")")
	} else if e.Event.Refused() {
		b.WriteString(" (SIDR status " + strconv.Itoa(e.Event.Status) + ")")
	} else if errno := e.Event.errno(); errno != 0 {
		b.WriteString(": " + ucma.Errno(errno).Error())
	}
	return b.String()
}

// noListener reports a refusal that means no one listens on the port:
// an RC reject for an unknown service id (on iWARP, whose CM has no
// reasons, -ECONNREFUSED), or a UD SIDR reply of status 1
// (IB_SIDR_UNSUPPORTED).
func (e *EventError) noListener() bool {
	return (e.Event.Type == EventRejected && e.Event.RejectReason() == RejectInvalidServiceID) ||
		(e.Event.Type == EventRejected && e.Event.Status < 0 && errors.Is(ucma.Errno(-e.Event.Status), ucma.ErrConnRefused)) ||
		(e.Event.Type == EventUnreachable && e.Event.Status == 1)
}

// Unwrap returns ErrRejected and ECONNREFUSED when the peer refused (see
// Event.Refused), and ErrNoListener too when nothing listens; else the
// event's status as an errno.
func (e *EventError) Unwrap() []error {
	if e.Event.Refused() {
		if e.noListener() {
			return []error{ErrRejected, ErrNoListener, ucma.ErrConnRefused}
		}
		return []error{ErrRejected, ucma.ErrConnRefused}
	}
	if errno := e.Event.errno(); errno != 0 {
		return []error{ucma.Errno(errno)}
	}
	return nil
}
