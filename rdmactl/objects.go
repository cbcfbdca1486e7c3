package rdmactl

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/purerdma/rdma/internal/rdmanl"
)

// QPType is a QP's transport type, as the kernel numbers enum ib_qp_type.
type QPType uint8

var qpTypes = [...]string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"}

// String returns the type as rdma prints it: RC, UC, UD, GSI, ..., or UNKNOWN.
func (t QPType) String() string { return name(qpTypes[:], uint8(t)) }

// QPState is a QP's state (enum ib_qp_state).
type QPState uint8

var qpStates = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state as rdma prints it: RESET, INIT, RTR, RTS, SQD, SQE, ERR or UNKNOWN.
func (s QPState) String() string { return name(qpStates[:], uint8(s)) }

// PathMigState is a QP's path migration state (enum ib_mig_state).
type PathMigState uint8

var pathMigStates = [...]string{"MIGRATED", "REARM", "ARMED"}

// String returns the state as rdma prints it: MIGRATED, REARM, ARMED or UNKNOWN.
func (s PathMigState) String() string { return name(pathMigStates[:], uint8(s)) }

// PollContext is how the kernel polls one of its own CQs (enum ib_poll_context).
type PollContext uint8

var pollContexts = [...]string{"DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"}

// String returns the context as rdma prints it: DIRECT, SOFTIRQ, WORKQUEUE, UNBOUND_WORKQUEUE or UNKNOWN.
func (p PollContext) String() string { return name(pollContexts[:], uint8(p)) }

// CMState is an rdma_cm ID's state (enum rdma_cm_state).
type CMState uint8

// The states of an rdma_cm ID that a program most often looks for.
const (
	CMAddrBound CMState = 7 // bound to an address (rdma_bind_addr)
	CMListen    CMState = 8 // listening (rdma_listen)
	CMConnect   CMState = 5 // connecting or connected
)

var cmStates = [...]string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING"}

// String returns the state as rdma prints it: LISTEN, CONNECT, ..., or UNKNOWN.
func (s CMState) String() string { return name(cmStates[:], uint8(s)) }

// PortSpace is an rdma_cm ID's port space (enum rdma_ucm_port_space).
type PortSpace uint32

// String returns the port space as rdma prints it: TCP, UDP, IPoIB, or
// "---". rdma prints the IB port space (0x13f) as IPoIB too, and so does
// this method.
func (p PortSpace) String() string {
	switch p {
	case 0x0002, 0x013f: // RDMA_PS_IPOIB, RDMA_PS_IB
		return "IPoIB"
	case 0x0106:
		return "TCP"
	case 0x0111:
		return "UDP"
	}
	return "---"
}

func name(names []string, i uint8) string {
	if int(i) < len(names) {
		return names[i]
	}
	return "UNKNOWN"
}

// QP is a queue pair ("rdma resource show qp").
type QP struct {
	DevIndex uint32
	Device   string
	Port     Optional[uint32] // absent for a QP not yet bound to a port
	QPNum    uint32           // the local QP number (lqpn)
	// RemoteQPNum and RQPSN are sent for connected QPs (RC, UC).
	RemoteQPNum Optional[uint32]
	RQPSN       Optional[uint32]
	SQPSN       uint32
	// PathMigState is sent for RC, UC and XRC QPs.
	PathMigState Optional[PathMigState]
	Type         QPType
	State        QPState
	PDN          Optional[uint32] // the PD's number; absent for the kernel's QPs
	Owner        Owner
}

// QPs lists the QPs of the device dev, or of every device when dev is "".
func (c *Client) QPs(dev string) ([]QP, error) {
	return res(c, "QPs", rdmanl.ResQP, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) QP {
		return QP{
			DevIndex: d.DevIndex, Device: d.DevName,
			Port:         opt(e, rdmanl.AttrPortIndex, e.Port),
			QPNum:        e.LQPN,
			RemoteQPNum:  opt(e, rdmanl.AttrRQPN, e.RQPN),
			RQPSN:        opt(e, rdmanl.AttrRQPSN, e.RQPSN),
			SQPSN:        e.SQPSN,
			PathMigState: opt(e, rdmanl.AttrPathMigState, PathMigState(e.PathMigState)),
			Type:         QPType(e.Type),
			State:        QPState(e.State),
			PDN:          opt(e, rdmanl.AttrPDN, e.PDN),
			Owner:        owner(e),
		}
	})
}

