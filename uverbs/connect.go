package uverbs

import (
	"fmt"
	"net/netip"
	"strings"
)

// RCPeer is the other end of an RC connection, as ConnectRC needs it:
// what the peer's program tells this one over a channel of their own
// (a TCP socket, a file, an rdmacm private data), as the manual's RC
// example exchanges QP number, LID and GID, and the verbs examples a
// PSN as well.
type RCPeer struct {
	QPNum uint32 // the peer's QP number (its QP.Num)
	// PSN is the first packet sequence number the peer's QP sends with
	// (its RCOptions.SQPSN): this QP's receive PSN. 24 bits.
	PSN uint32
	// GID is the peer's GID, the one its side sends from (for example
	// the GID of its Context.RoCEv2GID). On RoCE every address is
	// global and GID is required; on InfiniBand a non-zero GID makes
	// the address global (a GRH, for routing between subnets), and a
	// zero one addresses the peer by LID.
	GID GID
	LID uint16 // the peer port's LID: InfiniBand; 0 on RoCE
	// MTU, if set, is the peer port's active MTU: the path MTU is then
	// the lower of it and this port's (unless RCOptions.PathMTU is set).
	MTU MTU
}

// RCOptions are this side's choices for ConnectRC. A nil *RCOptions
// means DefaultRCOptions(); change a copy of the defaults rather than
// fill one from zero, in which a retry count, a timeout and the reads
// in flight of 0 mean what they say.
type RCOptions struct {
	// Port is the local port (1-based): the QP's in INIT and its
	// address's.
	Port int
	// Access is what the peer may do with this side's memory (the QP's
	// access flags, with each MR's own as a second gate). ConnectRC
	// sets it on the way from RESET to INIT; a QP already in INIT keeps
	// its own. AccessRemoteAtomic is left out on a device without
	// atomics (DeviceAttr.AtomicCap AtomicNone).
	Access Access
	// SGIDIndex is the index of the GID this side sends from
	// (GlobalRoute.SGIDIndex) when the address is global: 0 to 255, or
	// AutoGIDIndex, which picks the port's first RoCE v2 GID of the
	// peer's kind (IPv4, IPv6 link-local, or other IPv6), and index 0
	// on a port without RoCE v2 GIDs (InfiniBand).
	SGIDIndex int
	// HopLimit, TrafficClass and FlowLabel (20 bits) go in the global
	// route header.
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	SL           uint8 // service level
	// PathMTU is the path MTU; 0 means the port's active MTU, lowered
	// to RCPeer.MTU when the peer sent one.
	PathMTU MTU
	// SQPSN is the first packet sequence number this QP sends with:
	// the peer's RCPeer.PSN. 24 bits.
	SQPSN uint32
	// MaxRdAtomic is how many RDMA reads and atomics this QP may have
	// outstanding at the peer (the initiator depth), MaxDestRdAtomic how
	// many of the peer's this QP takes (the responder resources).
	// DeviceMaxRdAtomic means the device's limit (DeviceAttr's
	// MaxQPInitRdAtom and MaxQPRdAtom, at most 255).
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	// MinRNRTimer is the RNR NAK timer this QP asks a sender to wait
	// after finding no receive posted, as the IB table encodes it
	// (12: 0.64 ms; 0: 655 ms). 0 to 31.
	MinRNRTimer uint8
	// Timeout is the local ACK timeout as an exponent: a packet is sent
	// again after 4.096 µs * 2^Timeout without an acknowledgement (0:
	// never). 0 to 31.
	Timeout uint8
	// RetryCount (0 to 7) is how often an unacknowledged packet is sent
	// again before its work request fails with WCRetryExcErr; RNRRetry
	// (0 to 7, 7 for ever) how often a send is retried when the peer
	// has no receive posted.
	RetryCount uint8
	RNRRetry   uint8
}

// AutoGIDIndex in RCOptions.SGIDIndex lets ConnectRC pick the local GID.
const AutoGIDIndex = -1

// DeviceMaxRdAtomic in RCOptions.MaxRdAtomic or MaxDestRdAtomic asks for
// the device's limit.
const DeviceMaxRdAtomic = 0xff

