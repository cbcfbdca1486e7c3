package rpma

import (
	"context"
	"fmt"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// Side says which address DeviceContext looks up (enum
// rpma_util_ibv_context_type).
type Side int

const (
	// Local: the device that holds addr, for a server to listen on
	// (RPMA_UTIL_IBV_CONTEXT_LOCAL).
	Local Side = iota
	// Remote: the device that reaches addr, for a client to connect
	// from (RPMA_UTIL_IBV_CONTEXT_REMOTE).
	Remote
)

// DeviceContext opens the RDMA device for an address
// (rpma_utils_get_ibv_context): the local device that has addr, or the
// device that routes to a remote addr. The caller owns the context:
// close it after the peers made on it.
//
// It waits at most DefaultTimeout, less when ctx's deadline is sooner.
// A remote address whose resolution fails is named with the step; when
// DefaultTimeout ends it, the error says so and matches ETIMEDOUT
// (class ErrProvider, as librpma's), not context.DeadlineExceeded,
// which means ctx's own deadline passed.
func DeviceContext(ctx context.Context, addr string, side Side) (*uverbs.Context, error) {
	const op = "utils get ibv context"
	if ctx == nil {
		return nil, invalid(op, "nil context")
	}
	if addr == "" {
		return nil, invalid(op, "empty address")
	}
	var hints *rdmacm.AddrInfoHints
	switch side {
	case Local:
		hints = &rdmacm.AddrInfoHints{Flags: rdmacm.Passive}
	case Remote:
	default:
		return nil, invalid(op, "side %d", int(side))
	}
	timer, rctx, cancel := newLibTimer(ctx, DefaultTimeout, "rpma.DefaultTimeout", "DeviceContext waits at most that long")
	defer cancel()
	ais, err := rdmacm.GetAddrInfo(rctx, addr, "", hints)
	if err != nil {
		return nil, timer.explain(op, "looking up "+addr, err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, provider(op, err)
	}
	defer id.Close()
	if side == Local {
		err = provider(op, id.Bind(ais[0].Src))
	} else if err = id.ResolveAddrContext(rctx, ais[0].Src, ais[0].Dst); err != nil {
		err = timer.explain(op, fmt.Sprintf("address resolution of %v", ais[0].Dst.Addr()), err)
	}
	if err != nil {
		return nil, err
	}
	dev, ok := id.Device()
	if !ok {
		return nil, invalid(op, "%s is not an address of an RDMA device", addr)
	}
	c, err := dev.Open(nil)
	if err != nil {
		return nil, provider(op, err)
	}
	return c, nil
}

// IsODPCapable reports whether the device supports on-demand paging for
// RDMA read and write on RC connections
// (rpma_utils_ibv_context_is_odp_capable).
func IsODPCapable(c *uverbs.Context) (bool, error) {
	const op = "utils ibv context is odp capable"
	if c == nil {
		return false, invalid(op, "nil device context")
	}
	attr, err := c.QueryDevice()
	if err != nil {
		return false, provider(op, err)
	}
	return odpCapable(&attr), nil
}
