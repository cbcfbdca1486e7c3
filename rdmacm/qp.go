package rdmacm

import (
	"errors"
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs"
)

// QPOptions are the QP CreateEP creates: for an active endpoint at once,
// for a passive one on each connection request.
type QPOptions struct {
	// PD is where the QP is created; nil means the default PD of the
	// shared Context of the ID's device.
	PD *uverbs.PD
	// Config describes the QP as for ID.CreateQP.
	Config uverbs.QPConfig
}

// CreateQP creates the ID's QP on pd and moves it to INIT with the
// attributes the kernel gives for the ID (rdma_create_qp): for a UD QP
// on to RTS, ready to send to the UDParam of an event. The ID must be
// bound to a device (after ADDR_RESOLVED or ROUTE_RESOLVED, a bind to a
// device address, or from CONNECT_REQUEST).
//
// pd may belong to any uverbs.Context of the ID's device; nil means the
// default PD of the shared Context (see ID.Context). cfg.Type may be
// left zero: it must be the ID's QPType. A nil SendCQ or RecvCQ is
// created by the ID with a completion channel, sized by cfg.Cap, for
// GetSendComp and GetRecvComp. cfg.SRQ makes the QP take its receives
// from a shared receive queue; without one, the ID's SRQ from CreateSRQ,
// if any, is used (and its PD, when pd is nil).
//
// The ID owns the QP and the CQs it created: Close (or DestroyQP)
// destroys them; do not Close them yourself. Connect, Accept, the
// events and Disconnect move the QP through its states as librdmacm
// does.
func (id *ID) CreateQP(pd *uverbs.PD, cfg uverbs.QPConfig) (*uverbs.QP, error) {
	const op = "create QP"
	if err := id.alive(op); err != nil {
		return nil, err
	}
	dev, err := id.device(op)
	if err != nil {
		return nil, err
	}
	if cfg.Type == 0 {
		cfg.Type = id.qpType
	}
	if cfg.Type != id.qpType {
		return nil, opError(op, id.handle, fmt.Errorf("a %v QP on a %v ID (port space %v): %w", cfg.Type, id.qpType, id.ps, errInvalid))
	}
	if id.hasQP() {
		return nil, opError(op, id.handle, fmt.Errorf("the ID has a QP already: %w", errInvalid))
	}
	id.mu.Lock()
	if cfg.SRQ == nil && id.srq != nil {
		cfg.SRQ = id.srq
		if pd == nil {
			pd = id.srqPD
		}
	}
	id.mu.Unlock()
	if pd == nil {
		s, err := id.shared(op)
		if err != nil {
			return nil, err
		}
		pd = s.pd
	} else if name := pd.Context().Device().Name; name != dev.Name {
		return nil, opError(op, id.handle, fmt.Errorf("the PD is on %s, the ID on %s: %w", name, dev.Name, errInvalid))
	}
	var owned []closer
	undo := func() {
		for i := len(owned) - 1; i >= 0; i-- {
			owned[i].Close()
		}
	}
	newCQ := func(size uint32) (*uverbs.CQ, *uverbs.CompChannel, error) {
		c := pd.Context()
		ch, err := c.CreateCompChannel()
		if err != nil {
			return nil, nil, err
		}
		owned = append(owned, ch)
		cq, err := c.CreateCQ(uverbs.CQConfig{Size: int(max(size, 1)), Channel: ch})
		if err != nil {
			return nil, nil, err
		}
		owned = append(owned, cq)
		return cq, ch, nil
	}
	var sendCh, recvCh *uverbs.CompChannel
	if cfg.SendCQ == nil {
		if cfg.SendCQ, sendCh, err = newCQ(cfg.Cap.MaxSendWR); err != nil {
			undo()
			return nil, opError(op, id.handle, err)
		}
	}
	if cfg.RecvCQ == nil {
		if cfg.RecvCQ, recvCh, err = newCQ(cfg.Cap.MaxRecvWR); err != nil {
			undo()
			return nil, opError(op, id.handle, err)
		}
	}
	qp, err := pd.CreateQP(cfg)
	if err != nil {
		undo()
		return nil, opError(op, id.handle, err)
	}
	if err := id.initQP(qp, 0); err != nil {
		qp.Close()
		undo()
		return nil, opError(op, id.handle, err)
	}
	id.mu.Lock()
	if id.qp != nil || id.closed.Load() { // lost a race with another CreateQP or Close
		id.mu.Unlock()
		qp.Close()
		undo()
		return nil, opError(op, id.handle, fmt.Errorf("the ID has a QP already or is closed: %w", errInvalid))
	}
	id.qp, id.qpPD, id.qpSRQ, id.qpOwned, id.qpAccess = qp, pd, cfg.SRQ != nil, true, 0
	id.sendCQ, id.recvCQ, id.owned = cfg.SendCQ, cfg.RecvCQ, owned
	id.sendCh, id.recvCh = sendCh, recvCh
	mcs := make([]*membership, 0, len(id.mcasts))
	for _, m := range id.mcasts {
		mcs = append(mcs, m)
	}
	id.mu.Unlock()
	for _, m := range mcs { // groups joined before the QP existed
		if err := m.attach(); err != nil {
			return qp, opError(op, id.handle, err)
		}
	}
	return qp, nil
}

