package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// QPState is a queue pair state (ibv_qp_state).
type QPState uint8

const (
	QPStateReset QPState = iota
	QPStateInit
	QPStateRTR // ready to receive
	QPStateRTS // ready to send
	QPStateSQD // send queue drained
	QPStateSQE // send queue error
	QPStateErr
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// QPAttrMask selects the QPAttr fields Modify applies and Query reads
// (ibv_qp_attr_mask).
type QPAttrMask uint32

const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	// IBV_QP_RATE_LIMIT (1 << 25) has no constant: the kernel allows it
	// only for raw packet QPs, which this package does not create.
)

var qpAttrNames = []string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX",
	"PORT", "QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC",
	"ALT_PATH", "MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}

func (m QPAttrMask) String() string { return flagString(uint64(m), qpAttrNames) }

// GlobalRoute is the GRH part of an address (ibv_global_route). On RoCE
// every address is global.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    int // the GID this side sends from: 0 to 255 (the kernel's field is 8 bits), as GIDEntry.Index
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (ibv_ah_attr).
//
// PortNum is an int, as port numbers are everywhere in this package
// (Context.QueryPort, GIDEntry.Port, rdmacm's ID.Port); the kernel takes
// 1 to 255, and CreateAH and QP.Modify refuse any other value, or a port
// the device does not have, before asking it.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	PortNum     int
}

// PathMigState is the path migration state (ibv_mig_state).
type PathMigState uint8

const (
	MigMigrated PathMigState = iota
	MigRearm
	MigArmed
)

func (m PathMigState) String() string {
	switch m {
	case MigMigrated:
		return "MIGRATED"
	case MigRearm:
		return "REARM"
	case MigArmed:
		return "ARMED"
	}
	return fmt.Sprintf("PathMigState(%d)", uint8(m))
}

// QPAttr are queue pair attributes (ibv_qp_attr). Modify applies the
// fields its mask selects; Query fills them. PortNum and AltPortNum are
// ints like every port number of the package; Modify checks the ones its
// mask selects (QPAttrPort, QPAttrAV, QPAttrAltPath) against the
// device's ports, 1 to 255, before any kernel call.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     PathMigState
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	AccessFlags      Access
	Cap              QPCap
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	SQDraining       bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          int
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       int
	AltTimeout       uint8
	SQSigAll         bool // Query only
}

// transition is one row of the IB spec's QP state table (the kernel's
// qp_state_table): attributes a transition requires and allows, per type.
type transition struct {
	req, opt [5]QPAttrMask // indexed by QPType (RC=2, UC=3, UD=4)
}

const (
	anyQPState QPAttrMask = 0
	rtsOptRC              = QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrMinRNRTimer | QPAttrPathMigState
	rtsOptUC              = QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState
	rtsOptUD              = QPAttrCurState | QPAttrQKey
)

func perType(rc, uc, ud QPAttrMask) [5]QPAttrMask { return [5]QPAttrMask{2: rc, 3: uc, 4: ud} }

var qpTransitions = map[[2]QPState]transition{
	{QPStateReset, QPStateInit}: {req: perType(
		QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags,
		QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags,
		QPAttrPKeyIndex|QPAttrPort|QPAttrQKey)},
	{QPStateInit, QPStateInit}: {opt: perType(
		QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags,
		QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags,
		QPAttrPKeyIndex|QPAttrPort|QPAttrQKey)},
	{QPStateInit, QPStateRTR}: {
		req: perType(
			QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer,
			QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN,
			0),
		opt: perType(
			QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex,
			QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex,
			QPAttrPKeyIndex|QPAttrQKey)},
	{QPStateRTR, QPStateRTS}: {
		req: perType(
			QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrSQPSN|QPAttrMaxQPRdAtomic,
			QPAttrSQPSN,
			QPAttrSQPSN),
		opt: perType(rtsOptRC, rtsOptUC, rtsOptUD)},
	{QPStateRTS, QPStateRTS}: {opt: perType(rtsOptRC, rtsOptUC, rtsOptUD)},
	{QPStateRTS, QPStateSQD}: {opt: perType(QPAttrEnSQDAsyncNotify, QPAttrEnSQDAsyncNotify, QPAttrEnSQDAsyncNotify)},
	{QPStateSQD, QPStateRTS}: {opt: perType(rtsOptRC, rtsOptUC, rtsOptUD)},
	{QPStateSQD, QPStateSQD}: {opt: perType(
		QPAttrPort|QPAttrAV|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrMaxQPRdAtomic|
			QPAttrMaxDestRdAtomic|QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex|QPAttrMinRNRTimer|QPAttrPathMigState,
		QPAttrAV|QPAttrAltPath|QPAttrAccessFlags|QPAttrPKeyIndex|QPAttrPathMigState,
		QPAttrPKeyIndex|QPAttrQKey)},
	{QPStateSQE, QPStateRTS}: {opt: perType(0, QPAttrCurState|QPAttrAccessFlags, QPAttrCurState|QPAttrQKey)},
}

