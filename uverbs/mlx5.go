package uverbs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/mlx5"
)

// mlx5Provider is the provider of NVIDIA/Mellanox ConnectX devices
// (driver mlx5_ib; rdma-core's providers/mlx5): the library builds work
// queue entries in buffers it allocates, rings the device through UAR
// pages mapped from the command fd, and reads completions the device
// writes into CQ buffers. The device formats (WQE segments, CQEs,
// sizing, doorbell order) are in uverbs/internal/mlx5; this file is the
// control path: GET_CONTEXT's driver data, UARs, buffers and doorbell
// records, and the create commands' driver data.
//
// UARs are dynamic (MLX5_IB_METHOD_UAR_OBJ_ALLOC, kernels from 5.6):
// each QP gets a BlueFlame UAR page of its own, so its doorbell register
// and BlueFlame halves are never shared and posting takes no lock (the
// static bfreg table would share "medium latency" registers between QPs
// behind a spin lock), and the context has one non-cached UAR page for
// arming CQs. A kernel that answers GET_CONTEXT with static bfregs (no
// dynamic UAR support) is refused with ErrNotSupported.
type mlx5Provider struct {
	ctx  *Context
	resp abi.MLX5AllocUContextResp
	// cqUAR is the non-cached page CQ arm doorbells go to.
	cqUAR *mlx5UAR
	dbs   mlx5DBPool

	// uidx maps a QP's user index (the 24-bit number CREATE_QP names and
	// version-1 CQEs carry) to its queues: two levels of 4096 entries,
	// read without locks by Poll.
	uidxMu   sync.Mutex
	uidxFree []uint32
	uidxNext uint32
	uidx     [mlx5UIdxPages]atomic.Pointer[[mlx5UIdxPageLen]atomic.Pointer[mlx5QP]]
}

const (
	mlx5UIdxPageLen = 1 << 12
	mlx5UIdxPages   = 1 << 12 // 24-bit user indices
)

func (p *mlx5Provider) name() string { return "mlx5" }