// AttachQP gives the ID a QP that the caller created and keeps owning:
// the ID drives its states as it does CreateQP's (INIT now, with the
// attributes the kernel gives for the ID; RTR and RTS at Accept or at
// the peer's accept; ERR on REJECTED, and on DISCONNECTED for iWARP),
// and tells the peer its number, but never destroys it: DestroyQP and
// Close only forget it. Close the QP after the ID (or after DestroyQP),
// and its CQs after it.
//
// qp must be in RESET, of the ID's QP type, on a PD of the ID's device;
// the ID must be bound to a device, as for CreateQP, and have no QP.
// addAccess is added to the remote access rights the kernel's CM gives
// at each move to INIT (remote write; remote read and atomics with
// responder resources): rights the CM does not know, such as
// uverbs.AccessFlushGlobal, which RDMA FLUSH needs at the responder.
// On failure the QP is left to the caller as it is (in RESET, or in
// INIT if the ID refused it afterwards).
func (id *ID) AttachQP(qp *uverbs.QP, addAccess uverbs.Access) error {
	const op = "attach QP"
	if err := id.alive(op); err != nil {
		return err
	}
	dev, err := id.device(op)
	if err != nil {
		return err
	}
	if qp == nil {
		return opError(op, id.handle, fmt.Errorf("nil QP: %w", errInvalid))
	}
	if qp.Type() != id.qpType {
		return opError(op, id.handle, fmt.Errorf("a %v QP on a %v ID (port space %v): %w", qp.Type(), id.qpType, id.ps, errInvalid))
	}
	if name := qp.PD().Context().Device().Name; name != dev.Name {
		return opError(op, id.handle, fmt.Errorf("the QP is on %s, the ID on %s: %w", name, dev.Name, errInvalid))
	}
	if st := qp.State(); st != uverbs.QPStateReset {
		return opError(op, id.handle, fmt.Errorf("QP %#x is in %v, not RESET: %w", qp.Num(), st, errInvalid))
	}
	if id.hasQP() {
		return opError(op, id.handle, fmt.Errorf("the ID has a QP already: %w", errInvalid))
	}
	if err := id.initQP(qp, addAccess); err != nil {
		return opError(op, id.handle, err)
	}
	id.mu.Lock()
	if id.qp != nil || id.closed.Load() { // lost a race with another CreateQP, AttachQP or Close
		id.mu.Unlock()
		return opError(op, id.handle, fmt.Errorf("the ID has a QP already or is closed: %w", errInvalid))
	}
	id.qp, id.qpPD, id.qpSRQ, id.qpOwned, id.qpAccess = qp, qp.PD(), qp.SRQ() != nil, false, addAccess
	mcs := make([]*membership, 0, len(id.mcasts))
	for _, m := range id.mcasts {
		mcs = append(mcs, m)
	}
	id.mu.Unlock()
	for _, m := range mcs { // groups joined before the QP existed
		if err := m.attach(); err != nil {
			return opError(op, id.handle, err)
		}
	}
	return nil
}

