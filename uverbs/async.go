package uverbs

import (
	"context"
	"fmt"
	"strconv"
	"syscall"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// AsyncEventType is the type of an asynchronous event (ibv_event_type;
// the kernel's enum ib_event_type has the same numbers).
type AsyncEventType uint32

// Asynchronous event types. The comment says what the event carries.
const (
	EventCQErr             AsyncEventType = 0  // CQ
	EventQPFatal           AsyncEventType = 1  // QP
	EventQPReqErr          AsyncEventType = 2  // QP
	EventQPAccessErr       AsyncEventType = 3  // QP
	EventCommEst           AsyncEventType = 4  // QP
	EventSQDrained         AsyncEventType = 5  // QP
	EventPathMig           AsyncEventType = 6  // QP
	EventPathMigErr        AsyncEventType = 7  // QP
	EventDeviceFatal       AsyncEventType = 8  // Port (0: the device)
	EventPortActive        AsyncEventType = 9  // Port
	EventPortErr           AsyncEventType = 10 // Port
	EventLIDChange         AsyncEventType = 11 // Port
	EventPKeyChange        AsyncEventType = 12 // Port
	EventSMChange          AsyncEventType = 13 // Port
	EventSRQErr            AsyncEventType = 14 // SRQ
	EventSRQLimitReached   AsyncEventType = 15 // SRQ
	EventQPLastWQEReached  AsyncEventType = 16 // QP
	EventClientReregister  AsyncEventType = 17 // Port
	EventGIDChange         AsyncEventType = 18 // Port
	EventWQFatal           AsyncEventType = 19 // a WQ (not modelled here: no object)
	EventDeviceSpeedChange AsyncEventType = 20 // Port
)

var asyncEventNames = [...]struct{ name, desc string }{
	EventCQErr:             {"CQ_ERR", "CQ error"},
	EventQPFatal:           {"QP_FATAL", "local work queue catastrophic error"},
	EventQPReqErr:          {"QP_REQ_ERR", "invalid request local work queue error"},
	EventQPAccessErr:       {"QP_ACCESS_ERR", "local access violation work queue error"},
	EventCommEst:           {"COMM_EST", "communication established"},
	EventSQDrained:         {"SQ_DRAINED", "send queue drained"},
	EventPathMig:           {"PATH_MIG", "path migrated"},
	EventPathMigErr:        {"PATH_MIG_ERR", "path migration request error"},
	EventDeviceFatal:       {"DEVICE_FATAL", "local catastrophic error"},
	EventPortActive:        {"PORT_ACTIVE", "port active"},
	EventPortErr:           {"PORT_ERR", "port error"},
	EventLIDChange:         {"LID_CHANGE", "LID change"},
	EventPKeyChange:        {"PKEY_CHANGE", "P_Key change"},
	EventSMChange:          {"SM_CHANGE", "SM change"},
	EventSRQErr:            {"SRQ_ERR", "SRQ catastrophic error"},
	EventSRQLimitReached:   {"SRQ_LIMIT_REACHED", "SRQ limit reached"},
	EventQPLastWQEReached:  {"QP_LAST_WQE_REACHED", "last WQE reached"},
	EventClientReregister:  {"CLIENT_REREGISTER", "client reregistration"},
	EventGIDChange:         {"GID_CHANGE", "GID table change"},
	EventWQFatal:           {"WQ_FATAL", "WQ fatal"},
	EventDeviceSpeedChange: {"DEVICE_SPEED_CHANGE", "Device link speed change"},
}

// String returns the event's name in the C enum without its IBV_EVENT_
// prefix, such as "PORT_ERR".
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventNames) {
		return asyncEventNames[t].name
	}
	return "AsyncEventType(" + strconv.Itoa(int(t)) + ")"
}

// Description returns what ibv_event_type_str says of the event, such as
// "port error" ("unknown" for a type it does not know).
func (t AsyncEventType) Description() string {
	if int(t) < len(asyncEventNames) {
		return asyncEventNames[t].desc
	}
	return "unknown"
}

// element says which field of an AsyncEvent the kernel's element fills.
type element int

const (
	elemPort element = iota
	elemCQ
	elemQP
	elemSRQ
	elemNone // a WQ: this package has no WQ objects
)

func (t AsyncEventType) element() element {
	switch t {
	case EventCQErr:
		return elemCQ
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return elemQP
	case EventSRQErr, EventSRQLimitReached:
		return elemSRQ
	case EventWQFatal:
		return elemNone
	}
	return elemPort // port and device events, and types newer than this package
}

// AsyncEvent is an asynchronous event (ibv_async_event): an error or a
// state change of a CQ, QP, SRQ, port or the whole device. Exactly one of
// Port, CQ, QP and SRQ is set, as Type says (see the Event constants);
// DEVICE_FATAL carries a port number, usually 0.
//
// Events need no acknowledgement: ibv_ack_async_event exists so that C
// code cannot destroy an object while another thread still looks at its
// event; in Go the object stays valid memory, and methods of a closed
// object return ErrClosed.
type AsyncEvent struct {
	Type AsyncEventType
	Port int
	CQ   *CQ
	QP   *QP
	SRQ  *SRQ
}

