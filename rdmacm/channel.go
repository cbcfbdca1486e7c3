package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/ucma"
	"github.com/purerdma/rdma/uverbs"
)

// EventChannel is an rdma_cm event channel (rdma_event_channel): an open
// /dev/infiniband/rdma_cm on which IDs are created and their events
// arrive. Any number of IDs may share one.
//
// Next blocks through the Go runtime poller (no thread is held); one
// goroutine waits at a time, and a second concurrent Next fails at once
// with ErrBusy. Close wakes a waiting Next. The other methods are safe
// for concurrent use.
type EventChannel struct {
	f       *ucma.File
	closed  atomic.Bool
	owner   atomic.Pointer[ID] // the ID whose private channel this is, or nil
	waiting atomic.Bool        // a Next, or an ID's blocking step, holds the channel
	// drainers counts GetSendComp and GetRecvComp calls taking the
	// queued events off the channel for a moment (drain); missed says
	// that one found the waiter slot held (release drains then).
	drainers atomic.Int32
	missed   atomic.Bool

	mu      sync.Mutex
	ids     map[*ID]struct{} // the IDs whose events arrive here
	pending []*Event         // events drain took, for Next to return first
}

// NewEventChannel opens an event channel (rdma_create_event_channel).
func NewEventChannel() (*EventChannel, error) {
	f, err := ucma.Open()
	if err != nil {
		return nil, fmt.Errorf("rdmacm NewEventChannel: %w", err)
	}
	return &EventChannel{f: f, ids: map[*ID]struct{}{}}, nil
}

// Fd is the channel's file descriptor, for a caller's own epoll loop: it
// is readable when Next would return without waiting (or after skipping
// events of IDs closed meanwhile). Valid until Close. One exception:
// events that GetSendComp or GetRecvComp took off an ID's private
// channel while looking for DISCONNECTED wait in the channel for Next,
// which returns them first, without making the fd readable.
func (ch *EventChannel) Fd() int { return ch.f.Fd() }

// SyscallConn is the channel's fd as a syscall.RawConn registered with
// the runtime poller, the Go way to use it in one's own loop: Control
// runs a function with the fd while it is open, Read waits for
// readiness without holding a thread. Events are still taken with Next.
func (ch *EventChannel) SyscallConn() (syscall.RawConn, error) {
	if ch.closed.Load() {
		return nil, fmt.Errorf("rdmacm EventChannel.SyscallConn: %w", ErrClosed)
	}
	return ch.f.SyscallConn(), nil
}

// Close destroys the IDs still on the channel (as ID.Close does), then
// closes it (rdma_destroy_event_channel). A waiting Next returns
// ErrClosed. Closing the private channel of an ID closes the ID.
func (ch *EventChannel) Close() error {
	if owner := ch.owner.Load(); owner != nil {
		return owner.Close()
	}
	if !ch.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("rdmacm EventChannel.Close: %w", ErrClosed)
	}
	var first error
	for _, id := range ch.snapshot() {
		if err := id.Close(); err != nil && !errors.Is(err, ErrClosed) && first == nil {
			first = err
		}
	}
	if err := ch.f.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

func (ch *EventChannel) snapshot() []*ID {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ids := make([]*ID, 0, len(ch.ids))
	for id := range ch.ids {
		ids = append(ids, id)
	}
	return ids
}

func (ch *EventChannel) add(id *ID) {
	ch.mu.Lock()
	ch.ids[id] = struct{}{}
	ch.mu.Unlock()
}

func (ch *EventChannel) remove(id *ID) {
	ch.mu.Lock()
	delete(ch.ids, id)
	ch.mu.Unlock()
}

// Next waits for the next event of an ID on the channel and returns it
// (rdma_get_cm_event followed by rdma_ack_cm_event: the event is copied
// out and acknowledged before Next returns, so it never has to be
// acknowledged and never holds up Close).
//
// Before returning, Next does what librdmacm does on the way: on
// ADDR_RESOLVED it binds the ID to its device; on CONNECT_REQUEST it
// creates the new ID; on CONNECT_RESPONSE of an ID with a QP from
// CreateQP it moves the QP to RTR and RTS and completes the connection,
// reporting ESTABLISHED (or CONNECT_ERROR); on REJECTED it moves the QP
// to ERR; on MULTICAST_JOIN it attaches the QP to the group. Events of
// IDs closed meanwhile are dropped.
//
// Next returns ctx.Err() when ctx ends first and ErrClosed after Close.
func (ch *EventChannel) Next(ctx context.Context) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ch.claim(); err != nil {
		return nil, fmt.Errorf("rdmacm EventChannel.Next: %w", err)
	}
	defer ch.release()
	return ch.next(ctx)
}