// QP is the QP CreateQP made or AttachQP took, nil before.
func (id *ID) QP() *uverbs.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp
}

// PD is the PD of the ID's QP, nil before CreateQP.
func (id *ID) PD() *uverbs.PD {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qpPD
}

// CQs are the send and receive CQs of the ID's QP.
func (id *ID) CQs() (send, recv *uverbs.CQ) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.sendCQ, id.recvCQ
}

func (id *ID) hasQP() bool { return id.QP() != nil }

// DestroyQP destroys the ID's QP and the CQs CreateQP made for it
// (rdma_destroy_qp), leaving the ID open. A QP from AttachQP is only
// forgotten (and detached from the ID's multicast groups): its owner
// closes it.
func (id *ID) DestroyQP() error {
	if err := id.alive("destroy QP"); err != nil {
		return err
	}
	return id.destroyQP()
}

func (id *ID) destroyQP() error {
	var errs []error
	id.mu.Lock()
	mcs := make([]*membership, 0, len(id.mcasts))
	for _, m := range id.mcasts {
		mcs = append(mcs, m)
	}
	id.mu.Unlock()
	for _, m := range mcs { // uverbs refuses to destroy an attached QP
		if err := m.detach(); err != nil {
			errs = append(errs, err)
		}
	}
	id.mu.Lock()
	qp, owned, mine := id.qp, id.owned, id.qpOwned
	id.qp, id.qpPD, id.sendCQ, id.recvCQ, id.owned = nil, nil, nil, nil, nil
	id.sendCh, id.recvCh, id.qpOwned, id.qpAccess = nil, nil, false, 0
	id.mu.Unlock()
	if qp != nil && mine {
		if err := qp.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for i := len(owned) - 1; i >= 0; i-- {
		if err := owned[i].Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// InitQPAttr returns the attributes that move a QP of the ID to state,
// as the kernel computes them from the ID's route and connection, with
// the mask to pass to uverbs.QP.Modify (rdma_init_qp_attr). It is for
// callers that manage the ID's QP themselves instead of CreateQP: INIT
// before Connect or Accept (and again, for the CM's access flags, before
// RTR), RTR and RTS before Accept or, on the active side, after
// CONNECT_RESPONSE, then Establish.
func (id *ID) InitQPAttr(state uverbs.QPState) (*uverbs.QPAttr, uverbs.QPAttrMask, error) {
	const op = "init QP attributes"
	if err := id.alive(op); err != nil {
		return nil, 0, err
	}
	if state > uverbs.QPStateErr {
		return nil, 0, opError(op, id.handle, fmt.Errorf("QP state %v: %w", state, errInvalid))
	}
	a, mask, err := id.qpAttr(state)
	if err != nil {
		return nil, 0, opError(op, id.handle, err)
	}
	return &a, mask, nil
}

// qpAttr asks the kernel for the attributes that move the ID's QP to
// state (rdma_init_qp_attr), converted for uverbs.QP.Modify.
func (id *ID) qpAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	r, err := id.file().InitQPAttr(id.handle, uint32(state))
	if err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	a, mask := convertQPAttr(&r)
	return a, mask, nil
}

// knownQPAttrs are the mask bits uverbs.QP.Modify takes. Bits 21-24 were
// RoCE attributes (SMAC, VID) older kernels could leave in the mask, as
// librdmacm's workaround notes; the rate limit has no QPAttr field.
const knownQPAttrs = uverbs.QPAttrMask(1<<21 - 1)

func convertQPAttr(r *abi.QPAttr) (uverbs.QPAttr, uverbs.QPAttrMask) {
	a := uverbs.QPAttr{
		State: uverbs.QPState(r.QPState), CurState: uverbs.QPState(r.CurQPState),
		PathMTU: uverbs.MTU(r.PathMTU), PathMigState: uverbs.PathMigState(r.PathMigState),
		QKey: r.QKey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPNum: r.DestQPNum,
		AccessFlags: uverbs.Access(r.QPAccessFlags),
		Cap: uverbs.QPCap{MaxSendWR: r.MaxSendWR, MaxRecvWR: r.MaxRecvWR, MaxSendSGE: r.MaxSendSGE,
			MaxRecvSGE: r.MaxRecvSGE, MaxInlineData: r.MaxInlineData},
		AHAttr: ahAttr(&r.AHAttr), AltAHAttr: ahAttr(&r.AltAHAttr),
		PKeyIndex: r.PKeyIndex, AltPKeyIndex: r.AltPKeyIndex,
		EnSQDAsyncNotify: r.EnSQDAsyncNotify != 0, SQDraining: r.SQDraining != 0,
		MaxRdAtomic: r.MaxRDAtomic, MaxDestRdAtomic: r.MaxDestRDAtomic, MinRNRTimer: r.MinRNRTimer,
		PortNum: int(r.PortNum), Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AltPortNum: int(r.AltPortNum), AltTimeout: r.AltTimeout,
	}
	return a, uverbs.QPAttrMask(r.QPAttrMask) & knownQPAttrs
}

// modifyTo moves qp to state with the kernel's attributes. agreed, unless
// it is MaxResources, replaces the kernel's responder resources on RTR
// and initiator depth on RTS; addAccess is added to the access rights
// on INIT.
func (id *ID) modifyTo(qp *uverbs.QP, state uverbs.QPState, agreed uint8, addAccess uverbs.Access) error {
	a, mask, err := id.qpAttr(state)
	if err != nil {
		return err
	}
	if state == uverbs.QPStateInit && addAccess != 0 {
		a.AccessFlags |= addAccess
		mask |= uverbs.QPAttrAccessFlags
	}
	if mask == 0 {
		// Nothing to change: iWARP's RTS, which the kernel's CM makes
		// when the connection is up (iw_cm_init_qp_attr asks for none).
		return nil
	}
	if agreed != MaxResources {
		switch state {
		case uverbs.QPStateRTR:
			a.MaxDestRdAtomic = agreed
		case uverbs.QPStateRTS:
			a.MaxRdAtomic = agreed
		}
	}
	return qp.Modify(&a, mask)
}

// initQP is librdmacm's ucma_init_conn_qp / ucma_init_ud_qp: INIT with
// the kernel's attributes (and addAccess); a UD QP goes on to RTR and
// RTS.
func (id *ID) initQP(qp *uverbs.QP, addAccess uverbs.Access) error {
	if err := id.modifyTo(qp, uverbs.QPStateInit, MaxResources, addAccess); err != nil {
		return err
	}
	if id.qpType != uverbs.QPTypeUD {
		return nil
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
		return err
	}
	return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
}

// modifyQPRTR is ucma_modify_qp_rtr: INIT again (the CM's access flags
// replace the defaults), then RTR, with the agreed responder resources.
func (id *ID) modifyQPRTR(respRes uint8) error {
	id.mu.Lock()
	qp, add := id.qp, id.qpAccess
	id.mu.Unlock()
	if qp == nil {
		return nil
	}
	if err := id.modifyTo(qp, uverbs.QPStateInit, MaxResources, add); err != nil {
		return err
	}
	return id.modifyTo(qp, uverbs.QPStateRTR, respRes, 0)
}

// modifyQPRTS is ucma_modify_qp_rts, with the agreed initiator depth.
func (id *ID) modifyQPRTS(initDepth uint8) error {
	qp := id.QP()
	if qp == nil {
		return nil
	}
	return id.modifyTo(qp, uverbs.QPStateRTS, initDepth, 0)
}

// completeConnect is ucma_process_conn_resp: on the active side, after
// the peer's accept, move the QP to RTS and send the RTU.
func (id *ID) completeConnect() error {
	err := id.modifyQPRTR(MaxResources)
	if err == nil {
		err = id.modifyQPRTS(MaxResources)
	}
	if err == nil {
		err = id.file().Accept(id.handle, 0, nil)
	}
	if err != nil {
		id.connectFailed.Store(true)
		id.qpToError()
	}
	return err
}

// qpToError moves the ID's QP, if any, to ERR.
func (id *ID) qpToError() error {
	qp := id.QP()
	if qp == nil {
		return nil
	}
	return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
}

// qpShutdown is ucma_shutdown: before a disconnect the QP goes to ERR on
// InfiniBand and RoCE, to SQD on iWARP.
func (id *ID) qpShutdown() error {
	qp := id.QP()
	if qp == nil {
		return nil
	}
	if d, ok := id.Device(); ok && d.Transport == uverbs.TransportIWARP {
		if qp.State() >= uverbs.QPStateErr {
			// DISCONNECTED moved it to ERR already: SQD would record a
			// state that takes posts again, which siw never runs.
			return nil
		}
		return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateSQD}, uverbs.QPAttrState)
	}
	return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
}