// The defaults of DefaultRCOptions.
const (
	// DefaultRCTimeout: 4.096 µs * 2^17, about 0.54 s before a packet
	// is sent again (rdmacm's DefaultAckTimeout).
	DefaultRCTimeout = 17
	// DefaultRCRetryCount: a dead peer is reported after (6+1)
	// timeouts, about 3.8 s. 7 would be the largest count, but
	// soft-RoCE (rxe) takes it as "retry for ever" (docs/reliability.md).
	DefaultRCRetryCount = 6
	// DefaultRCMinRNRTimer: 0.64 ms, the manual's recommendation.
	DefaultRCMinRNRTimer = 12
	// DefaultRCHopLimit is the GRH's hop limit.
	DefaultRCHopLimit = 64
)

// DefaultRCOptions returns the options of a nil *RCOptions: port 1;
// remote writes, reads and atomics allowed; the GID picked
// (AutoGIDIndex); the path MTU from the ports; send PSN 0; the device's
// limits for reads and atomics in flight both ways; RNR retries for
// ever (a peer without a receive posted is alive) with
// DefaultRCMinRNRTimer; DefaultRCRetryCount retries after
// DefaultRCTimeout each; hop limit DefaultRCHopLimit.
func DefaultRCOptions() *RCOptions {
	return &RCOptions{
		Port:            1,
		Access:          AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
		SGIDIndex:       AutoGIDIndex,
		HopLimit:        DefaultRCHopLimit,
		MaxRdAtomic:     DeviceMaxRdAtomic,
		MaxDestRdAtomic: DeviceMaxRdAtomic,
		MinRNRTimer:     DefaultRCMinRNRTimer,
		Timeout:         DefaultRCTimeout,
		RetryCount:      DefaultRCRetryCount,
		RNRRetry:        7,
	}
}

// ConnectError is the error of a ConnectRC transition the kernel
// refused: which one, and so the state the QP stays in (From, the last
// one reached). It matches its cause with errors.Is.
type ConnectError struct {
	QPNum    uint32
	From, To QPState
	Err      error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("uverbs ConnectRC: QP %#x %v -> %v failed, the QP stays in %v: %v", e.QPNum, e.From, e.To, e.From, inner(e.Err))
}

func (e *ConnectError) Unwrap() error { return e.Err }