// contextDriverData asks for what libmlx5 asks for (mlx5.c
// mlx5_alloc_context): version-1 CQEs (they carry the QP's user index),
// 4 KiB UAR pages and dynamic UARs; the bfreg counts are those libmlx5
// sends, which a kernel with dynamic UARs ignores. DEVX stays off: it
// needs CAP_NET_RAW and the verbs do not use it.
func (p *mlx5Provider) contextDriverData() ([]byte, int) {
	req := abi.MLX5AllocUContextReqV2{
		TotalNumBfregs:      16,
		NumLowLatencyBfregs: 4,
		MaxCQEVersion:       1,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	return abi.Bytes(&req), int(abiSize[abi.MLX5AllocUContextResp]())
}

func (p *mlx5Provider) contextCreated(out []byte) error {
	copy(abi.Bytes(&p.resp), out)
	r := &p.resp
	switch {
	case r.TotBfregs != 0:
		return fmt.Errorf("uverbs: mlx5: the kernel allocated %d static bfregs: dynamic UARs (Linux 5.6 or later) are needed: %w", r.TotBfregs, ErrNotSupported)
	case r.CQEVersion != 1:
		return fmt.Errorf("uverbs: mlx5: CQE version %d: version 1 is needed: %w", r.CQEVersion, ErrNotSupported)
	case r.BfRegSize == 0 || r.BfRegSize > 4096-mlx5BFOffset || r.BfRegSize&63 != 0:
		return &sys.Error{Op: "mlx5 GET_CONTEXT", Err: fmt.Errorf("BlueFlame register of %d bytes", r.BfRegSize)}
	}
	u, err := p.allocUAR(true)
	if err != nil {
		return err
	}
	p.cqUAR = u
	return nil
}

func (p *mlx5Provider) close() {
	p.freeUAR(p.cqUAR)
	p.cqUAR = nil
	p.dbs.close()
}

// newUIdx reserves a user index for a QP.
func (p *mlx5Provider) newUIdx(q *mlx5QP) (uint32, error) {
	p.uidxMu.Lock()
	defer p.uidxMu.Unlock()
	var i uint32
	if n := len(p.uidxFree); n > 0 {
		i = p.uidxFree[n-1]
		p.uidxFree = p.uidxFree[:n-1]
	} else {
		// mlx5.NoUIdx, the last 24-bit value, is the one version-1
		// contexts may not use.
		if p.uidxNext >= mlx5.NoUIdx {
			return 0, fmt.Errorf("uverbs: mlx5: CreateQP: all %d user indices are in use: %w", p.uidxNext, ErrBusy)
		}
		i = p.uidxNext
		p.uidxNext++
	}
	page := p.uidx[i/mlx5UIdxPageLen].Load()
	if page == nil {
		page = new([mlx5UIdxPageLen]atomic.Pointer[mlx5QP])
		p.uidx[i/mlx5UIdxPageLen].Store(page)
	}
	page[i%mlx5UIdxPageLen].Store(q)
	return i, nil
}

func (p *mlx5Provider) dropUIdx(i uint32) {
	p.uidxMu.Lock()
	defer p.uidxMu.Unlock()
	if page := p.uidx[i/mlx5UIdxPageLen].Load(); page != nil {
		page[i%mlx5UIdxPageLen].Store(nil)
	}
	p.uidxFree = append(p.uidxFree, i)
}

// qpByUIdx finds the QP a CQE names; nil for an index no QP holds.
func (p *mlx5Provider) qpByUIdx(i uint32) *mlx5QP {
	if i >= mlx5UIdxPages*mlx5UIdxPageLen {
		return nil
	}
	page := p.uidx[i/mlx5UIdxPageLen].Load()
	if page == nil {
		return nil
	}
	return page[i%mlx5UIdxPageLen].Load()
}

// limits are the device's queue limits from GET_CONTEXT.
func (p *mlx5Provider) limits() mlx5.Limits {
	r := &p.resp
	return mlx5.Limits{MaxSQDescSz: int(r.MaxSQDescSz), MaxRQDescSz: int(r.MaxRQDescSz),
		MaxSendWQEBB: int(r.MaxSendWqebb), MaxRecvWR: int(r.MaxRecvWR), MaxSRQRecvWR: int(r.MaxSRQRecvWR)}
}

// mlx5Prep is what a create command's preparation allocated: the queue
// buffer, the doorbell record, and for a QP its UAR and user index.
type mlx5Prep struct {
	p     *mlx5Provider
	buf   *mlx5Buf
	db    *mlx5DBRec
	uar   *mlx5UAR
	uidx  uint32
	hasU  bool
	qp    *mlx5QP // the QP the user index points at, filled by newQP
	cq    mlx5.CQSizing
	sq    mlx5.SQSizing
	rq    mlx5.RQSizing
	srq   mlx5.SRQSizing
	sqOff int
}

func (r *mlx5Prep) release() {
	p := r.p
	if r.hasU {
		p.dropUIdx(r.uidx)
		r.hasU = false
	}
	p.freeUAR(r.uar)
	p.dbs.put(r.db)
	r.buf.free()
	r.uar, r.db, r.buf = nil, nil, nil
}

// ---- completion queue ----

func (p *mlx5Provider) cqDriverData(size int) (driverReq, error) {
	sz, err := mlx5.CQSize(size, mlx5.CQESize, os.Getpagesize())
	if err != nil {
		return driverReq{}, fmt.Errorf("uverbs: CreateCQ: %w", err)
	}
	r := &mlx5Prep{p: p, cq: sz}
	if r.buf, err = allocMLX5Buf("CQ", sz.Bytes); err != nil {
		return driverReq{}, err
	}
	if r.db, err = p.dbs.get(); err != nil {
		r.release()
		return driverReq{}, err
	}
	mlx5.InitCQBuffer(r.buf.mem, sz)
	req, err := mlx5.CreateCQData(r.buf.addr(), r.db.addr(), sz, int(p.cqUAR.pageID))
	if err != nil {
		r.release()
		return driverReq{}, fmt.Errorf("uverbs: CreateCQ: mlx5: %v: %w", err, ErrNotSupported)
	}
	return driverReq{in: abi.Bytes(&req), outLen: int(abiSize[abi.MLX5CreateCQResp]()), size: sz.KernCQE,
		state: r, release: r.release}, nil
}

// mlx5CQ is a CQ's ring. Poll finds each completion's QP by the user
// index the CQE carries.
type mlx5CQ struct {
	p    *mlx5Provider
	cq   *CQ
	prep *mlx5Prep
	q    *mlx5.CQ
	cqe  mlx5.CQE
}

func (p *mlx5Provider) newCQ(cq *CQ, req driverReq, out []byte) (cqQueue, error) {
	r := req.state.(*mlx5Prep)
	var resp abi.MLX5CreateCQResp
	copy(abi.Bytes(&resp), out)
	q, err := mlx5.NewCQ(mlx5.CQConfig{Buf: r.buf.mem, Sizing: r.cq, CQN: resp.CQN, DBRec: r.db.mem,
		UAR: p.cqUAR.mem, Writer: mlx5.Device{}})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 CQ", Err: err}
	}
	return &mlx5CQ{p: p, cq: cq, prep: r, q: q}, nil
}

