package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// QPType is a queue pair's transport (ibv_qp_type).
type QPType uint8

const (
	QPTypeRC QPType = 2 // reliable connected
	QPTypeUC QPType = 3 // unreliable connected
	QPTypeUD QPType = 4 // unreliable datagram
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPCap are a queue pair's queue sizes (ibv_qp_cap).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// QPConfig describes a queue pair (ibv_qp_init_attr).
type QPConfig struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	// SRQ, if set, supplies receive buffers instead of the QP's own
	// receive queue (Cap.MaxRecvWR and MaxRecvSGE are then ignored).
	SRQ *SRQ
	Cap QPCap
	// SignalAll makes every send work request generate a completion, as
	// if each had SendSignaled.
	SignalAll bool
	// TD, if set, makes posting lock-free: one goroutine at a time only.
	TD *TD
}

// QP is a queue pair (ibv_qp). PostSend and PostRecv write work requests
// into memory shared with the kernel; posting sends costs one system call
// (the doorbell) per call, receives none.
//
// All methods are safe for concurrent use unless the QP was created with
// a TD, in which case PostSend and PostRecv must be called by one
// goroutine at a time.
type QP struct {
	resource
	typ        QPType
	num        uint32
	pd         *PD
	sendCQ     *CQ
	recvCQ     *CQ
	srq        *SRQ
	td         *TD
	cap        QPCap
	sigAll     bool
	userHandle uint64
	locks      bool
	smu, rmu   provider.QLock
	q          provider.QPQueues
	door       qpDoor // PostSend's direct path into a provider (door.go)
	// pv is what the provider knows of the QP. Its State is the QP's
	// state word: the QPState as last set or queried in its low byte,
	// and provider.ErrSeen once a completion in error or an error event
	// for the QP was seen since (the provider reads it in place: rxe's
	// PostRecv flushes receives posted in ERR). The provider layer's
	// QP table (Context.pc) holds pv, for a poll's error branch.
	pv provider.QP
	// mcast counts attached multicast groups: the kernel refuses to
	// destroy a QP that has any.
	mcast atomic.Int32
}

// CreateQP creates a queue pair on the PD (ibv_create_qp). The QP starts
// in the RESET state.
func (pd *PD) CreateQP(cfg QPConfig) (*QP, error) {
	if pd == nil {
		return nil, errNil("CreateQP", "PD")
	}
	c := pd.ctx
	if err := pd.alive("CreateQP"); err != nil {
		return nil, err
	}
	cfg.TD = pd.inheritTD(cfg.TD)
	if err := validateQPConfig(c, &cfg); err != nil {
		return nil, err
	}
	qp := &QP{typ: cfg.Type, pd: pd, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ, srq: cfg.SRQ, td: cfg.TD,
		sigAll: cfg.SignalAll, locks: lockFor(cfg.TD)}
	qp.resource = resource{ctx: c, kind: "QP"}
	qp.userHandle = c.newUserHandle(qp)

	capIn := abi.QPCap{MaxSendWR: cfg.Cap.MaxSendWR, MaxRecvWR: cfg.Cap.MaxRecvWR,
		MaxSendSGE: cfg.Cap.MaxSendSGE, MaxRecvSGE: cfg.Cap.MaxRecvSGE, MaxInlineData: cfg.Cap.MaxInlineData}
	if cfg.SRQ != nil {
		capIn.MaxRecvWR, capIn.MaxRecvSGE = 0, 0
	}
	var capOut abi.QPCap
	var qpNum uint32
	m := sys.NewMethod("uverbs CreateQP: QP_CREATE", abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE)
	m.Handle(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle)
	m.Handle(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, cfg.SendCQ.handle)
	m.Handle(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, cfg.RecvCQ.handle)
	h := m.NewHandle(abi.UVERBS_ATTR_CREATE_QP_HANDLE)
	m.InUint(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(cfg.Type), 8) // CONST_IN: 8 bytes, as rdma-core sends
	m.InUint(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, qp.userHandle, 8)
	m.In(abi.UVERBS_ATTR_CREATE_QP_CAP, abi.Bytes(&capIn))
	m.FD(abi.UVERBS_ATTR_CREATE_QP_EVENT_FD, c.async.Fd())
	if cfg.SignalAll {
		m.InUint(abi.UVERBS_ATTR_CREATE_QP_FLAGS, abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL, 4)
	}
	if cfg.SRQ != nil {
		m.Handle(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, cfg.SRQ.handle)
	}
	m.Out(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, abi.Bytes(&capOut))
	m.Out(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, abi.Bytes(&qpNum))
	req, err := c.prov.QPDriverData(&provider.QPConfig{Type: provider.QPType(cfg.Type), Cap: provider.QPCap(cfg.Cap), HasSRQ: cfg.SRQ != nil})
	if err != nil {
		c.dropUserHandle(qp.userHandle)
		return nil, providerErr("CreateQP", err)
	}
	driverOut := c.driverData(m, &req)
	if err := c.exec(m); err != nil {
		req.Abort()
		c.dropUserHandle(qp.userHandle)
		return nil, err
	}
	qp.handle = uint32(m.Result(h))
	qp.num = qpNum
	qp.cap = QPCap{MaxSendWR: capOut.MaxSendWR, MaxRecvWR: capOut.MaxRecvWR, MaxSendSGE: capOut.MaxSendSGE,
		MaxRecvSGE: capOut.MaxRecvSGE, MaxInlineData: capOut.MaxInlineData}
	qp.closer = qp.destroy
	pv := &qp.pv
	pv.Handle, pv.Num, pv.Type, pv.Cap = qp.handle, qp.num, provider.QPType(qp.typ), provider.QPCap(qp.cap)
	pv.SignalAll, pv.SendCQ, pv.RecvCQ = qp.sigAll, qp.sendCQ.q, qp.recvCQ.q
	// The capabilities were read for validateQPConfig's limits; an
	// error reading them counts as none (provider.CheckSend).
	pv.CapsEx, _ = c.capsEx()
	if qp.srq != nil {
		pv.SRQ = qp.srq.q
	}
	pv.State.Store(uint32(QPStateReset))
	q, err := c.prov.NewQP(&qp.pv, req, driverOut)
	if err != nil {
		qp.destroyKernel()
		req.Abort()
		c.dropUserHandle(qp.userHandle)
		return nil, providerErr("CreateQP", err)
	}
	qp.q = q
	qp.door.open(q)
	qp.cap = QPCap(qp.pv.Cap) // what the queues hold
	for _, r := range qp.deps() {
		r.use()
	}
	c.pc.AddQP(&qp.pv)
	c.track(&qp.resource)
	return qp, nil
}

