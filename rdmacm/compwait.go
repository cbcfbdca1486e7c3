package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/evfd"
	"github.com/purerdma/rdma/uverbs"
)

// GetSendComp and GetRecvComp wait for a completion and, at the same
// time, for the ID's DISCONNECTED: a blocking program that waits only
// for completions then learns of its peer's close at once, instead of
// from a send the peer never acknowledges seconds later (or never, for
// a receive).
//
// Both waits happen on the caller's goroutine, in one evfd.Set: an
// epoll fd in the runtime poller over the CQ's completion channel, a
// latch the ID's DISCONNECTED sets (whoever's Next processed it), and,
// for an ID with a private channel, that channel. When the private
// channel has events and no Next or blocking step waits on it, the
// completion call takes them itself (drain), which processes them as
// Next does, and keeps them, DISCONNECTED included, for Next to return
// first: nothing is lost for a program that reads its events later
// (DisconnectContext still gets its DISCONNECTED). When a Next does
// wait there, that Next takes them, its processing of DISCONNECTED
// sets the latch, and when it releases the channel it drains the
// events queued behind the one it took (release). The channel member is
// edge-triggered, so a completion call never spins on events another
// goroutine is about to take.

// Members of a compWait's Set, in the order they are added.
const (
	memberComp  = 0 // the CQ's completion channel
	memberLatch = 1 // the ID's DISCONNECTED latch
	memberCM    = 2 // the ID's private rdma_cm channel, if it has one
)

// compWaits are the state of an ID's blocking completion calls.
type compWaits struct {
	latch      atomic.Pointer[evfd.Latch] // set on DISCONNECTED; made by the first wait
	send, recv compWait
	chans      map[*uverbs.CompChannel]*compWait // WaitCompChannel's, by channel; ID.mu guards the map
}

// compWait is one CQ's wait: one goroutine at a time (busy).
type compWait struct {
	busy atomic.Bool
	set  *evfd.Set           // made by the first wait that blocks; ID.mu guards the pointer
	ch   *uverbs.CompChannel // the channel set watches (a QP made again after DestroyQP has another)
}

// markDisconnected records the ID's DISCONNECTED (processed by a Next or
// by a drain) and wakes its blocking completion calls.
func (id *ID) markDisconnected() {
	id.disconnected.Store(true)
	if l := id.ep.comp.latch.Load(); l != nil {
		l.Set() // after Close: does nothing
	}
}

