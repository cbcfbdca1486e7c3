package rdmacm

import (
	"errors"
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs"
)

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
	const op = "AttachQP"
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
	id.qp, id.qpPD, id.qpSRQ, id.ep.qpOwned, id.qpAccess = qp, qp.PD(), qp.SRQ() != nil, false, addAccess
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

func (id *ID) hasQP() bool { return id.QP() != nil }

// DestroyQP destroys the ID's QP and the CQs CreateQP made for it
// (rdma_destroy_qp), leaving the ID open. A QP from AttachQP is only
// forgotten (and detached from the ID's multicast groups): its owner
// closes it.
func (id *ID) DestroyQP() error {
	if err := id.alive("DestroyQP"); err != nil {
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
	qp := id.qp
	id.qp, id.qpPD, id.qpAccess = nil, nil, 0
	mine, owned := id.ep.takeQP()
	id.mu.Unlock()
	if qp != nil && mine {
		if err := qp.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := closeOwned(owned); err != nil {
		errs = append(errs, err)
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
	const op = "InitQPAttr"
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
