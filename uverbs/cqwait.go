package uverbs

import (
	"context"
	"fmt"
)

// PollContext returns completions as Poll does, waiting for them when
// the CQ has none: it polls; when the CQ is empty it arms it
// (RequestNotify), polls again (a completion that came before the
// arming sends no event), and waits on the CQ's completion channel,
// acknowledging the event (AckEvents); and so on until it has moved at
// least one completion into wc, up to len(wc). The wait parks the
// goroutine in the runtime poller (no thread is held) and ends with
// ctx.Err() when ctx ends first, and with an error matching ErrClosed
// when the CQ or its channel is closed. When completions are waiting,
// PollContext is Poll: no system call, no allocation.
//
// The CQ needs a completion channel (CQConfig.Channel), and while
// PollContext waits it is the channel's one waiter: a concurrent Wait,
// or PollContext of a CQ on the same channel, fails at once with
// ErrBusy. On a channel that several CQs share, an event PollContext
// takes for another CQ is acknowledged for that CQ, and a goroutine
// waiting for it with CompChannel.Wait would miss it; PollContext
// polls before it waits, so CQs read only with PollContext lose
// nothing. PollContext may return with the CQ armed: a later completion
// then queues an event, which the next wait takes and, finding the CQ
// polled already, waits again.
//
// PollContext is for a goroutine that sleeps while there is nothing to
// do. One that must not sleep polls in a loop paced by package spin
// (docs/threading.md, "Busy polling").
func (cq *CQ) PollContext(ctx context.Context, wc []WorkCompletion) (int, error) {
	if cq == nil {
		return 0, errNil("CQ.PollContext", "CQ")
	}
	if ctx == nil {
		return 0, errNil("CQ.PollContext", "context.Context")
	}
	if len(wc) == 0 {
		return 0, fmt.Errorf("uverbs CQ.PollContext: an empty slice would never take a completion: %w", errInvalid)
	}
	ch := cq.channel
	if ch == nil {
		return 0, fmt.Errorf("uverbs CQ.PollContext: the CQ has no completion channel to wait on (CQConfig.Channel): %w", errInvalid)
	}
	armed := false
	for {
		n, err := cq.Poll(wc)
		if n > 0 || err != nil {
			return n, err
		}
		if !armed {
			if err := cq.RequestNotify(false); err != nil {
				return 0, err
			}
			armed = true
			continue
		}
		got, err := ch.Wait(ctx)
		if err != nil {
			return 0, err
		}
		got.AckEvents(1)
		if got == cq {
			armed = false // the event disarmed it
		}
	}
}
