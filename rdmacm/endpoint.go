package rdmacm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/purerdma/rdma/uverbs"
)

// This file is librdmacm's endpoint ownership: what an ID makes and
// owns for its caller (CreateQP's QP, CQs and completion channels,
// CreateSRQ's SRQ, CreateEP's QP template) and the state of the
// rdma_verbs.h short forms (verbs.go, compwait.go). The connection state
// machine (id.go, qp.go) knows only the QP it drives; a QP from
// AttachQP has no endpoint part.

// endpoint is what an ID owns besides its kernel ID; its fields are
// guarded by the ID's mu, but comp and the inline buffer, which guard
// themselves.
type endpoint struct {
	qpOwned bool                // CreateQP made the ID's QP: Close destroys it
	sendCQ  *uverbs.CQ          // CreateQP's QP's CQs (made here or given in its config)
	recvCQ  *uverbs.CQ          //
	sendCh  *uverbs.CompChannel // the channels of the CQs made here
	recvCh  *uverbs.CompChannel //
	owned   []closer            // CQs and channels made here, closed after the QP
	srq     *uverbs.SRQ
	srqPD   *uverbs.PD

	template *QPOptions // CreateEP's QP for the requests of a listener

	comp compWaits // GetSendComp's and GetRecvComp's waits

	inlineMu sync.Mutex
	inline   []byte // PostSendInline's copy of the data
}

type closer interface{ Close() error }

// takeQP forgets the QP's part of the endpoint and returns the objects
// it made, to be closed in that order after the QP.
func (e *endpoint) takeQP() (qpOwned bool, owned []closer) {
	qpOwned, owned = e.qpOwned, e.owned
	e.qpOwned, e.sendCQ, e.recvCQ, e.sendCh, e.recvCh, e.owned = false, nil, nil, nil, nil, nil
	return qpOwned, owned
}

// closeOwned closes what takeQP returned, newest first.
func closeOwned(owned []closer) error {
	var errs []error
	for i := len(owned) - 1; i >= 0; i-- {
		if err := owned[i].Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

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
	const op = "CreateQP"
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
	if cfg.SRQ == nil && id.ep.srq != nil {
		cfg.SRQ = id.ep.srq
		if pd == nil {
			pd = id.ep.srqPD
		}
	}
	id.mu.Unlock()
	if pd, err = id.endpointPD(op, dev, pd); err != nil {
		return nil, err
	}
	var owned []closer
	undo := func() { closeOwned(owned) }
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
	id.qp, id.qpPD, id.qpSRQ, id.ep.qpOwned, id.qpAccess = qp, pd, cfg.SRQ != nil, true, 0
	id.ep.sendCQ, id.ep.recvCQ, id.ep.owned = cfg.SendCQ, cfg.RecvCQ, owned
	id.ep.sendCh, id.ep.recvCh = sendCh, recvCh
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

// CQs are the send and receive CQs of the ID's QP.
func (id *ID) CQs() (send, recv *uverbs.CQ) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.ep.sendCQ, id.ep.recvCQ
}

// CreateSRQ creates a shared receive queue for the ID on pd
// (rdma_create_srq): the QP CreateQP makes afterwards takes its receives
// from it, and PostRecv posts to it. pd nil means the default PD of the
// shared Context. The ID owns the SRQ: Close (or DestroySRQ) destroys it
// after the QP.
func (id *ID) CreateSRQ(pd *uverbs.PD, cfg uverbs.SRQConfig) (*uverbs.SRQ, error) {
	const op = "CreateSRQ"
	if err := id.alive(op); err != nil {
		return nil, err
	}
	dev, err := id.device(op)
	if err != nil {
		return nil, err
	}
	if pd, err = id.endpointPD(op, dev, pd); err != nil {
		return nil, err
	}
	srq, err := pd.CreateSRQ(cfg)
	if err != nil {
		return nil, opError(op, id.handle, err)
	}
	id.mu.Lock()
	if id.ep.srq != nil || id.closed.Load() {
		id.mu.Unlock()
		srq.Close()
		return nil, opError(op, id.handle, fmt.Errorf("the ID has an SRQ already or is closed: %w", errInvalid))
	}
	id.ep.srq, id.ep.srqPD = srq, pd
	id.mu.Unlock()
	return srq, nil
}

// SRQ is the SRQ CreateSRQ made, nil before.
func (id *ID) SRQ() *uverbs.SRQ {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.ep.srq
}

// DestroySRQ destroys the ID's SRQ (rdma_destroy_srq); destroy the QP
// that uses it first.
func (id *ID) DestroySRQ() error {
	if err := id.alive("DestroySRQ"); err != nil {
		return err
	}
	return id.destroySRQ()
}

func (id *ID) destroySRQ() error {
	id.mu.Lock()
	srq := id.ep.srq
	id.ep.srq, id.ep.srqPD = nil, nil
	id.mu.Unlock()
	if srq == nil {
		return nil
	}
	if err := srq.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
		id.mu.Lock()
		if id.ep.srq == nil { // still in use: keep it for a later try
			id.ep.srq = srq
		}
		id.mu.Unlock()
		return opError("DestroySRQ", id.handle, err)
	}
	return nil
}

// endpointPD is the PD an ID's QP or SRQ goes on: pd, which must be on
// the ID's device dev, or with pd nil the default PD of the shared
// Context.
func (id *ID) endpointPD(op string, dev uverbs.Device, pd *uverbs.PD) (*uverbs.PD, error) {
	if pd == nil {
		s, err := id.shared(op)
		if err != nil {
			return nil, err
		}
		return s.pd, nil
	}
	if name := pd.Context().Device().Name; name != dev.Name {
		return nil, opError(op, id.handle, fmt.Errorf("the PD is on %s, the ID on %s: %w", name, dev.Name, errInvalid))
	}
	return pd, nil
}