// CQ is a completion queue ("rdma resource show cq").
type CQ struct {
	DevIndex uint32
	Device   string
	CQN      Optional[uint32] // the kernel's number for the CQ
	CQE      uint32           // its size in entries
	Users    uint64           // the QPs and other objects that use it
	// PollContext is sent for the kernel's own CQs.
	PollContext Optional[PollContext]
	// AdaptiveModeration reports whether the kernel moderates the CQ's
	// interrupts dynamically (DIM); sent by kernels 5.3 and later.
	AdaptiveModeration Optional[bool]
	CtxN               Optional[uint32] // the user context's number; absent for the kernel's CQs
	Owner              Owner
}

// CQs lists the CQs of the device dev, or of every device when dev is "".
func (c *Client) CQs(dev string) ([]CQ, error) {
	return res(c, "CQs", rdmanl.ResCQ, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) CQ {
		return CQ{
			DevIndex: d.DevIndex, Device: d.DevName,
			CQN:                opt(e, rdmanl.AttrCQN, e.CQN),
			CQE:                e.CQE,
			Users:              e.Users,
			PollContext:        opt(e, rdmanl.AttrPollCtx, PollContext(e.PollCtx)),
			AdaptiveModeration: opt(e, rdmanl.AttrDIM, e.DIM != 0),
			CtxN:               opt(e, rdmanl.AttrCtxN, e.CtxN),
			Owner:              owner(e),
		}
	})
}

// MR is a memory region ("rdma resource show mr").
type MR struct {
	DevIndex uint32
	Device   string
	MRN      Optional[uint32]
	// RKey and LKey are sent only to a caller with CAP_NET_ADMIN.
	RKey   Optional[uint32]
	LKey   Optional[uint32]
	IOVA   Optional[uint64]
	Length uint64 // mrlen
	PDN    Optional[uint32]
	Owner  Owner
}

// MRs lists the MRs of the device dev, or of every device when dev is "".
func (c *Client) MRs(dev string) ([]MR, error) {
	return res(c, "MRs", rdmanl.ResMR, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) MR {
		return MR{
			DevIndex: d.DevIndex, Device: d.DevName,
			MRN:    opt(e, rdmanl.AttrMRN, e.MRN),
			RKey:   opt(e, rdmanl.AttrRKey, e.RKey),
			LKey:   opt(e, rdmanl.AttrLKey, e.LKey),
			IOVA:   opt(e, rdmanl.AttrIOVA, e.IOVA),
			Length: e.MRLen,
			PDN:    opt(e, rdmanl.AttrPDN, e.PDN),
			Owner:  owner(e),
		}
	})
}

// PD is a protection domain ("rdma resource show pd").
type PD struct {
	DevIndex uint32
	Device   string
	PDN      Optional[uint32]
	// LocalDMALKey and UnsafeGlobalRKey are sent only to a caller with
	// CAP_NET_ADMIN; UnsafeGlobalRKey only for a PD that has one.
	LocalDMALKey     Optional[uint32]
	UnsafeGlobalRKey Optional[uint32]
	Users            uint64
	CtxN             Optional[uint32]
	Owner            Owner
}

// PDs lists the PDs of the device dev, or of every device when dev is "".
func (c *Client) PDs(dev string) ([]PD, error) {
	return res(c, "PDs", rdmanl.ResPD, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) PD {
		return PD{
			DevIndex: d.DevIndex, Device: d.DevName,
			PDN:              opt(e, rdmanl.AttrPDN, e.PDN),
			LocalDMALKey:     opt(e, rdmanl.AttrLocalDMALKey, e.LocalDMALKey),
			UnsafeGlobalRKey: opt(e, rdmanl.AttrUnsafeGlobalRKey, e.UnsafeGlobalRKey),
			Users:            e.Users,
			CtxN:             opt(e, rdmanl.AttrCtxN, e.CtxN),
			Owner:            owner(e),
		}
	})
}

// CMID is an rdma_cm ID ("rdma resource show cm_id").
type CMID struct {
	DevIndex uint32
	Device   string
	Port     Optional[uint32]
	CMIDN    Optional[uint32]
	QPNum    Optional[uint32] // the QP's number, once the ID has one
	QPType   Optional[QPType]
	State    CMState
	PS       PortSpace
	// Src and Dst are the bound and the peer's address (IPv4 or IPv6);
	// absent for another address family.
	Src   Optional[netip.AddrPort]
	Dst   Optional[netip.AddrPort]
	Owner Owner
}