// mlx5WCFlags converts the decoder's flags (libibverbs' bits) to
// WCFlags (the kernel's) with one load.
var mlx5WCFlags = func() (t [16]WCFlags) {
	for k := range t {
		if k&mlx5.WCFlagGRH != 0 {
			t[k] |= WCWithGRH
		}
		if k&mlx5.WCFlagWithImm != 0 {
			t[k] |= WCWithImm
		}
		if k&mlx5.WCFlagWithInv != 0 {
			t[k] |= WCWithInv
		}
	}
	return t
}()

func (q *mlx5CQ) poll(wc []WorkCompletion) int {
	n := 0
	c := &q.cqe
	ci := q.q.ConsumerIndex()
	for n < len(wc) {
		got, ok := q.q.Poll(c)
		if !got {
			break
		}
		if !ok {
			continue // undecodable: consumed, as a corrupt entry must not wedge the queue
		}
		qp := q.p.qpByUIdx(c.SRQNUIdx)
		if qp == nil || qp.qp == nil {
			continue // a QP destroyed since (its CQEs were cleaned; a stray one is dropped)
		}
		w := &wc[n]
		w.Status, w.Opcode, w.VendorErr, w.ByteLen = WCStatus(c.Status), WCOpcode(c.WCOpcode), uint32(c.VendorErr), c.ByteLen
		w.QPNum, w.SrcQP, w.Flags = qp.qp.num, c.SrcQP, mlx5WCFlags[c.WCFlags&(mlx5.WCFlagGRH|mlx5.WCFlagWithImm|mlx5.WCFlagWithInv)]
		w.PKeyIndex, w.SLID, w.SL, w.DLIDPathBits, w.PortNum = c.PKeyIndex, c.SLID, c.SL, c.PathBits, 0
		w.Imm = 0
		if c.WCFlags&(mlx5.WCFlagWithImm|mlx5.WCFlagWithInv) != 0 {
			w.Imm = c.Imm // immediate data or the invalidated rkey, as in ibv_wc
		}
		switch {
		case c.Requester():
			w.WRID = qp.sq.Complete(c.WQECounter)
		case qp.srq != nil:
			w.WRID = qp.srq.complete(c.WQECounter)
		case qp.rq != nil:
			w.WRID = qp.rq.Complete(c.WQECounter)
		}
		if c.Status != mlx5.WCSuccess {
			q.p.ctx.sawErrorCompletion(qp.qp.num)
		}
		n++
	}
	// The doorbell record only when CQEs were consumed (undecodable and
	// stray ones included): an empty poll writes nothing.
	if q.q.ConsumerIndex() != ci {
		q.q.UpdateCI()
	}
	return n
}

func (q *mlx5CQ) resizeDriverOutLen() int { return 0 }

// fixedSize: mlx5's RESIZE_CQ moves the completions to a new buffer the
// library allocates and copies into; the provider does not do that yet.
func (q *mlx5CQ) fixedSize() string { return "the mlx5 provider does not resize CQs" }

// resized is never reached (fixedSize).
func (q *mlx5CQ) resized([]byte) error {
	return fmt.Errorf("uverbs: CQ.Resize: mlx5: %w", ErrNotSupported)
}

func (q *mlx5CQ) unmap() error {
	q.prep.release()
	return nil
}

// arm requests a completion event from user space (mlx5_arm_cq): the
// arm word in the doorbell record and the UAR's CQ doorbell.
func (q *mlx5CQ) arm(solicitedOnly bool) error {
	if err := q.q.Arm(solicitedOnly); err != nil {
		return &sys.Error{Op: "mlx5 arm CQ", Err: err}
	}
	return nil
}

// event counts a completion event for the next arm's sequence number.
func (q *mlx5CQ) event() {
	if q.cq.locks {
		q.cq.mu.Lock()
		defer q.cq.mu.Unlock()
	}
	q.q.Event()
}