// checkTransition applies the IB spec's rules (the kernel's
// ib_modify_qp_is_ok) so a wrong Modify fails with a clear error before
// any kernel call.
func checkTransition(typ QPType, cur, next QPState, mask QPAttrMask) error {
	if cur > QPStateErr || next > QPStateErr {
		return fmt.Errorf("uverbs QP.Modify: state %v -> %v: %w", cur, next, errInvalid)
	}
	if mask&QPAttrCurState != 0 && (cur < QPStateRTR || cur > QPStateSQE) {
		return fmt.Errorf("uverbs QP.Modify: CUR_STATE given in %v (only RTR, RTS, SQD, SQE take it): %w", cur, errInvalid)
	}
	var t transition
	switch {
	case next == QPStateReset, next == QPStateErr && cur != QPStateReset:
		// valid with no attributes: to RESET from every state, to ERR
		// from every state but RESET
	default:
		var ok bool
		if t, ok = qpTransitions[[2]QPState{cur, next}]; !ok {
			return fmt.Errorf("uverbs QP.Modify: %v QP: %v -> %v is not a valid transition: %w", typ, cur, next, errInvalid)
		}
	}
	req, opt := t.req[typ], t.opt[typ]
	if missing := req &^ mask; missing != 0 {
		return fmt.Errorf("uverbs QP.Modify: %v QP %v -> %v: missing required attributes %v: %w", typ, cur, next, missing, errInvalid)
	}
	if extra := mask &^ (req | opt | QPAttrState); extra != 0 {
		return fmt.Errorf("uverbs QP.Modify: %v QP %v -> %v: attributes %v not allowed: %w", typ, cur, next, extra, errInvalid)
	}
	return nil
}

// iwarpQPAttrs are the attributes an iWARP QP's Modify may carry: the
// state, the access flags and the port (what the kernel's rdma_cm asks
// for, iw_cm_init_qp_attr), and the read depths and capacities siw reads.
const iwarpQPAttrs = QPAttrState | QPAttrCurState | QPAttrAccessFlags | QPAttrPort | QPAttrPKeyIndex |
	QPAttrMaxQPRdAtomic | QPAttrMaxDestRdAtomic | QPAttrCap | QPAttrEnSQDAsyncNotify

// checkTransitionIWARP is checkTransition for an iWARP QP: valid states,
// and no attribute iWARP has no use for (an address vector, PSNs,
// timeouts: the TCP connection carries those).
func checkTransitionIWARP(cur, next QPState, mask QPAttrMask) error {
	if cur > QPStateErr || next > QPStateErr {
		return fmt.Errorf("uverbs QP.Modify: state %v -> %v: %w", cur, next, errInvalid)
	}
	if extra := mask &^ iwarpQPAttrs; extra != 0 {
		return fmt.Errorf("uverbs QP.Modify: iWARP QP %v -> %v: attributes %v do not apply to iWARP (its connection manager sets up the path): %w", cur, next, extra, errInvalid)
	}
	return nil
}