func validateQPConfig(c *Context, cfg *QPConfig) error {
	switch cfg.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD:
	default:
		return fmt.Errorf("uverbs CreateQP: QP type %v: %w (RC, UC and UD are)", cfg.Type, ErrNotSupported)
	}
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return fmt.Errorf("uverbs CreateQP: SendCQ and RecvCQ are required: %w", errInvalid)
	}
	for _, r := range []*resource{&cfg.SendCQ.resource, &cfg.RecvCQ.resource} {
		if err := r.usable("CreateQP", c); err != nil {
			return err
		}
	}
	if cfg.SRQ != nil {
		if err := cfg.SRQ.usable("CreateQP", c); err != nil {
			return err
		}
	}
	if cfg.TD != nil {
		if err := cfg.TD.usable("CreateQP", c); err != nil {
			return err
		}
	}
	if cfg.Cap.MaxSendWR == 0 && cfg.Cap.MaxRecvWR == 0 && cfg.SRQ == nil {
		return fmt.Errorf("uverbs CreateQP: a QP needs a send or a receive queue (Cap.MaxSendWR, Cap.MaxRecvWR): %w", errInvalid)
	}
	maxWR := func(a *DeviceAttr) int { return a.MaxQPWR }
	maxSGE := func(a *DeviceAttr) int { return a.MaxSGE }
	for _, f := range []struct {
		name string
		v    uint32
		max  func(*DeviceAttr) int
	}{
		{"Cap.MaxSendWR", cfg.Cap.MaxSendWR, maxWR},
		{"Cap.MaxRecvWR", cfg.Cap.MaxRecvWR, maxWR},
		{"Cap.MaxSendSGE", cfg.Cap.MaxSendSGE, maxSGE},
		{"Cap.MaxRecvSGE", cfg.Cap.MaxRecvSGE, maxSGE},
		{"Cap.MaxInlineData", cfg.Cap.MaxInlineData, func(*DeviceAttr) int { return 0 }},
	} {
		if cfg.SRQ != nil && (f.name == "Cap.MaxRecvWR" || f.name == "Cap.MaxRecvSGE") {
			continue // ignored with an SRQ
		}
		if err := c.checkSize("CreateQP", f.name, uint64(f.v), f.max); err != nil {
			return err
		}
	}
	return nil
}