// clean drops the CQEs of the QP with user index uidx (the QP is being
// reset or destroyed), freeing their SRQ WQEs, as mlx5_cq_clean. Locks
// are taken in Poll's order: the CQ's, then the SRQ's.
func (q *mlx5CQ) clean(uidx uint32, srq *mlx5SRQ) {
	if q.cq.locks {
		q.cq.mu.Lock()
		defer q.cq.mu.Unlock()
	}
	var s *mlx5.SRQ
	if srq != nil {
		if srq.srq.locks {
			srq.srq.mu.Lock()
			defer srq.srq.mu.Unlock()
		}
		s = srq.q
	}
	q.q.Clean(uidx, true, s)
}

// ---- queue pair ----

func mlx5QPType(t QPType) (mlx5.QPType, error) {
	switch t {
	case QPTypeRC:
		return mlx5.RC, nil
	case QPTypeUC:
		return mlx5.UC, nil
	case QPTypeUD:
		return mlx5.UD, nil
	}
	return 0, fmt.Errorf("uverbs: CreateQP: mlx5: QP type %v: %w", t, ErrNotSupported)
}

func (p *mlx5Provider) qpDriverData(cfg *QPConfig) (driverReq, error) {
	typ, err := mlx5QPType(cfg.Type)
	if err != nil {
		return driverReq{}, err
	}
	lim := p.limits()
	// Memory windows are not offered, so the send WQE has no room for a
	// bind (libmlx5 sizes RC and UC for one by default).
	sq, err := mlx5.SQSize(typ, false, int(cfg.Cap.MaxSendWR), int(cfg.Cap.MaxSendSGE), int(cfg.Cap.MaxInlineData), lim)
	if err != nil {
		return driverReq{}, fmt.Errorf("uverbs: CreateQP: %w", err)
	}
	rq, err := mlx5.RQSize(int(cfg.Cap.MaxRecvWR), int(cfg.Cap.MaxRecvSGE), cfg.SRQ != nil, lim)
	if err != nil {
		return driverReq{}, fmt.Errorf("uverbs: CreateQP: %w", err)
	}
	sqOff, bytes := mlx5.QPBuffer(sq, rq, os.Getpagesize())
	r := &mlx5Prep{p: p, sq: sq, rq: rq, sqOff: sqOff}
	if r.buf, err = allocMLX5Buf("QP", bytes); err != nil {
		return driverReq{}, err
	}
	if r.db, err = p.dbs.get(); err != nil {
		r.release()
		return driverReq{}, err
	}
	if r.uar, err = p.allocUAR(false); err != nil {
		r.release()
		return driverReq{}, err
	}
	r.qp = &mlx5QP{p: p}
	if r.uidx, err = p.newUIdx(r.qp); err != nil {
		r.release()
		return driverReq{}, err
	}
	r.hasU = true
	req := mlx5.CreateQPData(r.buf.addr(), r.db.addr(), sq, rq, r.uidx, int(r.uar.pageID))
	return driverReq{in: abi.Bytes(&req), outLen: int(abiSize[abi.MLX5CreateQPResp]()), state: r, release: r.release}, nil
}

// mlx5QP is a QP's send and receive queues. Its send queue rings the
// QP's own BlueFlame register.
type mlx5QP struct {
	p    *mlx5Provider
	qp   *QP
	prep *mlx5Prep
	sq   *mlx5.SQ
	rq   *mlx5.RQ // nil on an SRQ or without receives
	srq  *mlx5SRQ // the SRQ the QP receives from
	scq  *mlx5CQ
	rcq  *mlx5CQ
}

