package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// The blocking forms of the connection steps, librdmacm's synchronous
// mode: they need an ID with its own channel (CreateID with a nil
// channel, CreateEP, or GetRequest's new IDs), start the step, and wait
// on that channel for the event that ends it. Another event, or an
// error event, is returned as an *EventError.
//
// A step that cannot be waited for is not started: with ctx already
// done they return ctx.Err(), and with another goroutine waiting on the
// ID's channel (its own Next) an error matching ErrBusy, before any
// kernel call. When ctx ends during the wait they return ctx.Err() (the
// resolutions an error that matches it and names the address); the
// step goes on in the kernel and its event stays on the channel, so the
// ID is then best closed. The kernel's timeout of a resolution is what is left of ctx's
// deadline, or DefaultResolveTimeout without one.

// DefaultResolveTimeout is the resolution timeout of the blocking calls
// whose ctx has no deadline, as rdma_create_ep uses.
const DefaultResolveTimeout = 2 * time.Second

func resolveTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return DefaultResolveTimeout
}

// await waits on own, whose waiter slot the caller claimed (claimOwn),
// for the ID's next event and checks it is want (or, when alt is not
// want, alt); it releases the slot.
func (id *ID) await(ctx context.Context, own *EventChannel, op string, want, alt EventType) (*Event, error) {
	defer own.release()
	ev, err := own.next(ctx)
	if err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, err
		}
		return nil, opError(op, id.handle, err)
	}
	if (ev.Type != want && ev.Type != alt) || ev.Status != 0 {
		return ev, &EventError{Op: op, Want: want, Event: ev}
	}
	return ev, nil
}

// claimOwn returns the ID's private channel with its waiter slot held,
// before the step starts: an ID without one, or one whose channel
// another goroutine waits on (a Next of its own), fails at once and the
// step never runs. The caller releases the slot (await does).
func (id *ID) claimOwn(op string) (*EventChannel, error) {
	id.mu.Lock()
	own := id.own
	id.mu.Unlock()
	if own == nil {
		return nil, opError(op, id.handle, fmt.Errorf("a blocking call needs an ID with its own channel (CreateID with a nil channel): %w", errInvalid))
	}
	if err := own.claim(); err != nil {
		return nil, opError(op, id.handle, fmt.Errorf("not started: %w; call the step's non-blocking form (Connect, Accept, Disconnect, ...) and take its event from that Next", err))
	}
	return own, nil
}

// step runs a blocking step: it claims the private channel, starts the
// step with start, and waits for want or alt.
func (id *ID) step(ctx context.Context, op string, start func() error, want, alt EventType) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // before the step: it must not run
	}
	own, err := id.claimOwn(op)
	if err != nil {
		return nil, err
	}
	if err := start(); err != nil {
		own.release()
		return nil, err
	}
	return id.await(ctx, own, op, want, alt)
}

// ResolveAddrContext resolves dst and binds the ID to the device that
// reaches it, as ResolveAddr, and waits for ADDR_RESOLVED.
//
// A resolution that fails once started (this, ResolveRouteContext, and
// so Resolve and CreateEP) names the step and the address ("address
// resolution of 198.18.0.99:7471") and says why:
//   - the kernel's timer fired: "timed out: the kernel's timer of 2s
//     (DefaultResolveTimeout: ctx has no deadline) fired", an
//     ADDR_ERROR or ROUTE_ERROR event matching ETIMEDOUT; when the
//     timer was set from ctx's deadline, the error matches
//     context.DeadlineExceeded too, as when ctx itself ends first;
//   - ctx ended first: "did not finish by ctx's deadline", matching
//     ctx.Err();
//   - the address has no RDMA device (ENODEV: 127.0.0.1, an address on
//     a network interface without one): "no RDMA device on the netdev
//     of 127.0.0.1 (lo)", and which interfaces have one.
//
// An error event stays available with errors.As and *EventError.
func (id *ID) ResolveAddrContext(ctx context.Context, src, dst netip.AddrPort) error {
	r := newResolution(ctx, "ResolveAddrContext", "address resolution")
	_, err := id.step(ctx, r.op, func() error {
		r.ran = true
		return id.ResolveAddr(src, dst, r.timeout)
	}, EventAddrResolved, EventAddrResolved)
	return r.explain(ctx, id, dst, err)
}

