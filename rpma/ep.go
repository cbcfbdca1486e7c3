package rpma

import (
	"context"
	"errors"
	"net/netip"

	"github.com/purerdma/rdma/rdmacm"
)

// Ep is a listening endpoint (struct rpma_ep): it takes incoming
// connection requests on one address and port. Its methods are safe for
// concurrent use; NextConnReq admits one waiter at a time (a second
// fails at once with ErrAgain).
type Ep struct {
	peer *Peer
	id   *rdmacm.ID
	addr netip.AddrPort
}

// Listen starts listening on addr and port (rpma_ep_listen): addr is a
// host name or a numeric address of a local RDMA device, port a number
// or a service name (0 picks a free port; see Addr). ctx bounds the
// name lookup.
func (p *Peer) Listen(ctx context.Context, addr, port string) (*Ep, error) {
	const op = "ep listen"
	if err := p.checkAddr(op, ctx, addr, port); err != nil {
		return nil, err
	}
	ais, err := rdmacm.GetAddrInfo(ctx, addr, port, &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		return nil, provider(op, err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, provider(op, err)
	}
	if err := id.Bind(ais[0].Src); err != nil {
		id.Close()
		return nil, provider(op, err)
	}
	if err := id.Listen(0); err != nil {
		id.Close()
		return nil, provider(op, err)
	}
	la, err := id.LocalAddr()
	if err != nil {
		id.Close()
		return nil, provider(op, err)
	}
	logf(LogNotice, "Waiting for incoming connection on %s:%s", addr, port)
	return &Ep{peer: p, id: id, addr: la}, nil
}

// Addr is the address and port the endpoint listens on.
func (e *Ep) Addr() netip.AddrPort { return e.addr }

// Fd is the file descriptor of the endpoint's event channel
// (rpma_ep_get_fd): readable when NextConnReq would not block.
func (e *Ep) Fd() int { return e.id.Channel().Fd() }

// Close stops listening (rpma_ep_shutdown). Requests taken with
// NextConnReq live on; a NextConnReq blocked in another goroutine
// returns an error matching uverbs.ErrClosed.
func (e *Ep) Close() error {
	if e == nil {
		return invalid("ep shutdown", "nil endpoint")
	}
	if err := e.id.Close(); err != nil {
		return provider("ep shutdown", err)
	}
	return nil
}

// NextConnReq waits for the next connection request and prepares it
// (rpma_ep_next_conn_req): its CQs and QP, configured by cfg (nil for
// the defaults). Accept it with ConnReq.Connect, refuse it with
// ConnReq.Close. When ctx ends first the error matches both
// ErrNoEvent and ctx.Err().
func (e *Ep) NextConnReq(ctx context.Context, cfg *ConnCfg) (*ConnReq, error) {
	const op = "ep next conn req"
	if e == nil {
		return nil, invalid(op, "nil endpoint")
	}
	if ctx == nil {
		return nil, invalid(op, "nil context")
	}
	if err := e.peer.alive(op); err != nil {
		return nil, err
	}
	ev, err := e.id.GetRequest(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, newErr(op, ErrNoEvent, err)
		}
		if ev != nil && ev.ID != nil && ev.Type == rdmacm.EventConnectRequest {
			ev.ID.Reject(nil)
			ev.ID.Close()
		}
		return nil, busyOr(op, err)
	}
	req, err := newConnReq(op, e.peer, ev.ID, cfg, true)
	if err != nil {
		ev.ID.Reject(nil)
		ev.ID.Close()
		return nil, err
	}
	req.data = ev.PrivateData
	return req, nil
}