// CreateSRQ creates a shared receive queue for the ID on pd
// (rdma_create_srq): the QP CreateQP makes afterwards takes its receives
// from it, and PostRecv posts to it. pd nil means the default PD of the
// shared Context. The ID owns the SRQ: Close (or DestroySRQ) destroys it
// after the QP.
func (id *ID) CreateSRQ(pd *uverbs.PD, cfg uverbs.SRQConfig) (*uverbs.SRQ, error) {
	const op = "create SRQ"
	if err := id.alive(op); err != nil {
		return nil, err
	}
	dev, err := id.device(op)
	if err != nil {
		return nil, err
	}
	if pd == nil {
		s, err := id.shared(op)
		if err != nil {
			return nil, err
		}
		pd = s.pd
	} else if name := pd.Context().Device().Name; name != dev.Name {
		return nil, opError(op, id.handle, fmt.Errorf("the PD is on %s, the ID on %s: %w", name, dev.Name, errInvalid))
	}
	srq, err := pd.CreateSRQ(cfg)
	if err != nil {
		return nil, opError(op, id.handle, err)
	}
	id.mu.Lock()
	if id.srq != nil || id.closed.Load() {
		id.mu.Unlock()
		srq.Close()
		return nil, opError(op, id.handle, fmt.Errorf("the ID has an SRQ already or is closed: %w", errInvalid))
	}
	id.srq, id.srqPD = srq, pd
	id.mu.Unlock()
	return srq, nil
}

// SRQ is the SRQ CreateSRQ made, nil before.
func (id *ID) SRQ() *uverbs.SRQ {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.srq
}

// DestroySRQ destroys the ID's SRQ (rdma_destroy_srq); destroy the QP
// that uses it first.
func (id *ID) DestroySRQ() error {
	if err := id.alive("destroy SRQ"); err != nil {
		return err
	}
	return id.destroySRQ()
}

func (id *ID) destroySRQ() error {
	id.mu.Lock()
	srq := id.srq
	id.srq, id.srqPD = nil, nil
	id.mu.Unlock()
	if srq == nil {
		return nil
	}
	if err := srq.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
		id.mu.Lock()
		if id.srq == nil { // still in use: keep it for a later try
			id.srq = srq
		}
		id.mu.Unlock()
		return opError("destroy SRQ", id.handle, err)
	}
	return nil
}
