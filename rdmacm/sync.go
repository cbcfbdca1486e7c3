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
// When ctx ends first they return ctx.Err(); the step goes on in the
// kernel and its event stays on the channel, so the ID is then best
// closed. The kernel's timeout of a resolution is what is left of ctx's
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

// await waits for the ID's next event on its private channel and checks
// it is want (or, when alt is not want, alt).
func (id *ID) await(ctx context.Context, op string, want, alt EventType) (*Event, error) {
	ev, err := id.nextOwn(ctx, op)
	if err != nil {
		return nil, err
	}
	if (ev.Type != want && ev.Type != alt) || ev.Status != 0 {
		return ev, &EventError{Op: op, Want: want, Event: ev}
	}
	return ev, nil
}

func (id *ID) nextOwn(ctx context.Context, op string) (*Event, error) {
	id.mu.Lock()
	own := id.own
	id.mu.Unlock()
	if own == nil {
		return nil, opError(op, id.handle, fmt.Errorf("a blocking call needs an ID with its own channel (CreateID with a nil channel): %w", errInvalid))
	}
	ev, err := own.Next(ctx)
	if err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return nil, err
		}
		return nil, opError(op, id.handle, err)
	}
	return ev, nil
}

// checkOwn fails at once, before the step starts, for an ID without a
// private channel.
func (id *ID) checkOwn(op string) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.own == nil {
		return opError(op, id.handle, fmt.Errorf("a blocking call needs an ID with its own channel (CreateID with a nil channel): %w", errInvalid))
	}
	return nil
}

// ResolveAddrContext resolves dst and binds the ID to the device that
// reaches it, as ResolveAddr, and waits for ADDR_RESOLVED.
func (id *ID) ResolveAddrContext(ctx context.Context, src, dst netip.AddrPort) error {
	const op = "resolve address"
	if err := id.checkOwn(op); err != nil {
		return err
	}
	if err := id.ResolveAddr(src, dst, resolveTimeout(ctx)); err != nil {
		return err
	}
	_, err := id.await(ctx, op, EventAddrResolved, EventAddrResolved)
	return err
}

// ResolveRouteContext resolves the route, as ResolveRoute, and waits for
// ROUTE_RESOLVED.
func (id *ID) ResolveRouteContext(ctx context.Context) error {
	const op = "resolve route"
	if err := id.checkOwn(op); err != nil {
		return err
	}
	if err := id.ResolveRoute(resolveTimeout(ctx)); err != nil {
		return err
	}
	_, err := id.await(ctx, op, EventRouteResolved, EventRouteResolved)
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
	const op = "connect"
	if err := id.checkOwn(op); err != nil {
		return nil, err
	}
	if err := id.Connect(p); err != nil {
		return nil, err
	}
	alt := EventEstablished
	if id.ps == PortSpaceTCP && !id.hasQP() {
		alt = EventConnectResponse
	}
	return id.await(ctx, op, EventEstablished, alt)
}

// GetRequest waits for the next connection request of a listening ID
// with its own channel (rdma_get_request) and returns its event. The
// event's ID is the new connection's ID, with a private channel of its
// own, and, for a listener from CreateEP with QPOptions, its QP.
func (id *ID) GetRequest(ctx context.Context) (*Event, error) {
	const op = "get request"
	if err := id.checkOwn(op); err != nil {
		return nil, err
	}
	return id.await(ctx, op, EventConnectRequest, EventConnectRequest)
}

// AcceptContext accepts, as Accept, and for PortSpaceTCP waits for
// ESTABLISHED, which it returns. For PortSpaceUDP no event follows an
// accept: it returns nil, nil.
func (id *ID) AcceptContext(ctx context.Context, p *ConnParam) (*Event, error) {
	const op = "accept"
	if err := id.checkOwn(op); err != nil {
		return nil, err
	}
	if err := id.Accept(p); err != nil {
		return nil, err
	}
	if id.ps == PortSpaceUDP {
		return nil, nil
	}
	return id.await(ctx, op, EventEstablished, EventEstablished)
}

// DisconnectContext disconnects, as Disconnect, and waits for
// DISCONNECTED.
func (id *ID) DisconnectContext(ctx context.Context) error {
	const op = "disconnect"
	if err := id.checkOwn(op); err != nil {
		return err
	}
	if err := id.Disconnect(); err != nil {
		return err
	}
	_, err := id.await(ctx, op, EventDisconnected, EventDisconnected)
	return err
}

// JoinMulticastContext joins a group, as JoinMulticast, and waits for
// MULTICAST_JOIN: it returns the group's UDParam.
func (id *ID) JoinMulticastContext(ctx context.Context, group netip.Addr, sendOnly bool) (*UDParam, error) {
	const op = "join multicast"
	if err := id.checkOwn(op); err != nil {
		return nil, err
	}
	if err := id.JoinMulticast(group, sendOnly); err != nil {
		return nil, err
	}
	ev, err := id.await(ctx, op, EventMulticastJoin, EventMulticastJoin)
	if err != nil {
		return nil, err
	}
	return ev.UD, nil
}
