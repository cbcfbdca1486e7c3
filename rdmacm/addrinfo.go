package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/purerdma/rdma/uverbs"
)

// AddrInfoFlags tune GetAddrInfo (RAI_*).
type AddrInfoFlags uint32

const (
	// Passive resolves the address to bind a listener to: a missing
	// node is the unspecified address (RAI_PASSIVE).
	Passive AddrInfoFlags = 1 << 0
	// NumericHost takes the node as a numeric address only, with no
	// name lookup (RAI_NUMERICHOST).
	NumericHost AddrInfoFlags = 1 << 1
)

// AddrInfoHints narrow GetAddrInfo's answer (the hints of
// rdma_getaddrinfo). The zero value means: active side, any address
// family, PortSpaceTCP.
type AddrInfoHints struct {
	Flags AddrInfoFlags
	// Network is "ip" (or ""), "ip4" or "ip6": the address families to
	// return.
	Network string
	// PortSpace is the port space, and with it the QP type; 0 means
	// PortSpaceTCP.
	PortSpace PortSpace
	// Src is copied to each active answer's Src: the source address
	// to resolve from.
	Src netip.AddrPort
}

// AddrInfo is one answer of GetAddrInfo (struct rdma_addrinfo): what
// CreateEP needs to make an endpoint.
type AddrInfo struct {
	Flags     AddrInfoFlags // Passive for an address to bind to
	PortSpace PortSpace
	QPType    uverbs.QPType
	// Src is the address to bind to (passive), or the source address
	// to resolve from (active; the zero AddrPort for routing's choice).
	Src netip.AddrPort
	// Dst is the destination (active); the zero AddrPort when passive.
	Dst netip.AddrPort
}

// GetAddrInfo resolves a node (a host name or numeric address) and a
// service (a port number or a service name) to RDMA addresses
// (rdma_getaddrinfo), in the resolver's order of preference. For the
// active side each answer has Dst set; with the Passive flag, Src, and
// an empty node gives the unspecified addresses, to listen on every
// device. An empty node on the active side means the loopback address,
// as getaddrinfo does. Names are looked up with net.DefaultResolver.
func GetAddrInfo(ctx context.Context, node, service string, hints *AddrInfoHints) ([]AddrInfo, error) {
	var h AddrInfoHints
	if hints != nil {
		h = *hints
	}
	if node == "" && service == "" && hints == nil {
		return nil, fmt.Errorf("rdmacm GetAddrInfo: no node, service or hints: %w", errInvalid)
	}
	if h.PortSpace == 0 {
		h.PortSpace = PortSpaceTCP
	}
	if h.PortSpace != PortSpaceTCP && h.PortSpace != PortSpaceUDP {
		return nil, fmt.Errorf("rdmacm GetAddrInfo: port space %v: %w", h.PortSpace, ErrNotSupported)
	}
	want4, want6 := true, true
	switch h.Network {
	case "", "ip":
	case "ip4":
		want6 = false
	case "ip6":
		want4 = false
	default:
		return nil, fmt.Errorf("rdmacm GetAddrInfo: network %q (ip, ip4 or ip6): %w", h.Network, errInvalid)
	}
	port, err := lookupPort(ctx, service, h.PortSpace)
	if err != nil {
		return nil, fmt.Errorf("rdmacm GetAddrInfo %q: %w", service, err)
	}
	var addrs []netip.Addr
	switch {
	case node == "":
		if h.Flags&Passive != 0 {
			addrs = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
		} else {
			addrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
		}
	default:
		a, perr := netip.ParseAddr(node)
		switch {
		case perr == nil:
			addrs = []netip.Addr{a.Unmap()}
		case h.Flags&NumericHost != 0:
			return nil, fmt.Errorf("rdmacm GetAddrInfo: %q is not a numeric address: %w", node, errInvalid)
		default:
			network := "ip"
			if !want4 {
				network = "ip6"
			} else if !want6 {
				network = "ip4"
			}
			if addrs, err = net.DefaultResolver.LookupNetIP(ctx, network, node); err != nil {
				return nil, fmt.Errorf("rdmacm GetAddrInfo: %w", err)
			}
		}
	}
	var out []AddrInfo
	for _, a := range addrs {
		a = a.Unmap()
		if (a.Is4() && !want4) || (a.Is6() && !want6) {
			continue
		}
		ai := AddrInfo{PortSpace: h.PortSpace, QPType: h.PortSpace.QPType()}
		if h.Flags&Passive != 0 {
			ai.Flags = Passive
			ai.Src = netip.AddrPortFrom(a, port)
		} else {
			ai.Src = h.Src
			ai.Dst = netip.AddrPortFrom(a, port)
		}
		out = append(out, ai)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rdmacm GetAddrInfo %q: no %s address: %w", node, h.Network, errNoAddress)
	}
	return out, nil
}

var errNoAddress = errors.New("no address")

// lookupPort turns a service into a port: a number, or a name from the
// services database for the port space's protocol.
func lookupPort(ctx context.Context, service string, ps PortSpace) (uint16, error) {
	if service == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(service, 10, 16); err == nil {
		return uint16(n), nil
	}
	network := "tcp"
	if ps == PortSpaceUDP {
		network = "udp"
	}
	p, err := net.DefaultResolver.LookupPort(ctx, network, service)
	if err != nil {
		return 0, err
	}
	return uint16(p), nil
}

// CreateEP creates an endpoint for one GetAddrInfo answer
// (rdma_create_ep): an ID with its own channel, so that the blocking
// calls work on it. For a Passive answer the ID is bound to ai.Src: call
// Listen and GetRequest; with qp, each request's new ID comes with its
// QP. Otherwise the address and route to ai.Dst are resolved (the
// kernel's timeouts from ctx, see DefaultResolveTimeout) and, with qp,
// the QP created: call ConnectContext. qp may be nil.
func CreateEP(ctx context.Context, ai *AddrInfo, qp *QPOptions) (*ID, error) {
	if ai == nil {
		return nil, fmt.Errorf("rdmacm CreateEP: no address: %w", errInvalid)
	}
	ps := ai.PortSpace
	if ps == 0 {
		ps = PortSpaceTCP
	}
	id, err := CreateID(nil, ps)
	if err != nil {
		return nil, err
	}
	if err := id.setupEP(ctx, ai, qp); err != nil {
		id.Close()
		return nil, err
	}
	return id, nil
}

func (id *ID) setupEP(ctx context.Context, ai *AddrInfo, qp *QPOptions) error {
	if ai.Flags&Passive != 0 {
		if err := id.Bind(ai.Src); err != nil {
			return err
		}
		if qp != nil {
			t := *qp
			id.mu.Lock()
			id.ep.template = &t
			id.mu.Unlock()
		}
		return nil
	}
	if err := id.Resolve(ctx, ai.Src, ai.Dst); err != nil {
		return err
	}
	if qp != nil {
		if _, err := id.CreateQP(qp.PD, qp.Config); err != nil {
			return err
		}
	}
	return nil
}