// ConnectRC connects an RC QP to peer: it moves it from RESET to INIT
// (a QP already in INIT, to have receives posted before the peer can
// send, starts there), to RTR towards the peer's QP and address, and
// to RTS, with opts (nil: DefaultRCOptions()). It is the three
// QP.Modify calls of the manual's RC example, with their masks; call
// Modify directly for anything else.
//
// The address is global (IsGlobal, a GRH from opts.SGIDIndex to
// peer.GID) on a port that requires one, as RoCE ports do, and
// whenever peer.GID is not zero; otherwise it is the peer's LID. Bad
// input, a peer without the address the port needs, and a QP that is
// not RC or not in RESET or INIT fail with an error matching EINVAL
// before any transition. A transition the kernel refuses is a
// *ConnectError naming it; the QP stays in the state the error names
// (ConnectRC does not move it back).
//
// Both sides call ConnectRC, each with the other's RCPeer; a side may
// send once its QP is in RTS, and the other's receives must be posted
// by then, or its sends wait for RNR retries.
//
// An iWARP QP (siw) is refused with an error matching ErrNotSupported:
// it reaches RTS only through the connection manager (package rdmacm).
func (qp *QP) ConnectRC(peer RCPeer, opts *RCOptions) error {
	if qp == nil {
		return errNil("ConnectRC", "QP")
	}
	if err := qp.alive("ConnectRC"); err != nil {
		return err
	}
	if qp.ctx.dev.Transport == TransportIWARP {
		// The kernel would take RTR and RTS by hand and leave the QP
		// with no connection: an iWARP QP's stream is the iWARP CM's.
		return fmt.Errorf("uverbs ConnectRC: QP %#x on %s: iWARP QPs reach RTS only through the connection manager (package rdmacm): %w",
			qp.num, qp.ctx.dev.Name, ErrNotSupported)
	}
	if opts == nil {
		opts = DefaultRCOptions()
	}
	o := *opts
	if err := qp.checkConnectRC(&peer, &o); err != nil {
		return fmt.Errorf("uverbs ConnectRC: QP %#x: %w", qp.num, inner(err))
	}
	c := qp.ctx
	pa, err := c.QueryPort(o.Port)
	if err != nil {
		return fmt.Errorf("uverbs ConnectRC: %w", inner(err))
	}
	ah := AHAttr{DLID: peer.LID, SL: o.SL, PortNum: o.Port}
	global := pa.GRHRequired || pa.LinkLayer == LinkLayerEthernet || !peer.GID.IsZero()
	if global {
		if peer.GID.IsZero() {
			return fmt.Errorf("uverbs ConnectRC: QP %#x: port %s is %v and needs the peer's GID (RCPeer.GID is zero): %w",
				qp.num, c.portName(o.Port), pa.LinkLayer, errInvalid)
		}
		idx := o.SGIDIndex
		if idx == AutoGIDIndex {
			if idx, err = c.sgidIndexFor(o.Port, peer.GID); err != nil {
				return fmt.Errorf("uverbs ConnectRC: QP %#x: picking the local GID (RCOptions.SGIDIndex): %w", qp.num, inner(err))
			}
		} else if !c.hasGID(o.Port, idx) {
			// The kernel would refuse RTR with a bare ENODATA.
			return fmt.Errorf("uverbs ConnectRC: QP %#x: RCOptions.SGIDIndex %d: port %s has no GID at that index "+
				"(Context.RoCEv2GID and RoCEv2GIDIndex find one): %w", qp.num, idx, c.portName(o.Port), errInvalid)
		}
		ah.IsGlobal = true
		ah.GRH = GlobalRoute{DGID: peer.GID, SGIDIndex: idx, HopLimit: o.HopLimit, TrafficClass: o.TrafficClass, FlowLabel: o.FlowLabel}
	} else if peer.LID == 0 {
		return fmt.Errorf("uverbs ConnectRC: QP %#x: the peer has neither a LID nor a GID (RCPeer.LID, RCPeer.GID): %w", qp.num, errInvalid)
	}
	if o.PathMTU == 0 {
		o.PathMTU = pa.ActiveMTU
		if peer.MTU != 0 {
			o.PathMTU = min(o.PathMTU, peer.MTU)
		}
	}
	state := qp.State()
	if o.MaxRdAtomic == DeviceMaxRdAtomic || o.MaxDestRdAtomic == DeviceMaxRdAtomic ||
		(state == QPStateReset && o.Access&AccessRemoteAtomic != 0) {
		da, err := c.QueryDevice()
		if err != nil {
			return fmt.Errorf("uverbs ConnectRC: %w", inner(err))
		}
		if o.MaxRdAtomic == DeviceMaxRdAtomic {
			o.MaxRdAtomic = uint8(min(max(da.MaxQPInitRdAtom, 0), 255))
		}
		if o.MaxDestRdAtomic == DeviceMaxRdAtomic {
			o.MaxDestRdAtomic = uint8(min(max(da.MaxQPRdAtom, 0), 255))
		}
		if da.AtomicCap == AtomicNone {
			o.Access &^= AccessRemoteAtomic
		}
	}

	steps := []struct {
		attr QPAttr
		mask QPAttrMask
	}{
		{QPAttr{State: QPStateInit, PortNum: o.Port, AccessFlags: o.Access},
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
		{QPAttr{State: QPStateRTR, PathMTU: o.PathMTU, DestQPNum: peer.QPNum, RQPSN: peer.PSN,
			MaxDestRdAtomic: o.MaxDestRdAtomic, MinRNRTimer: o.MinRNRTimer, AHAttr: ah},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
		{QPAttr{State: QPStateRTS, SQPSN: o.SQPSN, Timeout: o.Timeout, RetryCnt: o.RetryCount, RNRRetry: o.RNRRetry,
			MaxRdAtomic: o.MaxRdAtomic},
			QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic},
	}
	if state == QPStateInit {
		steps = steps[1:]
	}
	for _, st := range steps {
		from := qp.State()
		if err := qp.Modify(&st.attr, st.mask); err != nil {
			return &ConnectError{QPNum: qp.num, From: from, To: st.attr.State, Err: err}
		}
	}
	return nil
}

// checkConnectRC checks ConnectRC's arguments before anything is asked
// of the kernel.
func (qp *QP) checkConnectRC(peer *RCPeer, o *RCOptions) error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if qp.typ != QPTypeRC {
		bad("a %v QP: ConnectRC connects RC QPs", qp.typ)
	}
	if st := qp.State(); st != QPStateReset && st != QPStateInit {
		bad("the QP is in %v: ConnectRC starts from RESET or INIT", st)
	}
	if peer.QPNum > 0xffffff {
		bad("RCPeer.QPNum %#x is past 24 bits", peer.QPNum)
	}
	if peer.PSN > 0xffffff {
		bad("RCPeer.PSN %#x is past 24 bits", peer.PSN)
	}
	if peer.MTU != 0 && peer.MTU.Bytes() == 0 {
		bad("RCPeer.MTU %v is no MTU", peer.MTU)
	}
	if o.SQPSN > 0xffffff {
		bad("RCOptions.SQPSN %#x is past 24 bits", o.SQPSN)
	}
	if o.PathMTU != 0 && o.PathMTU.Bytes() == 0 {
		bad("RCOptions.PathMTU %v is no MTU", o.PathMTU)
	}
	if o.SGIDIndex != AutoGIDIndex && (o.SGIDIndex < 0 || o.SGIDIndex > 255) {
		bad("RCOptions.SGIDIndex %d: 0 to 255, or AutoGIDIndex", o.SGIDIndex)
	}
	if o.FlowLabel > 0xfffff {
		bad("RCOptions.FlowLabel %#x is past 20 bits", o.FlowLabel)
	}
	if o.MinRNRTimer > 31 || o.Timeout > 31 {
		bad("RCOptions.MinRNRTimer %d, Timeout %d: at most 31", o.MinRNRTimer, o.Timeout)
	}
	if o.RetryCount > 7 || o.RNRRetry > 7 {
		bad("RCOptions.RetryCount %d, RNRRetry %d: at most 7", o.RetryCount, o.RNRRetry)
	}
	if n := qp.ctx.portCount(); o.Port < 1 || o.Port > 0xff || (n > 0 && o.Port > n) {
		bad("RCOptions.Port %d: %s has ports 1 to %d", o.Port, qp.ctx.dev.Name, max(n, 1))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", strings.Join(errs, "; "), errInvalid)
}

// sgidIndexFor picks the local GID to reach peer from: the port's first
// RoCE v2 GID of peer's kind, or index 0 on a port without RoCE v2 GIDs.
func (c *Context) sgidIndexFor(port int, peer GID) (int, error) {
	table, err := c.GIDTable(port)
	if err != nil {
		return 0, err
	}
	want := gidKind(peer)
	v2 := false
	for _, e := range table {
		if e.Type != GIDTypeRoCEv2 {
			continue
		}
		v2 = true
		if gidKind(e.GID) == want {
			return e.Index, nil
		}
	}
	if !v2 {
		return 0, nil
	}
	return 0, c.noRoCEv2GID("ConnectRC", port, "of the peer's kind ("+want+", the peer's GID is "+peer.Addr().String()+")", table)
}

// hasGID reports whether port's GID table has a valid entry at index;
// true when the table cannot be read (the kernel then decides).
func (c *Context) hasGID(port, index int) bool {
	table, err := c.GIDTable(port)
	if err != nil {
		return true
	}
	for _, e := range table {
		if e.Index == index {
			return true
		}
	}
	return false
}

// gidKind sorts GIDs by what can reach what: IPv4, IPv6 link-local,
// other IPv6.
func gidKind(g GID) string {
	a := netip.AddrFrom16(g)
	switch {
	case a.Is4In6():
		return "IPv4"
	case a.IsLinkLocalUnicast():
		return "IPv6 link-local"
	}
	return "IPv6"
}