// closeCompWaits closes the waits' fds, waking a wait in progress with
// ErrClosed. The ID is closed already, so none is made afterwards.
func (id *ID) closeCompWaits() error {
	id.mu.Lock()
	sets := []*evfd.Set{id.ep.comp.send.set, id.ep.comp.recv.set}
	id.ep.comp.send.set, id.ep.comp.recv.set = nil, nil
	id.ep.comp.send.ch, id.ep.comp.recv.ch = nil, nil
	for _, w := range id.ep.comp.chans {
		sets = append(sets, w.set)
		w.set, w.ch = nil, nil
	}
	id.ep.comp.chans = nil
	id.mu.Unlock()
	var errs []error
	for _, s := range sets {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if l := id.ep.comp.latch.Swap(nil); l != nil {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// getComp polls cq for a completion and, with none, arms the CQ, polls
// again and waits, until a completion arrives, the ID is disconnected,
// ctx ends or the ID is closed.
func (id *ID) getComp(ctx context.Context, op string, w *compWait, cq *uverbs.CQ, ch *uverbs.CompChannel) (uverbs.WorkCompletion, error) {
	var wc [1]uverbs.WorkCompletion
	if err := id.alive(op); err != nil {
		return wc[0], err
	}
	if cq == nil || ch == nil {
		return wc[0], opError(op, id.handle, fmt.Errorf("the CQ is not one CreateQP made: %w", errInvalid))
	}
	armed := false
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return wc[0], opError(op, id.handle, err)
		}
		if n == 1 {
			if err := wc[0].Status.Err(); err != nil {
				if wc[0].Status == uverbs.WCWRFlushErr && id.iwarp() {
					// iWARP's QP leaves RTS only with its connection
					// (the peer's close flushes it, often before the
					// DISCONNECTED event): the flush is the disconnect.
					err = fmt.Errorf("%w (the iWARP connection ended: %w)", err, ErrDisconnected)
				}
				return wc[0], opError(op, id.handle, err)
			}
			return wc[0], nil
		}
		if id.disconnected.Load() {
			return wc[0], opError(op, id.handle, errNoCompDisconnected)
		}
		if !armed {
			// Armed, then polled again: a completion that arrived
			// before the arming is found by the poll, a later one
			// sends an event.
			if err := cq.RequestNotify(false); err != nil {
				return wc[0], opError(op, id.handle, err)
			}
			armed = true
			continue
		}
		ready, err := id.waitComp(ctx, op, w, cq, ch)
		if err != nil {
			return wc[0], err
		}
		if ready&(1<<memberComp) != 0 {
			armed = false // the event disarmed it
		}
	}
}

// WaitCompChannel waits for the next event of ch, a completion channel
// of the ID's CQs, as ch.Wait does, and at the same time for the ID's
// DISCONNECTED, as GetSendComp does: it returns the CQ the event is for
// (acknowledge it with CQ.AckEvents, then arm the CQ again), or, when
// the ID got DISCONNECTED and ch has no event, an error matching
// ErrDisconnected. The DISCONNECTED may have been processed by a Next,
// or by this call from the ID's private channel, which keeps it for
// Next to return.
//
// This is the wait for a program that posts on an iWARP connection and
// waits on its CQ: when an iWARP connection ends, the kernel flushes
// what the QP holds and nothing posted afterwards ever completes
// (docs/providers.md, "siw"), so a wait on the channel alone could last
// for ever. On InfiniBand and RoCE a request posted after DISCONNECTED
// still completes (the QP stays in RTS until Disconnect: a retry error,
// or a flush); a caller that wants those completions waits on ch alone.
//
// One goroutine at a time waits on a given channel (ErrBusy otherwise).
// ctx ending returns ctx.Err(); Close wakes the call with ErrClosed.
func (id *ID) WaitCompChannel(ctx context.Context, ch *uverbs.CompChannel) (*uverbs.CQ, error) {
	const op = "WaitCompChannel"
	if err := id.alive(op); err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, opError(op, id.handle, fmt.Errorf("nil completion channel: %w", errInvalid))
	}
	id.mu.Lock()
	w := id.ep.comp.chans[ch]
	if w == nil {
		if id.ep.comp.chans == nil {
			id.ep.comp.chans = make(map[*uverbs.CompChannel]*compWait)
		}
		w = new(compWait)
		id.ep.comp.chans[ch] = w
	}
	id.mu.Unlock()
	if !w.busy.CompareAndSwap(false, true) {
		return nil, opError(op, id.handle, fmt.Errorf("another goroutine waits on this completion channel: %w", ErrBusy))
	}
	defer w.busy.Store(false)
	set, own, err := id.compSet(w, ch)
	if err != nil {
		return nil, opError(op, id.handle, err)
	}
	for {
		if id.disconnected.Load() {
			// Marked before the latch existed: set it now, so that the
			// Set reports it together with the channel's state.
			if l := id.ep.comp.latch.Load(); l != nil {
				l.Set()
			}
		}
		ready, err := set.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil, ctx.Err()
			}
			return nil, opError(op, id.handle, err)
		}
		if ready&(1<<memberCM) != 0 && own != nil {
			own.drain() // a DISCONNECTED among them sets the latch
		}
		if ready&(1<<memberComp) != 0 {
			// Readable, and no other goroutine waits on it here (busy).
			cq, err := ch.Wait(ctx)
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return nil, ctx.Err()
				}
				return nil, opError(op, id.handle, err)
			}
			return cq, nil
		}
		if ready&(1<<memberLatch) != 0 {
			// Level-triggered: the channel had no event when the latch
			// was seen set, and on iWARP the QP was moved to ERR (which
			// queues its flushes' events) before the latch was set.
			return nil, opError(op, id.handle, errNoCompDisconnected)
		}
	}
}

// iwarp reports whether the ID is bound to an iWARP device.
func (id *ID) iwarp() bool {
	d, ok := id.Device()
	return ok && d.Transport == uverbs.TransportIWARP
}

var errNoCompDisconnected = fmt.Errorf("no completion, and the ID's channel reported DISCONNECTED: %w", ErrDisconnected)

// waitComp waits until the CQ's channel has an event, which it takes
// and acknowledges, or the ID's private channel has events, which it
// drains, or the ID is disconnected. It returns the Set's members that
// were ready.
func (id *ID) waitComp(ctx context.Context, op string, w *compWait, cq *uverbs.CQ, ch *uverbs.CompChannel) (uint32, error) {
	if !w.busy.CompareAndSwap(false, true) {
		return 0, opError(op, id.handle, fmt.Errorf("another goroutine waits for this CQ's completions: %w", ErrBusy))
	}
	defer w.busy.Store(false)
	set, own, err := id.compSet(w, ch)
	if err != nil {
		return 0, opError(op, id.handle, err)
	}
	if id.disconnected.Load() {
		return 0, nil // marked before the latch existed: the caller sees it
	}
	ready, err := set.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return 0, ctx.Err()
		}
		return 0, opError(op, id.handle, err)
	}
	if ready&(1<<memberComp) != 0 {
		// Readable, and no other goroutine reads it (busy): at once.
		if _, err := ch.Wait(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return 0, ctx.Err()
			}
			return 0, opError(op, id.handle, err)
		}
		cq.AckEvents(1)
	}
	if ready&(1<<memberCM) != 0 && own != nil {
		own.drain()
	}
	return ready, nil
}