// Modify changes the QP's attributes and state (ibv_modify_qp). mask
// selects the fields of attr to apply; with QPAttrState it is a state
// transition, checked against the IB spec's table before the kernel is
// asked. An address vector it selects (AHAttr with QPAttrAV, AltAHAttr
// with QPAttrAltPath) on a port that requires a GRH (RoCE) must have
// IsGlobal and its GRH; without, Modify fails before the kernel call
// with an error matching EINVAL that says what to set, and the QP keeps
// its state.
//
// A move to RESET empties the queues. On a QP without a TD it waits for
// posts in progress, so no post writes to a queue the kernel has just
// reset; on a QP with a TD, do not move it to RESET while a PostSend or
// PostRecv runs.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if qp == nil {
		return errNil("QP.Modify", "QP")
	}
	if err := qp.alive("QP.Modify"); err != nil {
		return err
	}
	if attr == nil {
		return fmt.Errorf("uverbs QP.Modify: nil attributes: %w", errInvalid)
	}
	if err := qp.checkPorts(attr, mask); err != nil {
		return err
	}
	if mask&QPAttrState != 0 && attr.State == QPStateReset && qp.locks {
		qp.smu.Lock()
		defer qp.smu.Unlock()
		qp.rmu.Lock()
		defer qp.rmu.Unlock()
	}
	cur := QPState(qp.pv.State.Load())
	if mask&QPAttrCurState != 0 {
		cur = attr.CurState
	}
	next := cur
	if mask&QPAttrState != 0 {
		next = attr.State
	}
	if qp.ctx.dev.Transport == TransportIWARP {
		// iWARP: the IB table does not apply (the kernel checks no
		// iWARP modify against it); the connection manager moves the
		// QP to RTS when the connection is up (rdmacm).
		if err := checkTransitionIWARP(cur, next, mask); err != nil {
			return err
		}
	} else if err := checkTransition(qp.typ, cur, next, mask); err != nil {
		return err
	}
	if err := qp.checkGRH(attr, mask, cur, next); err != nil {
		return err
	}
	var req abi.ExModifyQP
	b := &req.Base
	b.QPHandle = qp.handle
	b.AttrMask = uint32(mask)
	b.QKey, b.RQPSN, b.SQPSN, b.DestQPNum = attr.QKey, attr.RQPSN, attr.SQPSN, attr.DestQPNum
	b.QPAccessFlags = uint32(attr.AccessFlags)
	b.PKeyIndex, b.AltPKeyIndex = attr.PKeyIndex, attr.AltPKeyIndex
	b.QPState, b.CurQPState = uint8(attr.State), uint8(attr.CurState)
	b.PathMTU, b.PathMigState = uint8(attr.PathMTU), uint8(attr.PathMigState)
	b.EnSQDAsyncNotify = boolByte(attr.EnSQDAsyncNotify)
	b.MaxRDAtomic, b.MaxDestRDAtomic, b.MinRNRTimer = attr.MaxRdAtomic, attr.MaxDestRdAtomic, attr.MinRNRTimer
	// Ports the mask does not select are not checked and not sent.
	if mask&QPAttrPort != 0 {
		b.PortNum = uint8(attr.PortNum)
	}
	if mask&QPAttrAltPath != 0 {
		b.AltPortNum = uint8(attr.AltPortNum)
	}
	b.Timeout, b.RetryCnt, b.RNRRetry = attr.Timeout, attr.RetryCnt, attr.RNRRetry
	b.AltTimeout = attr.AltTimeout
	if mask&QPAttrAV != 0 {
		b.Dest = qpDest(attr.AHAttr)
	}
	if mask&QPAttrAltPath != 0 {
		b.AltDest = qpDest(attr.AltAHAttr)
	}
	if _, err := qp.ctx.fd.CommandEx("uverbs QP.Modify: EX_MODIFY_QP", abi.IB_USER_VERBS_EX_CMD_MODIFY_QP, abi.Bytes(&req), nil, 0, 0); err != nil {
		return err
	}
	if mask&QPAttrState != 0 {
		if r, ok := qp.q.(provider.QPResetter); ok && next == QPStateReset {
			r.Reset()
		}
		qp.pv.State.Store(uint32(next))
	}
	return nil
}