// deps are the objects a QP keeps in use.
func (qp *QP) deps() []*resource {
	d := []*resource{&qp.pd.resource, &qp.sendCQ.resource}
	if qp.recvCQ != qp.sendCQ {
		d = append(d, &qp.recvCQ.resource)
	}
	if qp.srq != nil {
		d = append(d, &qp.srq.resource)
	}
	if qp.td != nil {
		d = append(d, &qp.td.resource)
	}
	return d
}

func (qp *QP) destroyKernel() error {
	var resp abi.DestroyQPResp
	m := sys.NewMethod("uverbs QP.Close: QP_DESTROY", abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY)
	m.Handle(abi.UVERBS_ATTR_DESTROY_QP_HANDLE, qp.handle)
	m.Out(abi.UVERBS_ATTR_DESTROY_QP_RESP, abi.Bytes(&resp))
	return m.Exec(qp.ctx.fd, qp.ctx.driverID)
}

func (qp *QP) destroy() error {
	if n := qp.mcast.Load(); n > 0 {
		return sys.InUse("uverbs QP.Close (attached to multicast groups)", int(n))
	}
	if qp.locks {
		qp.smu.Lock()
		defer qp.smu.Unlock()
		qp.rmu.Lock()
		defer qp.rmu.Unlock()
	}
	if err := qp.destroyKernel(); err != nil {
		return err
	}
	err := qp.q.Unmap()
	qp.ctx.pc.RemoveQP(&qp.pv)
	qp.ctx.dropUserHandle(qp.userHandle)
	for _, r := range qp.deps() {
		r.release()
	}
	return err
}

// Close destroys the QP (ibv_destroy_qp). Detach it from multicast
// groups first.
func (qp *QP) Close() error {
	if qp == nil {
		return errNil("QP.Close", "QP")
	}
	if qp.mcast.Load() > 0 { // refuse before the closed flag flips
		return sys.InUse("uverbs QP.Close (attached to multicast groups)", int(qp.mcast.Load()))
	}
	return qp.closeAs("QP")
}

// Num is the QP number peers address (0 for a nil QP).
func (qp *QP) Num() uint32 {
	if qp == nil {
		return 0
	}
	return qp.num
}

// Type is the QP's transport (0 for a nil QP).
func (qp *QP) Type() QPType {
	if qp == nil {
		return 0
	}
	return qp.typ
}

// PD is the protection domain the QP was created on (nil for a nil QP).
func (qp *QP) PD() *PD {
	if qp == nil {
		return nil
	}
	return qp.pd
}

// SRQ is the shared receive queue the QP takes its receives from, nil
// without one.
func (qp *QP) SRQ() *SRQ {
	if qp == nil {
		return nil
	}
	return qp.srq
}

// Cap is what the device gave: at least what was asked for.
func (qp *QP) Cap() QPCap {
	if qp == nil {
		return QPCap{}
	}
	return qp.cap
}

// State is the QP state as last set by Modify or read by Query (RESET
// for a nil QP). The device may have moved the QP to ERR since; the
// library notices when Poll returns a completion in error for the QP or
// AsyncEvent an error event, and the next PostRecv then asks the kernel.
func (qp *QP) State() QPState {
	if qp == nil {
		return QPStateReset
	}
	return QPState(qp.pv.State.Load())
}

// PostSend posts a chain of send work requests (ibv_post_send) and rings
// the doorbell once. It does not allocate. A full send queue fails at
// once with an error matching ErrBusy; see PostError for partial posts.
//
// Sends are taken in RTS, SQD, SQE and ERR (in ERR they complete with
// WCWRFlushErr). In RESET, INIT and RTR PostSend fails with EINVAL,
// naming the state, before anything reaches the send queue.
//
// Should the doorbell itself fail after requests were written to the
// queue (the kernel has no way to take them back, and would run them at
// the next doorbell), the QP is moved to ERR, so that they complete
// with WCWRFlushErr instead of running, and the error says so.
//
// No stack check: the frame is small, and what it calls checks its own
// (docs/performance.md).
//
//go:nosplit
func (qp *QP) PostSend(wr *SendWR) error {
	if qp == nil || wr == nil {
		return errNilPost("PostSend", qp == nil)
	}
	if qp.locks {
		return qp.postSendLocked(wr)
	}
	// The TD path: no lock, and no further frame before the provider.
	if qp.closed.Load() {
		return errClosedQPSend
	}
	if st := QPState(qp.pv.State.Load()); st < QPStateRTS {
		return errSendNotReady[st]
	}
	w := sendWRView(wr)
	if r := qp.door.rxe; r != nil { // a direct call: no dispatch (door.go)
		return r.PostSend(w)
	}
	return qp.q.PostSend(w)
}