func (p *mlx5Provider) newQP(qp *QP, req driverReq, out []byte) (qpQueues, error) {
	r := req.state.(*mlx5Prep)
	var resp abi.MLX5CreateQPResp
	copy(abi.Bytes(&resp), out)
	typ, _ := mlx5QPType(qp.typ)
	q := r.qp
	q.qp, q.prep = qp, r
	q.scq, _ = qp.sendCQ.q.(*mlx5CQ)
	q.rcq, _ = qp.recvCQ.q.(*mlx5CQ)
	if q.scq == nil || q.rcq == nil {
		return nil, fmt.Errorf("uverbs: CreateQP: mlx5: CQs of another provider: %w", errInvalid)
	}
	bfSize := int(p.resp.BfRegSize)
	bf, err := mlx5.NewBlueFlame(r.uar.mem[mlx5BFOffset:mlx5BFOffset+bfSize], true, mlx5.Device{})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 QP", Err: err}
	}
	if r.sq.WQECnt > 0 {
		q.sq, err = mlx5.NewSQ(mlx5.SQConfig{Buf: r.buf.mem[r.sqOff : r.sqOff+r.sq.Bytes], Sizing: r.sq, QPN: qp.num,
			Type: typ, DBRec: r.db.mem, BlueFlame: bf, Writer: mlx5.Device{}})
		if err != nil {
			return nil, &sys.Error{Op: "mlx5 QP", Err: err}
		}
		q.sq.SignalAll = qp.sigAll
	}
	if r.rq.WQECnt > 0 {
		if q.rq, err = mlx5.NewRQ(r.buf.mem[:r.rq.Bytes], r.rq, r.db.mem, mlx5.Device{}); err != nil {
			return nil, &sys.Error{Op: "mlx5 QP", Err: err}
		}
	}
	if qp.srq != nil {
		if q.srq, _ = qp.srq.q.(*mlx5SRQ); q.srq == nil {
			return nil, fmt.Errorf("uverbs: CreateQP: mlx5: an SRQ of another provider: %w", errInvalid)
		}
	}
	// The caps the QP reports are what its queues hold.
	if q.sq != nil {
		qp.cap.MaxSendWR, qp.cap.MaxInlineData = uint32(r.sq.MaxPost), uint32(r.sq.MaxInline)
	}
	if q.rq != nil {
		qp.cap.MaxRecvWR, qp.cap.MaxRecvSGE = uint32(r.rq.MaxPost), uint32(r.rq.MaxGS)
	}
	return q, nil
}

func (q *mlx5QP) postSend(wr *SendWR) error {
	if q.sq == nil {
		return fmt.Errorf("uverbs post send: the QP has no send queue (MaxSendWR 0): %w", errInvalid)
	}
	var err error
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if err = q.postOneSend(wr); err != nil {
			q.sq.Abort()
			err = postError(i, wr.WRID, err)
			break
		}
	}
	q.sq.Ring()
	return err
}

func (q *mlx5QP) postOneSend(wr *SendWR) error {
	qp := q.qp
	if err := qp.checkSend(wr); err != nil {
		return err
	}
	var op uint8
	imm := uint32(0)
	switch wr.Opcode {
	case WRSend:
		op = mlx5.OpSend
	case WRSendWithImm:
		op, imm = mlx5.OpSendImm, wr.Imm
	case WRSendWithInv:
		op, imm = mlx5.OpSendInval, wr.InvalidateRKey
	case WRRDMAWrite:
		op = mlx5.OpRDMAWrite
	case WRRDMAWriteWithImm:
		op, imm = mlx5.OpRDMAWriteImm, wr.Imm
	case WRRDMARead:
		op = mlx5.OpRDMARead
	case WRAtomicCmpAndSwp:
		op = mlx5.OpAtomicCS
	case WRAtomicFetchAndAdd:
		op = mlx5.OpAtomicFA
	default:
		return fmt.Errorf("uverbs post send: %v: the mlx5 provider does not post it: %w", wr.Opcode, ErrNotSupported)
	}
	var fm uint8
	if wr.Flags&SendSignaled != 0 {
		fm |= mlx5.CtrlCQUpdate
	}
	if wr.Flags&SendSolicited != 0 {
		fm |= mlx5.CtrlSolicited
	}
	if wr.Flags&SendFence != 0 {
		fm |= mlx5.CtrlFence
	}
	sq := q.sq
	if err := sq.Begin(op, fm, imm); err != nil {
		return mlx5Err(err)
	}
	var err error
	switch op {
	case mlx5.OpRDMAWrite, mlx5.OpRDMAWriteImm, mlx5.OpRDMARead:
		err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey)
	case mlx5.OpAtomicCS:
		if err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey); err == nil {
			err = sq.Atomic(wr.Swap, wr.CompareAdd)
		}
	case mlx5.OpAtomicFA:
		if err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey); err == nil {
			err = sq.Atomic(wr.CompareAdd, 0)
		}
	default: // sends
		if qp.typ == QPTypeUD {
			av, _ := wr.AH.drv.(*mlx5.AV)
			if av == nil {
				return fmt.Errorf("uverbs post send: UD: an AH of another provider: %w", errInvalid)
			}
			err = sq.Datagram(av, wr.RemoteQPN, wr.RemoteQKey)
		}
	}
	if err != nil {
		return mlx5Err(err)
	}
	if wr.Flags&SendInline != 0 {
		for _, s := range wr.SGL {
			if s.Length == 0 {
				continue
			}
			if err := sq.Inline(mmio.BytesAt(s.Addr, int(s.Length))); err != nil {
				return mlx5Err(err)
			}
		}
	} else {
		for _, s := range wr.SGL {
			if err := sq.Data(s.Addr, s.Length, s.LKey); err != nil {
				return mlx5Err(err)
			}
		}
	}
	return mlx5Err(sq.Finish(wr.WRID))
}