// CMIDs lists the rdma_cm IDs bound to the device dev, or to every
// device when dev is "". An ID not yet bound to a device is in no list.
func (c *Client) CMIDs(dev string) ([]CMID, error) {
	return res(c, "CMIDs", rdmanl.ResCMID, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) CMID {
		return CMID{
			DevIndex: d.DevIndex, Device: d.DevName,
			Port:   opt(e, rdmanl.AttrPortIndex, e.Port),
			CMIDN:  opt(e, rdmanl.AttrCMIDN, e.CMIDN),
			QPNum:  opt(e, rdmanl.AttrLQPN, e.LQPN),
			QPType: opt(e, rdmanl.AttrType, QPType(e.Type)),
			State:  CMState(e.State),
			PS:     PortSpace(e.PS),
			Src:    opt(e, rdmanl.AttrSrcAddr, e.SrcAddr),
			Dst:    opt(e, rdmanl.AttrDstAddr, e.DstAddr),
			Owner:  owner(e),
		}
	})
}

// Context is a user context: an open of a device's uverbs file ("rdma
// resource show ctx").
type Context struct {
	DevIndex uint32
	Device   string
	CtxN     uint32
	Owner    Owner
}

// Contexts lists the user contexts of the device dev, or of every device
// when dev is "".
func (c *Client) Contexts(dev string) ([]Context, error) {
	return res(c, "Contexts", rdmanl.ResCtx, dev, func(d *rdmanl.Res, e *rdmanl.ResAttrs) Context {
		return Context{DevIndex: d.DevIndex, Device: d.DevName, CtxN: e.CtxN, Owner: owner(e)}
	})
}

// Counter is one hardware counter of a port.
type Counter struct {
	Name  string // the driver's name for it, e.g. "sent_pkts"
	Value uint64
}

// PortCounters is the hardware counters of one port ("rdma statistic
// show link DEV/PORT").
type PortCounters struct {
	DevIndex uint32
	Device   string
	Port     uint32
	Counters []Counter // in the driver's order
}

// Get returns the value of the counter name and whether the port has it.
func (p PortCounters) Get(name string) (uint64, bool) {
	for _, c := range p.Counters {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

// Counters reads the hardware counters of port (1-based) of the device
// dev. A device that keeps none (siw) gives an error matching
// ErrNoCounters; a port the device lacks, ErrNoDevice.
func (c *Client) Counters(dev string, port uint32) (PortCounters, error) {
	where := fmt.Sprintf("%s/%d", dev, port)
	devs, err := c.devices("Counters", dev)
	if err != nil {
		return PortCounters{}, err
	}
	d := devs[0]
	if port == 0 || port > d.PortCount {
		return PortCounters{}, &Error{Op: "Counters", Device: where, Err: ErrNoDevice}
	}
	return c.counters(d, port)
}

func (c *Client) counters(d rdmanl.Device, port uint32) (PortCounters, error) {
	where := fmt.Sprintf("%s/%d", d.Name, port)
	s, err := c.c.Stat(d.Index, port, d.Name)
	if err != nil {
		if isNotSupported(err) {
			err = fmt.Errorf("%w: %w", ErrNoCounters, err)
		}
		return PortCounters{}, &Error{Op: "Counters", Device: where, Err: err}
	}
	pc := PortCounters{DevIndex: s.DevIndex, Device: s.DevName, Port: s.Port}
	for _, ct := range s.Counters {
		pc.Counters = append(pc.Counters, Counter{Name: ct.Name, Value: ct.Value})
	}
	return pc, nil
}

// AllCounters reads the hardware counters of every port of the device
// dev, or of every device when dev is "", in the kernel's device order.
// Ports of devices that keep none are left out, where "rdma statistic
// show" stops with EINVAL at the first of them.
func (c *Client) AllCounters(dev string) ([]PortCounters, error) {
	devs, err := c.devices("AllCounters", dev)
	if err != nil {
		return nil, err
	}
	out := []PortCounters{}
	for _, d := range devs {
		for p := uint32(1); p <= d.PortCount; p++ {
			pc, err := c.counters(d, p)
			if errors.Is(err, ErrNoCounters) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, pc)
		}
	}
	return out, nil
}
