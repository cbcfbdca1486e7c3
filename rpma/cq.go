package rpma

import (
	"context"
	"errors"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// CQ is a completion queue of a connection or an SRQ (struct rpma_cq),
// with the completion channel it reports on: its own, or the one its
// connection's CQs share (ConnCfg.SetCompletionChannel).
//
// A connection's CQs belong to the goroutine that uses the connection
// (they take no lock); an SRQ's receive CQ is safe for concurrent use.
type CQ struct {
	cq     *uverbs.CQ
	ch     *uverbs.CompChannel
	shared bool // ch is shared with another CQ: wait on the connection
	// id is the connection's rdma_cm ID when the connection is over
	// iWARP: waits watch its DISCONNECTED too (waitChannel).
	id *rdmacm.ID
}

// newCQ creates a CQ of size entries reporting on ch, or on a channel of
// its own when ch is nil, and arms it.
func newCQ(op string, ctx *uverbs.Context, size uint32, ch *uverbs.CompChannel, td *uverbs.TD) (*CQ, error) {
	if size < 1 || size > 1<<31-1 {
		return nil, invalid(op, "CQ size %d: must be 1 to 2^31-1", size)
	}
	c := &CQ{ch: ch, shared: ch != nil}
	if ch == nil {
		var err error
		if c.ch, err = ctx.CreateCompChannel(); err != nil {
			return nil, provider(op, err)
		}
	}
	var err error
	c.cq, err = ctx.CreateCQ(uverbs.CQConfig{Size: int(size), Channel: c.ch, TD: td})
	if err == nil {
		if err = c.cq.RequestNotify(false); err != nil {
			c.cq.Close()
		}
	}
	if err != nil {
		if !c.shared {
			c.ch.Close()
		}
		return nil, provider(op, err)
	}
	return c, nil
}

// close destroys the CQ and, unless it is shared, its channel.
func (c *CQ) close() error {
	if c == nil {
		return nil
	}
	err := c.cq.Close()
	if !c.shared {
		err = errors.Join(err, c.ch.Close())
	}
	return err
}

// Fd is the completion channel's file descriptor (rpma_cq_get_fd),
// readable when Wait would not block, for epoll-style loops. Valid
// until the CQ's owner closes.
func (c *CQ) Fd() int { return c.ch.Fd() }

// Verbs is the uverbs CQ underneath.
func (c *CQ) Verbs() *uverbs.CQ { return c.cq }

// Wait blocks until the CQ has a completion event, acknowledges it and
// arms the CQ again (rpma_cq_wait); then GetWC the completions. A CQ
// whose channel is shared fails with ErrSharedChannel: wait with
// Conn.Wait. ctx ending returns ctx.Err(). On a connection over iWARP
// the wait watches the connection too: once it ended (the peer
// disconnected or went away) and the CQ has no completion event, Wait
// fails with an error matching ErrNoCompletion and
// rdmacm.ErrDisconnected, since a request posted after the end would
// never complete there (docs/providers.md, "siw").
func (c *CQ) Wait(ctx context.Context) error {
	const op = "cq wait"
	if c == nil {
		return invalid(op, "nil CQ")
	}
	if ctx == nil {
		return invalid(op, "nil context")
	}
	if c.shared {
		return newErr(op, ErrSharedChannel, nil)
	}
	if _, err := waitChannel(ctx, c.id, c.ch); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return err
		}
		return newErr(op, ErrNoCompletion, err)
	}
	return c.rearm(op)
}

// waitChannel waits for ch's next completion event. With id (a
// connection over iWARP) it watches the connection's DISCONNECTED too:
// on iWARP a request posted after the connection ended never completes
// (docs/providers.md, "siw"), so once it ended and ch has no event the
// wait fails with an error matching rdmacm.ErrDisconnected instead of
// waiting for ever.
func waitChannel(ctx context.Context, id *rdmacm.ID, ch *uverbs.CompChannel) (*uverbs.CQ, error) {
	if id != nil {
		return id.WaitCompChannel(ctx, ch)
	}
	return ch.Wait(ctx)
}

func (c *CQ) rearm(op string) error {
	c.cq.AckEvents(1)
	if err := c.cq.RequestNotify(false); err != nil {
		return provider(op, err)
	}
	return nil
}

// GetWC takes up to len(wc) completions (rpma_cq_get_wc) and returns
// how many. None yet is ErrNoCompletion. Each completion's WRID is the
// op context given to the operation; a completion whose Status is not
// success is described by CompletionErr.
func (c *CQ) GetWC(wc []uverbs.WorkCompletion) (int, error) {
	if c == nil || len(wc) == 0 {
		return 0, errGetWCInvalid
	}
	n, err := c.cq.Poll(wc)
	if err != nil {
		return n, provider("cq get wc", err)
	}
	if n == 0 {
		return 0, errNoCompletion
	}
	return n, nil
}

// WaitWC returns completions, waiting for them when the CQ has none:
// it takes up to len(wc) of them, as GetWC does, and while there are
// none it waits for the CQ's completion event, as Wait does, and tries
// again. It returns how many it took, at least one; each is described
// as for GetWC. When completions are waiting it is GetWC: no system
// call, no allocation. When ctx ends first the error matches both
// ErrNoCompletion and ctx.Err(); when an iWARP connection ended and no
// completion is left, ErrNoCompletion and rdmacm.ErrDisconnected (as for
// Wait). A CQ whose channel is shared fails at
// once with ErrSharedChannel, as Wait does: wait with Conn.Wait.
//
// This is the loop librpma's examples write around rpma_cq_wait and
// rpma_cq_get_wc, with a context.
func (c *CQ) WaitWC(ctx context.Context, wc []uverbs.WorkCompletion) (int, error) {
	const op = "cq wait wc"
	if c == nil || len(wc) == 0 {
		return 0, errWaitWCInvalid
	}
	if ctx == nil {
		return 0, invalid(op, "nil context")
	}
	if c.shared {
		return 0, newErr(op, ErrSharedChannel, nil)
	}
	for {
		n, err := c.cq.Poll(wc)
		if err != nil {
			return n, provider(op, err)
		}
		if n > 0 {
			return n, nil
		}
		// The CQ is armed (newCQ, and every wait, arm it), so a
		// completion after the poll sends an event.
		if _, err := waitChannel(ctx, c.id, c.ch); err != nil {
			return 0, newErr(op, ErrNoCompletion, err)
		}
		if err := c.rearm(op); err != nil {
			return 0, err
		}
	}
}

// Preallocated: a loop polling an empty CQ allocates nothing.
var (
	errNoCompletion  = &Error{Op: "cq get wc", Class: ErrNoCompletion}
	errGetWCInvalid  = &Error{Op: "cq get wc", Class: ErrInvalid, Err: errors.New("nil CQ or empty slice")}
	errWaitWCInvalid = &Error{Op: "cq wait wc", Class: ErrInvalid, Err: errors.New("nil CQ or empty slice")}
)