// checkPorts checks the port numbers mask selects, as the kernel would
// (each must be a port of the device), so that a bad one fails before
// the kernel call and an int that does not fit the ABI's byte is never
// truncated into another port.
func (qp *QP) checkPorts(attr *QPAttr, mask QPAttrMask) error {
	for _, p := range [...]struct {
		bit   QPAttrMask
		field string
		port  int
	}{
		{QPAttrPort, "PortNum", attr.PortNum},
		{QPAttrAV, "AHAttr.PortNum", attr.AHAttr.PortNum},
		{QPAttrAltPath, "AltPortNum", attr.AltPortNum},
		{QPAttrAltPath, "AltAHAttr.PortNum", attr.AltAHAttr.PortNum},
	} {
		if mask&p.bit != 0 {
			if err := qp.ctx.checkPort("uverbs QP.Modify: "+p.field, p.port); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGRH refuses an address vector the mask selects (QPAttrAV,
// QPAttrAltPath) that lacks the GRH its port requires, as the kernel
// would, but saying what to set, or whose GRH names a GID index past 8
// bits.
func (qp *QP) checkGRH(attr *QPAttr, mask QPAttrMask, cur, next QPState) error {
	for _, p := range [...]struct {
		bit   QPAttrMask
		field string
		a     *AHAttr
	}{
		{QPAttrAV, "AHAttr", &attr.AHAttr},
		{QPAttrAltPath, "AltAHAttr", &attr.AltAHAttr},
	} {
		if mask&p.bit != 0 {
			if err := qp.ctx.checkGRH(fmt.Sprintf("QP.Modify: %v QP %v -> %v", qp.typ, cur, next), p.field, p.a); err != nil {
				return err
			}
		}
	}
	return nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func qpDest(a AHAttr) abi.QPDest {
	return abi.QPDest{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, DLID: a.DLID,
		SGIDIndex: uint8(a.GRH.SGIDIndex), HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass,
		SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, IsGlobal: boolByte(a.IsGlobal), PortNum: uint8(a.PortNum)}
}

func ahAttrFromDest(d abi.QPDest) AHAttr {
	return AHAttr{GRH: GlobalRoute{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: int(d.SGIDIndex),
		HopLimit: d.HopLimit, TrafficClass: d.TrafficClass}, DLID: d.DLID, SL: d.SL,
		SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate, IsGlobal: d.IsGlobal != 0, PortNum: int(d.PortNum)}
}

// EstablishedByCM records that the kernel's connection manager moved
// this iWARP QP to RTS: the connection's ESTABLISHED event (rdma_cm)
// says so, and package rdmacm calls this when it takes that event. It
// asks the kernel nothing. A MODIFY_QP to RTS would change nothing in
// the kernel, but siw runs it holding the QP's state lock, and data the
// peer sends meanwhile stays unread in the socket until more arrives
// (docs/providers.md, "siw"): a program that takes rdma_cm's events
// itself calls this rather than Modify.
//
// It fails, and records nothing, on a QP of a device that is not iWARP,
// a closed QP, or a QP in a state other than INIT, RTR or RTS.
func (qp *QP) EstablishedByCM() error {
	if qp == nil {
		return errNil("QP.EstablishedByCM", "QP")
	}
	if err := qp.alive("QP.EstablishedByCM"); err != nil {
		return err
	}
	if qp.ctx.dev.Transport != TransportIWARP {
		return fmt.Errorf("uverbs QP.EstablishedByCM: QP %#x: %s is not iWARP; its connection manager does not move QPs (use Modify): %w",
			qp.num, qp.ctx.dev.Name, errInvalid)
	}
	for {
		w := qp.pv.State.Load()
		switch st := QPState(w & 0xff); st {
		case QPStateInit, QPStateRTR, QPStateRTS:
		default:
			return fmt.Errorf("uverbs QP.EstablishedByCM: QP %#x: the QP is in %v, not INIT, RTR or RTS: %w", qp.num, st, errInvalid)
		}
		if qp.pv.State.CompareAndSwap(w, w&^0xff|uint32(QPStateRTS)) {
			return nil
		}
	}
}

// Query reads the QP's attributes (ibv_query_qp). The kernel reports
// all of them; mask is passed along for devices that read it. It also
// refreshes State, except on siw, whose kernel driver does not report
// it: there State is the state the QP was last moved to (by Modify, or
// by rdmacm when the connection came up).
func (qp *QP) Query(mask QPAttrMask) (QPAttr, error) {
	if qp == nil {
		return QPAttr{}, errNil("QP.Query", "QP")
	}
	if err := qp.alive("QP.Query"); err != nil {
		return QPAttr{}, err
	}
	var resp abi.QueryQPResp
	req := abi.QueryQP{QPHandle: qp.handle, AttrMask: uint32(mask)}
	req.Response = sys.PointerTo(abi.Bytes(&resp))
	if err := qp.ctx.fd.Command("uverbs QP.Query: QUERY_QP", abi.IB_USER_VERBS_CMD_QUERY_QP, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		return QPAttr{}, err
	}
	a := QPAttr{
		State: QPState(resp.QPState), CurState: QPState(resp.CurQPState), PathMTU: MTU(resp.PathMTU),
		PathMigState: PathMigState(resp.PathMigState), QKey: resp.QKey, RQPSN: resp.RQPSN, SQPSN: resp.SQPSN,
		DestQPNum: resp.DestQPNum, AccessFlags: Access(resp.QPAccessFlags),
		Cap: QPCap{MaxSendWR: resp.MaxSendWR, MaxRecvWR: resp.MaxRecvWR, MaxSendSGE: resp.MaxSendSGE,
			MaxRecvSGE: resp.MaxRecvSGE, MaxInlineData: resp.MaxInlineData},
		AHAttr: ahAttrFromDest(resp.Dest), AltAHAttr: ahAttrFromDest(resp.AltDest),
		PKeyIndex: resp.PKeyIndex, AltPKeyIndex: resp.AltPKeyIndex, SQDraining: resp.SQDraining != 0,
		MaxRdAtomic: resp.MaxRDAtomic, MaxDestRdAtomic: resp.MaxDestRDAtomic, MinRNRTimer: resp.MinRNRTimer,
		PortNum: int(resp.PortNum), Timeout: resp.Timeout, RetryCnt: resp.RetryCnt, RNRRetry: resp.RNRRetry,
		AltPortNum: int(resp.AltPortNum), AltTimeout: resp.AltTimeout, SQSigAll: resp.SQSigAll != 0,
	}
	if qp.ctx.driverID == abi.RDMA_DRIVER_SIW {
		// siw's QUERY_QP leaves the state out (it reads as RESET):
		// report the state this QP was last moved to.
		a.State = QPState(qp.pv.State.Load() & 0xff)
		return a, nil
	}
	qp.pv.State.Store(uint32(a.State))
	return a, nil
}

// AttachMcast joins a UD QP to a multicast group (ibv_attach_mcast). On
// RoCE the LID is 0 and gid is the group's GID: ff.. for IPv6 groups,
// ::ffff:a.b.c.d for an IPv4 group on RoCE v2.
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	if err := qp.checkMcast("QP.AttachMcast", gid); err != nil {
		return err
	}
	req := abi.AttachMcast{GID: gid, QPHandle: qp.handle, MLID: lid}
	if err := qp.ctx.fd.Command("uverbs QP.AttachMcast: ATTACH_MCAST", abi.IB_USER_VERBS_CMD_ATTACH_MCAST, abi.Bytes(&req), nil); err != nil {
		return err
	}
	qp.mcast.Add(1)
	return nil
}

// DetachMcast leaves a multicast group (ibv_detach_mcast).
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	if err := qp.checkMcast("QP.DetachMcast", gid); err != nil {
		return err
	}
	req := abi.DetachMcast{GID: gid, QPHandle: qp.handle, MLID: lid}
	if err := qp.ctx.fd.Command("uverbs QP.DetachMcast: DETACH_MCAST", abi.IB_USER_VERBS_CMD_DETACH_MCAST, abi.Bytes(&req), nil); err != nil {
		return err
	}
	qp.mcast.Add(-1)
	return nil
}

func (qp *QP) checkMcast(op string, gid GID) error {
	if qp == nil {
		return errNil(op, "QP")
	}
	if err := qp.alive(op); err != nil {
		return err
	}
	if qp.typ != QPTypeUD {
		return fmt.Errorf("uverbs %s: multicast needs a UD QP, not %v: %w", op, qp.typ, errInvalid)
	}
	if !isMulticastGID(gid) {
		return fmt.Errorf("uverbs %s: %x is not a multicast GID (ff00::/8, or ::ffff:224.0.0.0/100 on RoCE v2): %w", op, gid[:], errInvalid)
	}
	return nil
}

// isMulticastGID is the kernel's rdma_is_multicast_addr: an IPv6
// multicast GID, or the IPv4-mapped GID of an IPv4 multicast address,
// which is how RoCE v2 names IPv4 groups.
func isMulticastGID(gid GID) bool {
	if gid[0] == 0xff {
		return true
	}
	v4mapped := [12]byte{10: 0xff, 11: 0xff}
	return [12]byte(gid[:12]) == v4mapped && gid[12]&0xf0 == 0xe0
}