// compSet returns w's Set, making it (and the ID's latch) on first use,
// and the ID's private channel, nil when it has none.
func (id *ID) compSet(w *compWait, ch *uverbs.CompChannel) (*evfd.Set, *EventChannel, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	own := id.own
	if w.set != nil && w.ch == ch {
		return w.set, own, nil
	}
	if id.closed.Load() {
		return nil, nil, ErrClosed
	}
	if w.set != nil {
		w.set.Close() // of a QP DestroyQP destroyed: its channel is gone
		w.set, w.ch = nil, nil
	}
	latch := id.ep.comp.latch.Load()
	if latch == nil {
		var err error
		if latch, err = evfd.NewLatch(); err != nil {
			return nil, nil, err
		}
		id.ep.comp.latch.Store(latch)
	}
	set, err := evfd.NewSet("rdmacm completion wait")
	if err != nil {
		return nil, nil, err
	}
	add := func(fd int, edge bool) error {
		_, err := set.Add(fd, edge)
		return err
	}
	err = add(ch.Fd(), false) // memberComp
	if err == nil {
		err = add(latch.Fd(), false) // memberLatch
	}
	if err == nil && own != nil {
		err = add(own.Fd(), true) // memberCM
	}
	if err != nil {
		set.Close()
		return nil, nil, err
	}
	w.set, w.ch = set, ch
	return set, own, nil
}

// drain takes the events queued on the channel without waiting,
// processes each as Next does, and keeps them for Next, unless a Next
// or a blocking step holds the channel's waiter slot: that one takes
// them, and when it releases the slot it drains what it left (missed),
// so that events queued behind the one it took reach the completion
// calls too. While drain holds the slot, a Next or a step that wants it
// waits for it (claim) instead of failing with ErrBusy.
func (ch *EventChannel) drain() {
	ch.drainers.Add(1)
	defer ch.drainers.Add(-1)
	ch.missed.Store(true) // before the claim: a holder that releases after it fails sees it
	if !ch.waiting.CompareAndSwap(false, true) {
		return
	}
	ch.missed.Store(false)
	ch.takeQueued()
	ch.release()
}

// release frees the waiter slot, after draining the events a drain
// could not take while the slot was held.
func (ch *EventChannel) release() {
	for {
		if ch.missed.Swap(false) {
			ch.takeQueued()
		}
		ch.waiting.Store(false)
		// A drain that failed to claim the slot since the Swap: take the
		// slot back for it, unless another holder did (it drains then).
		if !ch.missed.Load() || !ch.waiting.CompareAndSwap(false, true) {
			return
		}
	}
}

// takeQueued is drain for the holder of the waiter slot.
func (ch *EventChannel) takeQueued() {
	for {
		var resp abi.UCMEventResp
		ok, err := ch.f.TryGetEvent(&resp)
		if err != nil || !ok {
			return // an error here (the channel closed) is the next Next's to report
		}
		if ev := ch.process(&resp); ev != nil {
			ch.mu.Lock()
			ch.pending = append(ch.pending, ev)
			ch.mu.Unlock()
		}
	}
}

// popPending returns the oldest event drain kept whose ID is still
// open, or nil.
func (ch *EventChannel) popPending() *Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for len(ch.pending) > 0 {
		ev := ch.pending[0]
		ch.pending[0] = nil
		ch.pending = ch.pending[1:]
		if !ev.ID.closed.Load() {
			return ev
		}
	}
	ch.pending = nil
	return nil
}

// takePending removes and returns the kept events of id, for Migrate.
func (ch *EventChannel) takePending(id *ID) []*Event {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var mine []*Event
	rest := ch.pending[:0]
	for _, ev := range ch.pending {
		if ev.ID == id || ev.Listener == id {
			mine = append(mine, ev)
		} else {
			rest = append(rest, ev)
		}
	}
	clear(ch.pending[len(rest):])
	ch.pending = rest
	return mine
}

// adoptPending queues events Migrate moved here after those already
// kept. A Next already waiting on this channel returns them with the
// channel's next event.
func (ch *EventChannel) adoptPending(evs []*Event) {
	if len(evs) == 0 {
		return
	}
	ch.mu.Lock()
	ch.pending = append(ch.pending, evs...)
	ch.mu.Unlock()
}
