package uverbs

import "fmt"

// An address on a RoCE port is an IP address, carried in the global
// route header: the kernel refuses an address vector without one
// (rdma_check_ah_attr: a RoCE port, or a port that reports GRH_REQUIRED,
// and no IB_AH_GRH) with a bare EINVAL. QP.Modify and CreateAH check it
// first and say what to set.

// portRoute is what the GRH check needs of a port: whether it requires
// a GRH in every address (IBV_QPF_GRH_REQUIRED, which the kernel sets
// for RoCE ports and for InfiniBand ports that need one) and its link
// layer, for the message. Neither changes while the device exists, so
// each context asks once per port.
type portRoute struct {
	grh       bool
	linkLayer LinkLayer
}

// portRoute returns the port's answer, querying the port the first
// time. A query that fails is not cached.
func (c *Context) portRoute(port int) (portRoute, error) {
	if v, ok := c.ports.Load(port); ok {
		return v.(portRoute), nil
	}
	pa, err := c.QueryPort(port)
	if err != nil {
		return portRoute{}, err
	}
	r := portRoute{grh: pa.GRHRequired, linkLayer: pa.LinkLayer}
	c.ports.Store(port, r)
	return r, nil
}

// portIsEthernet reports whether the port's link layer is Ethernet
// (RoCE), from the same answer; a failed query is the error.
func (c *Context) portIsEthernet(port int) (bool, error) {
	r, err := c.portRoute(port)
	return r.linkLayer == LinkLayerEthernet, err
}

// checkGRH refuses the address a (the field named field of op's
// arguments, "AHAttr") when it has no GRH and its port requires one,
// before the kernel call, with an error matching EINVAL. The port number
// must have been checked.
func (c *Context) checkGRH(op, field string, a *AHAttr) error {
	if a.IsGlobal {
		if i := a.GRH.SGIDIndex; i < 0 || i > 0xff {
			return fmt.Errorf("uverbs %s: %s.GRH.SGIDIndex %d: a GID index is 0 to 255: %w", op, field, i, errInvalid)
		}
		return nil
	}
	// A port that cannot be queried is not checked: the kernel decides.
	r, err := c.portRoute(a.PortNum)
	if err != nil || !r.grh {
		return nil
	}
	why := "requires a global route header in every address (GRH_REQUIRED)"
	if r.linkLayer == LinkLayerEthernet {
		why = "is RoCE (link layer Ethernet), where every address is global: the GRH carries the IP addresses"
	}
	return fmt.Errorf("uverbs %s: %s.IsGlobal is false, but port %s %s; set %[2]s.IsGlobal and %[2]s.GRH: "+
		"DGID (the peer's GID), SGIDIndex (the local GID to send from, e.g. Context.RoCEv2GIDIndex of the local address) "+
		"and HopLimit (e.g. 64): %[5]w", op, field, c.portName(a.PortNum), why, errInvalid)
}