func (e AsyncEvent) String() string {
	switch {
	case e.CQ != nil:
		return fmt.Sprintf("%v on CQ %d", e.Type, e.CQ.handle)
	case e.QP != nil:
		return fmt.Sprintf("%v on QP %d", e.Type, e.QP.handle)
	case e.SRQ != nil:
		return fmt.Sprintf("%v on SRQ %d", e.Type, e.SRQ.handle)
	case e.Type.element() == elemPort:
		return fmt.Sprintf("%v on port %d", e.Type, e.Port)
	}
	return e.Type.String()
}

// AsyncEvent waits for the context's next asynchronous event and returns
// it (ibv_get_async_event). It returns ctx.Err() when ctx ends first,
// and an error matching ErrClosed when the context is or gets closed.
//
// One goroutine waits at a time: a second concurrent call fails at once
// with ErrBusy. The wait parks the goroutine in the runtime poller; no
// thread is held and no goroutine is left behind.
//
// Events about a CQ, QP or SRQ that was closed after the kernel queued
// them are dropped (the kernel drops those still queued when the object
// is destroyed; this catches the race).
//
// A QP error event (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR), a CQ_ERR (for
// the QPs on that CQ) and DEVICE_FATAL (for every QP) tell the library
// that the QPs may be in ERR: their next PostRecv asks the kernel, so
// that receives posted to a QP in ERR complete with WCWRFlushErr.
func (c *Context) AsyncEvent(ctx context.Context) (AsyncEvent, error) {
	if c == nil {
		return AsyncEvent{}, errNil("AsyncEvent", "Context")
	}
	if ctx == nil {
		return AsyncEvent{}, errNil("AsyncEvent", "context.Context")
	}
	if c.closed.Load() {
		return AsyncEvent{}, closedContext("uverbs AsyncEvent")
	}
	for {
		var desc abi.AsyncEventDesc
		b := abi.Bytes(&desc)
		n, err := c.async.Read(ctx, b)
		if err != nil {
			return AsyncEvent{}, err
		}
		if n != len(b) {
			return AsyncEvent{}, &sys.Error{Op: "uverbs AsyncEvent", Err: fmt.Errorf("%d bytes, want %d", n, len(b))}
		}
		if ev, ok := decodeAsyncEvent(desc, c.objectFor); ok {
			c.noteAsyncEvent(ev)
			return ev, nil
		}
	}
}

// decodeAsyncEvent turns the kernel's struct ib_uverbs_async_event_desc
// into an AsyncEvent: the element is a port number for port and device
// events, else the user handle of the object, which lookup maps back. It
// reports false for an event whose object is gone.
func decodeAsyncEvent(desc abi.AsyncEventDesc, lookup func(uint64) any) (AsyncEvent, bool) {
	ev := AsyncEvent{Type: AsyncEventType(desc.EventType)}
	var ok bool
	switch ev.Type.element() {
	case elemPort:
		ev.Port, ok = int(desc.Element), true
	case elemCQ:
		ev.CQ, ok = lookup(desc.Element).(*CQ)
	case elemQP:
		ev.QP, ok = lookup(desc.Element).(*QP)
	case elemSRQ:
		ev.SRQ, ok = lookup(desc.Element).(*SRQ)
	case elemNone:
		ok = true
	}
	return ev, ok
}

// noteAsyncEvent marks the QPs an error event says may be in ERR.
func (c *Context) noteAsyncEvent(ev AsyncEvent) {
	switch ev.Type {
	case EventQPFatal, EventQPReqErr, EventQPAccessErr:
		if ev.QP != nil {
			ev.QP.pv.MarkErrSeen()
		}
	case EventCQErr:
		if ev.CQ != nil {
			c.pc.MarkErrSeenOnCQ(ev.CQ.q)
		}
	case EventDeviceFatal:
		c.pc.MarkErrSeenAll()
	}
}

// AsyncFd is the file descriptor of the context's asynchronous events,
// for a caller's own epoll loop: it is readable when AsyncEvent would
// return at once. Read events with AsyncEvent, not from the descriptor.
// It is valid until Close, and -1 after (and for a nil Context).
// AsyncConn is the async event fd as a syscall.RawConn registered with
// the runtime poller, the Go way to use the fd in one's own loop:
// Control gives the fd while it is open, Read waits for an event
// without holding a thread. It fails after Close.
func (c *Context) AsyncConn() (syscall.RawConn, error) {
	if c == nil {
		return nil, errNil("AsyncConn", "Context")
	}
	if c.closed.Load() {
		return nil, closedContext("uverbs AsyncConn")
	}
	return c.async.SyscallConn(), nil
}

func (c *Context) AsyncFd() int {
	if c == nil {
		return -1
	}
	return c.async.Fd()
}
