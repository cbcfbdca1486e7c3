package rpma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// ConnEvent is a connection's event (enum rpma_conn_event).
type ConnEvent int

// The connection events.
const (
	ConnUndefined   ConnEvent = -1 // RPMA_CONN_UNDEFINED
	ConnEstablished ConnEvent = 0  // the connection is up
	ConnClosed      ConnEvent = 1  // the other side disconnected, or this side did
	ConnLost        ConnEvent = 2  // the connection failed or its device went away
	ConnRejected    ConnEvent = 3  // the other side rejected the request
	ConnUnreachable ConnEvent = 4  // the other side did not answer
)

// String is librpma's description (rpma_utils_conn_event_2str).
func (e ConnEvent) String() string {
	switch e {
	case ConnUndefined:
		return "Undefined connection event"
	case ConnEstablished:
		return "Connection established"
	case ConnClosed:
		return "Connection closed"
	case ConnLost:
		return "Connection lost"
	case ConnRejected:
		return "Connection rejected"
	case ConnUnreachable:
		return "Connection unreachable"
	}
	return "Unknown connection event"
}

// Conn is a connection (struct rpma_conn): the remote memory operations,
// messaging, its CQs and its events.
//
// A Conn belongs to one goroutine at a time, as in librpma: its
// operations, CQ polling and Close take no lock (the QP and CQs are in
// a uverbs thread domain) and reuse one work request, so posting
// allocates nothing. Hand it to another goroutine with the usual
// happens-before (a channel send). Many goroutines, each with its own
// Conn on one shared Peer, is the intended shape.
type Conn struct {
	peer *Peer
	id   *rdmacm.ID
	res  *connResources
	qp   *uverbs.QP
	data []byte

	flushBuf *uverbs.Buffer // read-after-write target [0:8], atomic-write source [8:16]
	flushMR  *uverbs.MR
	// flushAddr and flushLKey are flushMR's, for an emulated flush's SGE.
	flushAddr uint64
	flushLKey uint32

	direct       atomic.Bool // the remote peer writes to PMem directly
	remoteNative atomic.Bool // the remote peer's regions take native FLUSH
	remoteAtomic atomic.Bool // the remote peer's device executes ATOMIC_WRITE

	closed atomic.Bool
	iwarp  bool // the connection is over iWARP: waits watch its DISCONNECTED

	swr  uverbs.SendWR
	rwr  uverbs.RecvWR
	sge  [1]uverbs.SGE
	rsge [1]uverbs.SGE
}

const flushBufSize = 16

func newConn(op string, r *ConnReq) (*Conn, error) {
	c := &Conn{peer: r.peer, id: r.id, res: r.res, qp: r.res.qp}
	if d, ok := r.id.Device(); ok && d.Transport == uverbs.TransportIWARP {
		// Waits on the connection's CQs watch its DISCONNECTED
		// (waitChannel). An SRQ's receive CQ is not the connection's.
		c.iwarp = true
		c.res.cq.id = r.id
		if c.res.rcq != nil {
			c.res.rcq.id = r.id
		}
	}
	var err error
	if c.flushBuf, err = uverbs.AllocBuffer(flushBufSize); err != nil {
		return nil, provider(op, err)
	}
	if c.flushMR, err = r.peer.pd.RegMR(c.flushBuf.Bytes()[:8], uverbs.AccessLocalWrite); err != nil {
		c.flushBuf.Close()
		return nil, provider(op, err)
	}
	c.flushAddr, c.flushLKey = c.flushMR.Addr(), c.flushMR.LKey()
	return c, nil
}

// Close tears the connection down (rpma_conn_delete): its QP, CQs,
// channels and flush buffer. Disconnect first for an orderly close. A
// second Close returns an error matching uverbs.ErrClosed.
func (c *Conn) Close() error {
	const op = "conn delete"
	if c == nil {
		return invalid(op, "nil connection")
	}
	if !c.closed.CompareAndSwap(false, true) {
		return newErr(op, ErrInvalid, uverbs.ErrClosed)
	}
	err := errors.Join(c.flushMR.Close(), c.flushBuf.Close(), c.id.Close(), c.res.close())
	if err != nil {
		return provider(op, err)
	}
	return nil
}

// Disconnect starts an orderly disconnect (rpma_conn_disconnect): both
// sides get ConnClosed from NextEvent, and operations still queued
// complete with a flush error.
func (c *Conn) Disconnect() error {
	if err := c.alive("conn disconnect"); err != nil {
		return err
	}
	if err := c.id.Disconnect(); err != nil {
		return provider("conn disconnect", err)
	}
	logf(LogNotice, "Requesting for disconnection")
	return nil
}

func (c *Conn) alive(op string) error {
	if c != nil && !c.closed.Load() {
		return nil
	}
	return c.dead(op)
}

// dead is alive's error, out of line so that alive inlines into the
// operations.
func (c *Conn) dead(op string) error {
	if c == nil {
		return invalid(op, "nil connection")
	}
	return newErr(op, ErrInvalid, uverbs.ErrClosed)
}