// claim takes the channel's one waiter slot: for Next, or for a
// blocking step of an ID (ConnectContext, ...) from before the step
// starts until its event has come, so that a step is never started
// that its caller could not wait for. It fails at once, matching
// ErrBusy, when another goroutine holds the slot.
func (ch *EventChannel) claim() error {
	for !ch.waiting.CompareAndSwap(false, true) {
		if ch.drainers.Load() == 0 {
			return fmt.Errorf("another goroutine is waiting on the event channel (one Next at a time): %w", ErrBusy)
		}
		// A blocking completion call holds the slot for as long as it
		// takes to read the queued events (drain): not a waiter.
		runtime.Gosched()
	}
	return nil
}

// next is Next for the holder of the waiter slot.
func (ch *EventChannel) next(ctx context.Context) (*Event, error) {
	for {
		if ev := ch.popPending(); ev != nil {
			return ev, nil
		}
		var resp abi.UCMEventResp
		if err := ch.f.GetEvent(ctx, &resp); err != nil {
			if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("rdmacm EventChannel.Next: %w", err)
		}
		if ev := ch.process(&resp); ev != nil {
			return ev, nil
		}
	}
}

// IDs and multicast memberships by the uid their events carry. The maps
// are global, not per channel: an event taken from a channel just before
// its ID migrated still finds it.
var (
	uids    atomic.Uint64
	idByUID sync.Map // uint64 -> *ID
	mcByUID sync.Map // uint64 -> *membership
)

func newUID() uint64 { return uids.Add(1) }

// process turns one event response into an Event, or nil to drop it.
func (ch *EventChannel) process(r *abi.UCMEventResp) *Event {
	typ := EventType(r.Event)
	var id *ID
	var m *membership
	if typ == EventMulticastJoin || typ == EventMulticastError {
		v, ok := mcByUID.Load(r.UID)
		if !ok {
			return nil
		}
		m = v.(*membership)
		id = m.id
		defer m.done()
	} else {
		v, ok := idByUID.Load(r.UID)
		if !ok {
			return nil // uid 0: an event of an ID the kernel has not been told about
		}
		id = v.(*ID)
	}
	defer id.done()
	ev := &Event{ID: id}
	decodeEvent(r, id.qpType == uverbs.QPTypeUD, ev)
	if id.closed.Load() {
		if typ == EventConnectRequest {
			ch.f.DestroyID(r.ID) // the listener is closing: refuse the connection
		}
		return nil
	}
	switch typ {
	case EventAddrResolved:
		if err := id.queryAddr(); err != nil {
			ev.Type, ev.Status = EventAddrError, errnoStatus(err)
		}
	case EventConnectRequest:
		child, err := id.newChild(ch, r.ID, ev)
		if err != nil {
			return nil
		}
		ev.Listener, ev.ID = id, child
	case EventConnectResponse:
		if id.hasQP() {
			if err := id.completeConnect(); err != nil {
				ev.Type, ev.Status = EventConnectError, errnoStatus(err)
			} else {
				ev.Type = EventEstablished
			}
		}
	case EventEstablished:
		// iWARP: the kernel's CM moved the QP to RTS itself; uverbs
		// records it without a MODIFY_QP (siw's QUERY_QP does not report
		// the state, and a modify would hold siw's QP state lock while
		// the peer's first data may be arriving: it would stay unread).
		if qp := id.QP(); qp != nil {
			if d, ok := id.Device(); ok && d.Transport == uverbs.TransportIWARP {
				if err := qp.EstablishedByCM(); err != nil {
					ev.Type, ev.Status = EventConnectError, errnoStatus(err)
				}
			}
		}
	case EventRejected:
		if id.connectFailed.Load() {
			return nil
		}
		id.qpToError()
	case EventDisconnected:
		if id.connectFailed.Load() {
			return nil
		}
		if id.iwarp() {
			// The kernel stopped the QP when the connection ended and
			// flushed what it held then; a request posted since sits
			// in the send queue for ever (siw flushes nothing added
			// after the QP stopped). ERR recorded here makes every
			// later post fail at once (docs/providers.md, "siw"). Before
			// the latch: a completion wait that sees the latch finds the
			// events of what this flushes already queued.
			id.qpToError()
		}
		id.markDisconnected()
	case EventMulticastJoin:
		ev.Group = m.group
		if err := m.joined(ev.UD); err != nil {
			ev.Type, ev.Status = EventMulticastError, errnoStatus(err)
		}
	case EventMulticastError:
		ev.Group = m.group
	}
	return ev
}