// postSendLocked is PostSend for a QP without a TD, kept apart so that
// the TD path, the one for speed, keeps its small frame (one frame for
// both costs the TD path about 10 instructions a post). The lock is
// released without a defer (a deferred unlock costs about 20
// instructions a post): the providers' PostSend does not panic (an
// inline address of no mapping is an error, provider.CopyInline).
// PostRecv is split the same way (with a deferred unlock still); Poll
// takes its lock in place (door.go).
//
//go:nosplit
func (qp *QP) postSendLocked(wr *SendWR) error {
	qp.smu.Lock()
	if st := QPState(qp.pv.State.Load()); qp.closed.Load() || st < QPStateRTS {
		err := qp.sendRefused(st)
		qp.smu.Unlock()
		return err
	}
	w := sendWRView(wr)
	var err error
	if r := qp.door.rxe; r != nil { // a direct call: no dispatch (door.go)
		err = r.PostSend(w)
	} else {
		err = qp.q.PostSend(w)
	}
	qp.smu.Unlock()
	return err
}

// sendRefused is the error of a post to a closed QP or, in state st, one
// not yet in RTS, out of postSendLocked's way.
//
//go:noinline
func (qp *QP) sendRefused(st QPState) error {
	if qp.closed.Load() {
		return errClosedQPSend
	}
	return errSendNotReady[st]
}

// PostRecv posts a chain of receive work requests (ibv_post_recv). It
// makes no system call and does not allocate, except on a QP in ERR,
// where rxe needs a call to flush the new requests with WCWRFlushErr as
// the verbs require. The QP counts as maybe in ERR once Poll returned a
// completion in error for it or AsyncEvent an error event: the first
// PostRecv after that asks the kernel (QUERY_QP) which state it is in.
// A QP with an SRQ has no receive queue: post to the SRQ.
//
// The library does not learn of an ERR that shows in neither (a QP the
// remote side moved to ERR while it had no receive posted and no send
// outstanding): call Query, which refreshes the state, or move the QP to
// ERR yourself before relying on receives posted to it completing.
func (qp *QP) PostRecv(wr *RecvWR) error {
	if qp == nil || wr == nil {
		return errNilPost("PostRecv", qp == nil)
	}
	if qp.locks {
		return qp.postRecvLocked(wr)
	}
	return qp.postRecvUnlocked(wr)
}

func (qp *QP) postRecvLocked(wr *RecvWR) error {
	qp.rmu.Lock()
	defer qp.rmu.Unlock()
	return qp.postRecvUnlocked(wr)
}

func (qp *QP) postRecvUnlocked(wr *RecvWR) error {
	if qp.closed.Load() {
		return errClosedQPRecv
	}
	if qp.srq != nil {
		return errRecvOnSRQQP
	}
	if QPState(qp.pv.State.Load()) == QPStateReset { // C10-97.2.1
		return errRecvInReset
	}
	return qp.q.PostRecv(recvWRView(wr))
}

var (
	errClosedQPSend = &sys.Error{Op: "uverbs PostSend", Err: fmt.Errorf("QP: %w", ErrClosed)}
	errClosedQPRecv = &sys.Error{Op: "uverbs PostRecv", Err: fmt.Errorf("QP: %w", ErrClosed)}
	errRecvOnSRQQP  = &sys.Error{Op: "uverbs PostRecv", Err: fmt.Errorf("the QP takes receives from its SRQ: %w", errInvalid)}
	errRecvInReset  = &sys.Error{Op: "uverbs PostRecv", Err: fmt.Errorf("QP in RESET: %w", errInvalid)}
	// errSendNotReady, by state: sends are refused before RTS
	// (preallocated: the check is on the fast path).
	errSendNotReady = [...]error{
		QPStateReset: errSendInState(QPStateReset),
		QPStateInit:  errSendInState(QPStateInit),
		QPStateRTR:   errSendInState(QPStateRTR),
	}
)

func errSendInState(st QPState) error {
	return &sys.Error{Op: "uverbs PostSend", Err: fmt.Errorf("QP in %v, sends are taken from RTS on: %w", st, errInvalid)}
}

// errNilPost is the error of a post with a nil QP (nilQP) or a nil work
// request.
func errNilPost(op string, nilQP bool) error {
	if nilQP {
		return errNil(op, "QP")
	}
	return errNil(op, "work request")
}