// NextEvent waits for the connection's next event (rpma_conn_next_event).
// The first ESTABLISHED keeps the other side's private data
// (PrivateData). When ctx ends first the error matches both ErrNoEvent
// and ctx.Err(); an rdma_cm event librpma has no name for is ErrUnknown.
func (c *Conn) NextEvent(ctx context.Context) (ConnEvent, error) {
	const op = "conn next event"
	if err := c.alive(op); err != nil {
		return ConnUndefined, err
	}
	if ctx == nil {
		return ConnUndefined, invalid(op, "nil context")
	}
	ev, err := c.id.Channel().Next(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return ConnUndefined, newErr(op, ErrNoEvent, err)
		}
		return ConnUndefined, provider(op, err)
	}
	var e ConnEvent
	switch ev.Type {
	case rdmacm.EventEstablished:
		e = ConnEstablished
		if c.data == nil && ev.PrivateData != nil {
			c.data = ev.PrivateData
		}
	case rdmacm.EventConnectError, rdmacm.EventDeviceRemoval:
		e = ConnLost
	case rdmacm.EventDisconnected, rdmacm.EventTimewaitExit:
		e = ConnClosed
	case rdmacm.EventRejected:
		e = ConnRejected
	case rdmacm.EventUnreachable:
		e = ConnUnreachable
	default:
		logf(LogWarning, "%s: %v", ConnUndefined, ev)
		return ConnUndefined, newErr(op, ErrUnknown, fmt.Errorf("rdma_cm event %v", ev.Type))
	}
	logf(LogNotice, "%s", e)
	return e, nil
}

// EventFd is the file descriptor of the connection's event channel
// (rpma_conn_get_event_fd), readable when NextEvent would not block.
func (c *Conn) EventFd() int { return c.id.Channel().Fd() }

// PrivateData is the other side's private data (rpma_conn_get_private_data):
// from the request on the accepting side, from ESTABLISHED on the
// connecting side (after NextEvent reported it). The InfiniBand CM
// carries fixed-size fields, so short data arrives padded with zeros.
func (c *Conn) PrivateData() []byte { return c.data }

// ApplyRemotePeerCfg takes the other side's configuration
// (rpma_conn_apply_remote_peer_cfg): whether it writes to PMem directly,
// which FlushPersistent needs, whether its regions take native FLUSH,
// which FlushAuto looks at, and whether its device executes native
// ATOMIC_WRITE, which AtomicWrite needs to post one.
func (c *Conn) ApplyRemotePeerCfg(pcfg *PeerCfg) error {
	const op = "conn apply remote peer cfg"
	if err := c.alive(op); err != nil {
		return err
	}
	if pcfg == nil {
		return invalid(op, "nil peer configuration")
	}
	c.direct.Store(pcfg.DirectWriteToPMem())
	c.remoteNative.Store(pcfg.NativeFlush())
	c.remoteAtomic.Store(pcfg.NativeAtomicWrite())
	return nil
}

// QPNum is the connection's QP number (rpma_conn_get_qp_num).
func (c *Conn) QPNum() uint32 { return c.qp.Num() }

// CQ is the main CQ (rpma_conn_get_cq): sends, and receives when there
// is no receive CQ.
func (c *Conn) CQ() *CQ { return c.res.cq }

// RCQ is the receive CQ, nil without one (rpma_conn_get_rcq). With an
// SRQ that has its own receive CQ, receives complete there (SRQ.RCQ).
func (c *Conn) RCQ() *CQ { return c.res.rcq }

// CompletionFd is the shared completion channel's file descriptor
// (rpma_conn_get_compl_fd); without a shared channel it fails with
// ErrNotSharedChannel.
func (c *Conn) CompletionFd() (int, error) {
	if c.res.ch == nil {
		return -1, newErr("conn get compl fd", ErrNotSharedChannel, nil)
	}
	return c.res.ch.Fd(), nil
}

// Wait blocks until the CQ or the receive CQ has a completion event on
// the shared channel, acknowledges it, arms that CQ again and returns it
// (rpma_conn_wait); isRCQ says which. Without a shared channel it fails
// with ErrNotSharedChannel. When ctx ends first the error matches both
// ErrNoCompletion and ctx.Err(); on iWARP, once the connection ended
// and no completion event is left, ErrNoCompletion and
// rdmacm.ErrDisconnected (as for CQ.Wait).
func (c *Conn) Wait(ctx context.Context) (cq *CQ, isRCQ bool, err error) {
	const op = "conn wait"
	if err := c.alive(op); err != nil {
		return nil, false, err
	}
	if ctx == nil {
		return nil, false, invalid(op, "nil context")
	}
	if c.res.ch == nil {
		return nil, false, newErr(op, ErrNotSharedChannel, nil)
	}
	var id *rdmacm.ID
	if c.iwarp {
		id = c.id
	}
	got, err := waitChannel(ctx, id, c.res.ch)
	if err != nil {
		return nil, false, newErr(op, ErrNoCompletion, err)
	}
	switch {
	case got == c.res.cq.cq:
		cq = c.res.cq
	case c.res.rcq != nil && got == c.res.rcq.cq:
		cq, isRCQ = c.res.rcq, true
	default:
		return nil, false, newErr(op, ErrUnknown, errors.New("an event for a CQ of another connection"))
	}
	if err := cq.rearm(op); err != nil {
		return nil, false, err
	}
	return cq, isRCQ, nil
}

// ID is the rdma_cm ID underneath.
func (c *Conn) ID() *rdmacm.ID { return c.id }

// QP is the uverbs QP underneath.
func (c *Conn) QP() *uverbs.QP { return c.qp }