// mlx5Err gives the device format's errors uverbs' classes: a full
// queue is ErrBusy, a request the queue cannot hold invalid.
func mlx5Err(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mlx5.ErrBusy):
		return errSendQueueFull
	}
	return &sys.Error{Op: "uverbs post send", Err: fmt.Errorf("%v: %w", err, errInvalid)}
}

func (q *mlx5QP) postRecv(wr *RecvWR) error {
	if q.srq != nil {
		return fmt.Errorf("uverbs post recv: the QP receives from an SRQ: %w", errInvalid)
	}
	if q.rq == nil {
		return fmt.Errorf("uverbs post recv: the QP has no receive queue (MaxRecvWR 0): %w", errInvalid)
	}
	return postRecvMLX5(q.rq, wr)
}

// mlx5Recv is a receive queue of a QP or an SRQ.
type mlx5Recv interface {
	Begin() error
	Data(addr uint64, length, lkey uint32) error
	Finish(wrID uint64) error
	Ring()
}

func postRecvMLX5[Q mlx5Recv](q Q, wr *RecvWR) error {
	var err error
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if err = postOneRecvMLX5(q, wr); err != nil {
			err = postError(i, wr.WRID, err)
			break
		}
	}
	q.Ring()
	return err
}

func postOneRecvMLX5[Q mlx5Recv](q Q, wr *RecvWR) error {
	if err := q.Begin(); err != nil {
		if errors.Is(err, mlx5.ErrBusy) {
			return errRecvQueueFull
		}
		return &sys.Error{Op: "uverbs post recv", Err: fmt.Errorf("%v: %w", err, errInvalid)}
	}
	for _, s := range wr.SGL {
		if err := q.Data(s.Addr, s.Length, s.LKey); err != nil {
			return &sys.Error{Op: "uverbs post recv", Err: fmt.Errorf("%v: %w", err, errInvalid)}
		}
	}
	if err := q.Finish(wr.WRID); err != nil {
		return &sys.Error{Op: "uverbs post recv", Err: fmt.Errorf("%v: %w", err, errInvalid)}
	}
	return nil
}

// reset empties the queues for a QP moved to RESET (mlx5_modify_qp):
// its CQEs leave both CQs, the rings and doorbell record start over.
func (q *mlx5QP) reset() {
	q.rcq.clean(q.prep.uidx, q.srq)
	if q.scq != q.rcq {
		q.scq.clean(q.prep.uidx, nil)
	}
	if q.sq != nil {
		q.sq.Reset()
	}
	if q.rq != nil {
		q.rq.Reset()
	}
}

func (q *mlx5QP) unmap() error {
	q.rcq.clean(q.prep.uidx, q.srq)
	if q.scq != q.rcq {
		q.scq.clean(q.prep.uidx, nil)
	}
	q.prep.release()
	return nil
}

// ---- shared receive queue ----

func (p *mlx5Provider) srqDriverData(cfg *SRQConfig) (driverReq, error) {
	sz, err := mlx5.SRQSize(int(cfg.MaxWR), int(cfg.MaxSGE), p.limits())
	if err != nil {
		return driverReq{}, fmt.Errorf("uverbs: CreateSRQ: %w", err)
	}
	r := &mlx5Prep{p: p, srq: sz}
	if r.buf, err = allocMLX5Buf("SRQ", sz.Bytes); err != nil {
		return driverReq{}, err
	}
	if r.db, err = p.dbs.get(); err != nil {
		r.release()
		return driverReq{}, err
	}
	// The SRQ's user index is kernel bookkeeping: receive CQEs carry
	// their QP's, so the table holds no queue for it.
	if r.uidx, err = p.newUIdx(nil); err != nil {
		r.release()
		return driverReq{}, err
	}
	r.hasU = true
	// The kernel derives the WQE size from max_sge and the ring from
	// max_wr: it gets the rounded values (mlx5_create_srq).
	cfg.MaxWR, cfg.MaxSGE = uint32(sz.MaxWR), uint32(sz.MaxGS)
	req := mlx5.CreateSRQData(r.buf.addr(), r.db.addr(), r.uidx)
	return driverReq{in: abi.Bytes(&req), outLen: int(abiSize[abi.MLX5CreateSRQResp]()), state: r, release: r.release}, nil
}