// ResolveRouteContext resolves the route, as ResolveRoute, and waits for
// ROUTE_RESOLVED. A failure names the step and the destination and says
// why, as ResolveAddrContext's does.
func (id *ID) ResolveRouteContext(ctx context.Context) error {
	r := newResolution(ctx, "ResolveRouteContext", "route resolution")
	_, err := id.step(ctx, r.op, func() error {
		r.ran = true
		return id.ResolveRoute(r.timeout)
	}, EventRouteResolved, EventRouteResolved)
	if err != nil && r.ran {
		dst, _ := id.RemoteAddr()
		return r.explain(ctx, id, dst, err)
	}
	return err
}

// Resolve resolves dst's address and the route to it, the two steps
// before Connect (or before sending datagrams to a UD peer).
func (id *ID) Resolve(ctx context.Context, src, dst netip.AddrPort) error {
	if err := id.ResolveAddrContext(ctx, src, dst); err != nil {
		return err
	}
	return id.ResolveRouteContext(ctx)
}

// ConnectContext connects, as Connect, and waits for the connection: it
// returns the ESTABLISHED event, with the peer's private data (for
// PortSpaceUDP with the peer's UDParam), or for an ID without a QP from
// CreateQP the CONNECT_RESPONSE event (call Establish). A reject is an
// *EventError matching ErrRejected, whose event has the reason and the
// peer's private data.
func (id *ID) ConnectContext(ctx context.Context, p *ConnParam) (*Event, error) {
	alt := EventEstablished
	if id.ps == PortSpaceTCP && !id.hasQP() {
		alt = EventConnectResponse
	}
	return id.step(ctx, "ConnectContext", func() error { return id.Connect(p) }, EventEstablished, alt)
}

// GetRequest waits for the next connection request of a listening ID
// with its own channel (rdma_get_request) and returns its event. The
// event's ID is the new connection's ID, with a private channel of its
// own, and, for a listener from CreateEP with QPOptions, its QP.
func (id *ID) GetRequest(ctx context.Context) (*Event, error) {
	return id.step(ctx, "GetRequest", func() error { return nil }, EventConnectRequest, EventConnectRequest)
}

// AcceptContext accepts, as Accept, and for PortSpaceTCP waits for
// ESTABLISHED, which it returns. For PortSpaceUDP no event follows an
// accept: it returns nil, nil.
func (id *ID) AcceptContext(ctx context.Context, p *ConnParam) (*Event, error) {
	const op = "AcceptContext"
	if id.ps == PortSpaceUDP {
		own, err := id.claimOwn(op)
		if err != nil {
			return nil, err
		}
		defer own.release()
		return nil, id.Accept(p)
	}
	return id.step(ctx, op, func() error { return id.Accept(p) }, EventEstablished, EventEstablished)
}

// DisconnectContext disconnects, as Disconnect, and waits for
// DISCONNECTED. With another goroutine waiting on the ID's channel (a
// Next that watches for the peer's disconnect), it fails at once with an
// error matching ErrBusy and does not disconnect: call Disconnect and
// let that Next take the event.
func (id *ID) DisconnectContext(ctx context.Context) error {
	_, err := id.step(ctx, "DisconnectContext", id.Disconnect, EventDisconnected, EventDisconnected)
	return err
}

// JoinMulticastContext joins a group, as JoinMulticast, and waits for
// MULTICAST_JOIN: it returns the group's UDParam.
func (id *ID) JoinMulticastContext(ctx context.Context, group netip.Addr, sendOnly bool) (*UDParam, error) {
	ev, err := id.step(ctx, "JoinMulticastContext", func() error {
		return id.JoinMulticast(group, sendOnly)
	}, EventMulticastJoin, EventMulticastJoin)
	if err != nil {
		return nil, err
	}
	return ev.UD, nil
}