// mlx5SRQ is an SRQ's WQE list. Completions free WQEs under the SRQ's
// lock, as posts take them.
type mlx5SRQ struct {
	srq  *SRQ
	prep *mlx5Prep
	q    *mlx5.SRQ
}

func (p *mlx5Provider) newSRQ(srq *SRQ, req driverReq, out []byte) (srqQueue, error) {
	r := req.state.(*mlx5Prep)
	var resp abi.MLX5CreateSRQResp
	copy(abi.Bytes(&resp), out)
	q, err := mlx5.NewSRQ(r.buf.mem, r.srq, r.db.mem, mlx5.Device{})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 SRQ", Err: err}
	}
	srq.num = resp.SRQN
	srq.maxWR = uint32(r.srq.MaxWR)
	return &mlx5SRQ{srq: srq, prep: r, q: q}, nil
}

func (q *mlx5SRQ) postRecv(wr *RecvWR) error { return postRecvMLX5(q.q, wr) }

// complete frees the WQE of a receive completion and returns its id.
func (q *mlx5SRQ) complete(counter uint16) uint64 {
	if q.srq.locks {
		q.srq.mu.Lock()
		defer q.srq.mu.Unlock()
	}
	id, _ := q.q.Complete(counter)
	return id
}

// fixedSize: mlx5 SRQs keep their size (the kernel refuses a resize);
// MODIFY_SRQ arms the limit only.
func (q *mlx5SRQ) fixedSize() string { return "mlx5 SRQs cannot be resized" }

// modifyDriverData: MODIFY_SRQ on mlx5 carries no driver data.
func (q *mlx5SRQ) modifyDriverData() (in, out []byte) { return nil, nil }

func (q *mlx5SRQ) modified(resized bool) error {
	if resized {
		return fmt.Errorf("uverbs: SRQ.Modify: mlx5 cannot resize an SRQ: %w", ErrNotSupported)
	}
	return nil
}

func (q *mlx5SRQ) unmap() error {
	q.prep.release()
	return nil
}

// ---- address handle ----

func (p *mlx5Provider) ahDriverOutLen() int { return int(abiSize[abi.MLX5CreateAHResp]()) }

// ahCreated builds the AH's address vector (mlx5_create_ah): for RoCE
// the destination MAC from the kernel's response and the UDP source
// port from the flow label.
func (p *mlx5Provider) ahCreated(ah *AH, out []byte) error {
	var resp abi.MLX5CreateAHResp
	copy(abi.Bytes(&resp), out)
	a := ah.attr
	g := a.GRH
	pa, err := p.ctx.QueryPort(int(a.PortNum))
	if err != nil {
		return err
	}
	// The mlx5 rate code is the IB rate plus MLX5_STAT_RATE_OFFSET (the
	// kernel's ib_rate_to_mlx5); 0 is the port's own rate.
	rate := a.StaticRate
	if rate != 0 {
		rate += 5
	}
	var av mlx5.AV
	if pa.LinkLayer == LinkLayerEthernet {
		if p.resp.CmdsSuppUhw&abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH == 0 {
			return fmt.Errorf("uverbs: CreateAH: mlx5: the kernel does not return the destination MAC: %w", ErrNotSupported)
		}
		sport := uint16(0)
		if g.FlowLabel != 0 {
			sport = mlx5.FlowLabelToUDPSport(g.FlowLabel)
		}
		av = mlx5.RoCEAV(rate, a.SL, resp.DMAC, g.TrafficClass, g.HopLimit, g.SGIDIndex, g.FlowLabel, g.DGID, sport)
	} else {
		av = mlx5.IBAV(rate, a.SL, a.SrcPathBits, a.DLID, a.IsGlobal, g.TrafficClass, g.HopLimit, g.SGIDIndex, g.FlowLabel, g.DGID)
	}
	ah.drv = &av
	return nil
}
