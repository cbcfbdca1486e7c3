package mlx5

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// Provider is the provider of NVIDIA/Mellanox ConnectX devices
// (driver mlx5_ib; rdma-core's providers/mlx5): the library builds work
// queue entries in buffers it allocates, rings the device through UAR
// pages mapped from the command fd, and reads completions the device
// writes into CQ buffers. The device formats (WQE segments, CQEs,
// sizing, doorbell order) are the package's other files; this one
// joins them to uverbs: GET_CONTEXT's driver data, UARs, buffers and
// doorbell records (mem.go), the create commands' driver data, and the
// queues' translation of uverbs' work requests and completions.
//
// UARs are dynamic (MLX5_IB_METHOD_UAR_OBJ_ALLOC, kernels from 5.6):
// each QP gets a BlueFlame UAR page of its own, so its doorbell register
// and BlueFlame halves are never shared and posting takes no lock (the
// static bfreg table would share "medium latency" registers between QPs
// behind a spin lock), and the context has one non-cached UAR page for
// arming CQs. A kernel that answers GET_CONTEXT with static bfregs (no
// dynamic UAR support) is refused with ErrNotSupported.
type Provider struct {
	ctx  *provider.Context
	resp abi.MLX5AllocUContextResp
	// cqUAR is the non-cached page CQ arm doorbells go to.
	cqUAR *uarPage
	dbs   dbPool

	// uidx maps a QP's user index (the 24-bit number CREATE_QP names and
	// version-1 CQEs carry) to its queues: two levels of 4096 entries,
	// read without locks by Poll.
	uidxMu   sync.Mutex
	uidxFree []uint32
	uidxNext uint32
	uidx     [uidxPages]atomic.Pointer[[uidxPageLen]atomic.Pointer[provQP]]
}

const (
	uidxPageLen = 1 << 12
	uidxPages   = 1 << 12 // 24-bit user indices
)

// NewProvider returns the mlx5 provider of a context.
func NewProvider(ctx *provider.Context) *Provider { return &Provider{ctx: ctx} }

func (p *Provider) Name() string { return "mlx5" }

// spans is the context's registered memory (none without a context, in
// tests).
func (p *Provider) spans() *provider.Spans {
	if p.ctx == nil {
		return nil
	}
	return p.ctx.Spans()
}

// contextDriverData asks for what libmlx5 asks for (c
// mlx5_alloc_context): version-1 CQEs (they carry the QP's user index),
// 4 KiB UAR pages and dynamic UARs; the bfreg counts are those libmlx5
// sends, which a kernel with dynamic UARs ignores. DEVX stays off: it
// needs CAP_NET_RAW and the verbs do not use it.
func (p *Provider) ContextDriverData() ([]byte, int) {
	req := abi.MLX5AllocUContextReqV2{
		TotalNumBfregs:      16,
		NumLowLatencyBfregs: 4,
		MaxCQEVersion:       1,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	return abi.Bytes(&req), abi.Size[abi.MLX5AllocUContextResp]()
}

func (p *Provider) ContextCreated(out []byte) error {
	copy(abi.Bytes(&p.resp), out)
	r := &p.resp
	switch {
	case r.TotBfregs != 0:
		return fmt.Errorf("mlx5: the kernel allocated %d static bfregs: dynamic UARs (Linux 5.6 or later) are needed: %w", r.TotBfregs, sys.ErrNotSupported)
	case r.CQEVersion != 1:
		return fmt.Errorf("mlx5: CQE version %d: version 1 is needed: %w", r.CQEVersion, sys.ErrNotSupported)
	case r.BfRegSize == 0 || r.BfRegSize > 4096-bfOffset || r.BfRegSize&63 != 0:
		return &sys.Error{Op: "mlx5 GET_CONTEXT", Err: fmt.Errorf("BlueFlame register of %d bytes", r.BfRegSize)}
	}
	u, err := p.allocUAR(true)
	if err != nil {
		return err
	}
	p.cqUAR = u
	return nil
}

func (p *Provider) Close() {
	p.freeUAR(p.cqUAR)
	p.cqUAR = nil
	p.dbs.close()
}

// newUIdx reserves a user index for a QP.
func (p *Provider) newUIdx(q *provQP) (uint32, error) {
	p.uidxMu.Lock()
	defer p.uidxMu.Unlock()
	var i uint32
	if n := len(p.uidxFree); n > 0 {
		i = p.uidxFree[n-1]
		p.uidxFree = p.uidxFree[:n-1]
	} else {
		// NoUIdx, the last 24-bit value, is the one version-1
		// contexts may not use.
		if p.uidxNext >= NoUIdx {
			return 0, fmt.Errorf("mlx5: all %d user indices are in use: %w", p.uidxNext, sys.ErrBusy)
		}
		i = p.uidxNext
		p.uidxNext++
	}
	page := p.uidx[i/uidxPageLen].Load()
	if page == nil {
		page = new([uidxPageLen]atomic.Pointer[provQP])
		p.uidx[i/uidxPageLen].Store(page)
	}
	page[i%uidxPageLen].Store(q)
	return i, nil
}

func (p *Provider) dropUIdx(i uint32) {
	p.uidxMu.Lock()
	defer p.uidxMu.Unlock()
	if page := p.uidx[i/uidxPageLen].Load(); page != nil {
		page[i%uidxPageLen].Store(nil)
	}
	p.uidxFree = append(p.uidxFree, i)
}

// qpByUIdx finds the QP a CQE names; nil for an index no QP holds.
func (p *Provider) qpByUIdx(i uint32) *provQP {
	if i >= uidxPages*uidxPageLen {
		return nil
	}
	page := p.uidx[i/uidxPageLen].Load()
	if page == nil {
		return nil
	}
	return page[i%uidxPageLen].Load()
}

// limits are the device's queue limits from GET_CONTEXT.
func (p *Provider) limits() Limits {
	r := &p.resp
	return Limits{MaxSQDescSz: int(r.MaxSQDescSz), MaxRQDescSz: int(r.MaxRQDescSz),
		MaxSendWQEBB: int(r.MaxSendWqebb), MaxRecvWR: int(r.MaxRecvWR), MaxSRQRecvWR: int(r.MaxSRQRecvWR)}
}

// prep is what a create command's preparation allocated: the queue
// buffer, the doorbell record, and for a QP its UAR and user index.
type prep struct {
	p     *Provider
	buf   *qbuf
	db    *dbRec
	uar   *uarPage
	uidx  uint32
	hasU  bool
	qp    *provQP // the QP the user index points at, filled by newQP
	cq    CQSizing
	sq    SQSizing
	rq    RQSizing
	srq   SRQSizing
	sqOff int
}

// newPrep allocates what every queue's preparation has: a queue buffer of
// size bytes and a doorbell record.
func (p *Provider) newPrep(what string, size int) (*prep, error) {
	r := &prep{p: p}
	var err error
	if r.buf, err = allocBuf(what, size); err != nil {
		return nil, err
	}
	if r.db, err = p.dbs.get(); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

func (r *prep) release() {
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

func (p *Provider) CQDriverData(size int) (provider.DriverReq, error) {
	sz, err := CQSize(size, CQESize, os.Getpagesize())
	if err != nil {
		return provider.DriverReq{}, fmt.Errorf("mlx5: %w", err)
	}
	r, err := p.newPrep("CQ", sz.Bytes)
	if err != nil {
		return provider.DriverReq{}, err
	}
	r.cq = sz
	InitCQBuffer(r.buf.mem, sz)
	req, err := CreateCQData(r.buf.addr(), r.db.addr(), sz, int(p.cqUAR.pageID))
	if err != nil {
		r.release()
		return provider.DriverReq{}, fmt.Errorf("mlx5: %v: %w", err, sys.ErrNotSupported)
	}
	return provider.DriverReq{In: abi.Bytes(&req), OutLen: abi.Size[abi.MLX5CreateCQResp](), Size: sz.KernCQE,
		State: r, Release: r.release}, nil
}

// ProvCQ is a CQ's ring, the provider.CQQueue of an mlx5 CQ (exported
// for uverbs' door, which polls a CQ in a thread domain without the
// interface). Poll finds each completion's QP by the user index the CQE
// carries.
type ProvCQ struct {
	p    *Provider
	cq   *provider.CQ
	prep *prep
	q    *CQ
	cqe  CQE

	// A resize between ResizeReq and Resized: the new buffer.
	resize   *qbuf
	resizeSz CQSizing
}

func (p *Provider) NewCQ(cq *provider.CQ, req provider.DriverReq, out []byte) (provider.CQQueue, error) {
	r := req.State.(*prep)
	var resp abi.MLX5CreateCQResp
	copy(abi.Bytes(&resp), out)
	q, err := NewCQ(CQConfig{Buf: r.buf.mem, Sizing: r.cq, CQN: resp.CQN, DBRec: r.db.mem,
		UAR: p.cqUAR.mem, Writer: Device{}})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 CQ", Err: err}
	}
	return &ProvCQ{p: p, cq: cq, prep: r, q: q}, nil
}

// wcFlags converts the decoder's flags (libibverbs' bits) to
// WCFlags (the kernel's) with one load.
var wcFlags = func() (t [16]provider.WCFlags) {
	for k := range t {
		if k&WCFlagGRH != 0 {
			t[k] |= provider.WCWithGRH
		}
		if k&WCFlagWithImm != 0 {
			t[k] |= provider.WCWithImm
		}
		if k&WCFlagWithInv != 0 {
			t[k] |= provider.WCWithInv
		}
	}
	return t
}()

// Poll moves up to len(wc) completions into wc and returns how many.
// An empty CQ costs the ownership test of one CQE, before anything else
// (not even a stack check: the frame is small, and what Poll calls
// checks its own). Poll reads requesters' successes in place; from the
// first CQE of another kind on, pollRest takes the poll over, so that
// no call but the doorbell record's is made from this frame and nothing
// in it is saved across one.
//
//go:nosplit
func (q *ProvCQ) Poll(wc []provider.WC) int {
	cq, b := q.q, q.q.peek() // one line: q.q's load carries peek's inline mark (no NOP)
	if b == nil || len(wc) == 0 {
		return 0
	}
	n := 0
	for {
		// The loads of the CQE ordered after its owner byte, which peek
		// found software's: an acquire load of its last word (op_own
		// again) and what mmio.AcquireBarrier does, nothing on amd64
		// (x86 keeps loads from write-back memory in order and the
		// acquire load holds the compiler, where libmlx5 issues LFENCE)
		// and a read barrier elsewhere (docs/providers.md). Then a
		// requester's success in the plain format (opcode 0, no
		// compression bits), read in place, without decoding a CQE. One
		// line: the test's instructions carry AcquireWord's inline mark
		// (no NOP).
		if mmio.AcquireWord((*[4]byte)(b[CQESize-4:])); b[63]&0xfc != CQEReq<<4 {
			return q.pollRest(wc, n)
		}
		qp := q.p.qpByUIdx(be.Uint32(b[32:]) & 0xffffff)
		if qp == nil || qp.qp == nil || qp.sq == nil {
			return q.pollRest(wc, n)
		}
		cq.ci++ // cq.Next(), written out (its inline mark would be a NOP)
		op, flags, byteLen := reqCompletion(b)
		w := &wc[n]
		w.WRID, w.Status, w.Opcode, w.VendorErr, w.ByteLen = qp.sq.Complete(be.Uint16(b[60:])), WCSuccess, uint32(op), 0, byteLen
		w.Imm, w.QPNum, w.SrcQP, w.Flags = 0, qp.qp.Num, 0, wcFlags[flags]
		w.PKeyIndex, w.SLID, w.SL, w.DLIDPathBits, w.PortNum = 0, 0, 0, 0, 0
		n++
		if n == len(wc) {
			break
		}
		if b = cq.peek(); b == nil {
			break
		}
	}
	// n CQEs consumed: the doorbell record (an empty poll wrote nothing).
	if cq.dev {
		cq.updateCIDev()
	} else {
		cq.UpdateCI()
	}
	return n
}

// pollRest is Poll from the CQE at the consumer index on, with n
// completions of requesters' successes already in wc (their CQEs
// consumed), once Poll met a CQE it does not read in place: each CQE
// decoded (pollDecoded) until wc is full or the CQ empty, then the
// doorbell record, written when CQEs were consumed (undecodable and
// stray ones included).
func (q *ProvCQ) pollRest(wc []provider.WC, n int) int {
	cq := q.q
	start := cq.ConsumerIndex() - uint32(n) // Poll consumed one CQE a completion
	for n < len(wc) && cq.peek() != nil {
		n += q.pollDecoded(wc[n:])
	}
	if cq.ConsumerIndex() != start {
		if cq.dev {
			cq.updateCIDev()
		} else {
			cq.UpdateCI()
		}
	}
	return n
}

// pollDecoded decodes the CQE software owns at the consumer index,
// consumes it, and moves its completion into wc[0] (1), or drops it
// (0): undecodable (a corrupt entry must not wedge the queue), or of a
// QP destroyed since (its CQEs were cleaned; a stray one is dropped).
func (q *ProvCQ) pollDecoded(wc []provider.WC) int {
	c := &q.cqe
	got, ok := q.q.Poll(c)
	if !got || !ok {
		return 0
	}
	qp := q.p.qpByUIdx(c.SRQNUIdx)
	if qp == nil || qp.qp == nil {
		return 0
	}
	w := &wc[0]
	w.Status, w.Opcode, w.VendorErr, w.ByteLen = uint32(c.Status), uint32(c.WCOpcode), uint32(c.VendorErr), c.ByteLen
	w.QPNum, w.SrcQP, w.Flags = qp.qp.Num, c.SrcQP, wcFlags[c.WCFlags&(WCFlagGRH|WCFlagWithImm|WCFlagWithInv)]
	w.PKeyIndex, w.SLID, w.SL, w.DLIDPathBits, w.PortNum = c.PKeyIndex, c.SLID, c.SL, c.PathBits, 0
	w.Imm = 0
	if c.WCFlags&(WCFlagWithImm|WCFlagWithInv) != 0 {
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
	if c.Status != WCSuccess {
		q.p.ctx.SawErrorCompletion(qp.qp.Num)
	}
	return 1
}

func (q *ProvCQ) ResizeDriverOutLen() int { return 0 }

// ResizeReq prepares RESIZE_CQ as verbs.c mlx5_resize_cq does: the size
// rounds as CreateCQ's does (same when that is the CQ's size already:
// no command), and a new buffer, every CQE the device's, is named in the
// driver data. A size below the completions waiting in the CQ is
// refused: the new buffer must take them.
func (q *ProvCQ) ResizeReq(size int) (provider.DriverReq, bool, error) {
	sz, err := CQSize(size, CQESize, os.Getpagesize())
	if err != nil {
		return provider.DriverReq{}, false, fmt.Errorf("mlx5: %w", err)
	}
	if uint32(sz.NCQE) == q.q.ncqe {
		return provider.DriverReq{}, true, nil
	}
	if n := q.q.Pending(); n > sz.KernCQE {
		return provider.DriverReq{}, false, fmt.Errorf("mlx5: %d entries hold fewer than the %d completions waiting: %w", sz.KernCQE, n, sys.ErrInvalid)
	}
	buf, err := allocBuf("CQ", sz.Bytes)
	if err != nil {
		return provider.DriverReq{}, false, fmt.Errorf("mlx5: %w", err)
	}
	InitCQBuffer(buf.mem, sz)
	q.resize, q.resizeSz = buf, sz
	d := ResizeCQData(buf.addr(), sz)
	return provider.DriverReq{In: abi.Bytes(&d), Size: sz.KernCQE, Release: q.dropResize}, false, nil
}

// dropResize frees the buffer of a resize whose command failed.
func (q *ProvCQ) dropResize() {
	q.resize.free()
	q.resize = nil
}

// Resized moves the CQ to the buffer ResizeReq named, now that the
// device writes it, and frees the old one.
func (q *ProvCQ) Resized([]byte) error {
	buf := q.resize
	if buf == nil {
		return fmt.Errorf("mlx5: no resize prepared: %w", sys.ErrInvalid)
	}
	q.resize = nil
	_, err := q.q.Resize(buf.mem, q.resizeSz)
	if err != nil && errors.Is(err, ErrInvalid) {
		// Nothing moved; the device has the buffer, so it stays mapped
		// until Unmap.
		q.resize = buf
		return err
	}
	old := q.prep.buf
	q.prep.buf, q.prep.cq = buf, q.resizeSz
	if ferr := old.free(); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil { // ErrResizeLost: the CQ works on at its new size
		return err
	}
	return nil
}

func (q *ProvCQ) Unmap() error {
	q.resize.free()
	q.resize = nil
	q.prep.release()
	return nil
}

// arm requests a completion event from user space (mlx5_arm_cq): the
// arm word in the doorbell record and the UAR's CQ doorbell.
func (q *ProvCQ) Arm(solicitedOnly bool) error {
	if err := q.q.Arm(solicitedOnly); err != nil {
		return &sys.Error{Op: "mlx5 arm CQ", Err: err}
	}
	return nil
}

// event counts a completion event for the next arm's sequence number.
func (q *ProvCQ) Event() {
	if l := q.cq.Lock; l != nil {
		l.Lock()
		defer l.Unlock()
	}
	q.q.Event()
}

// clean drops the CQEs of the QP with user index uidx (the QP is being
// reset or destroyed), freeing their SRQ WQEs, as mlx5_cq_clean. Locks
// are taken in Poll's order: the CQ's, then the SRQ's.
func (q *ProvCQ) clean(uidx uint32, srq *provSRQ) {
	if l := q.cq.Lock; l != nil {
		l.Lock()
		defer l.Unlock()
	}
	var s *SRQ
	if srq != nil {
		if l := srq.srq.Lock; l != nil {
			l.Lock()
			defer l.Unlock()
		}
		s = srq.q
	}
	q.q.Clean(uidx, true, s)
}

// ---- queue pair ----

func qpType(t provider.QPType) (QPType, error) {
	switch t {
	case provider.QPTypeRC:
		return RC, nil
	case provider.QPTypeUC:
		return UC, nil
	case provider.QPTypeUD:
		return UD, nil
	}
	return 0, fmt.Errorf("mlx5: QP type %d: %w", t, sys.ErrNotSupported)
}

func (p *Provider) QPDriverData(cfg *provider.QPConfig) (provider.DriverReq, error) {
	typ, err := qpType(cfg.Type)
	if err != nil {
		return provider.DriverReq{}, err
	}
	lim := p.limits()
	// Memory windows are not offered, so the send WQE has no room for a
	// bind (libmlx5 sizes RC and UC for one by default).
	sq, err := SQSize(typ, false, int(cfg.Cap.MaxSendWR), int(cfg.Cap.MaxSendSGE), int(cfg.Cap.MaxInlineData), lim)
	if err != nil {
		return provider.DriverReq{}, fmt.Errorf("mlx5: %w", err)
	}
	rq, err := RQSize(int(cfg.Cap.MaxRecvWR), int(cfg.Cap.MaxRecvSGE), cfg.HasSRQ, lim)
	if err != nil {
		return provider.DriverReq{}, fmt.Errorf("mlx5: %w", err)
	}
	sqOff, bytes := QPBuffer(sq, rq, os.Getpagesize())
	r, err := p.newPrep("QP", bytes)
	if err != nil {
		return provider.DriverReq{}, err
	}
	r.sq, r.rq, r.sqOff = sq, rq, sqOff
	if r.uar, err = p.allocUAR(false); err != nil {
		r.release()
		return provider.DriverReq{}, err
	}
	r.qp = &provQP{p: p}
	if r.uidx, err = p.newUIdx(r.qp); err != nil {
		r.release()
		return provider.DriverReq{}, err
	}
	r.hasU = true
	req := CreateQPData(r.buf.addr(), r.db.addr(), sq, rq, r.uidx, int(r.uar.pageID))
	return provider.DriverReq{In: abi.Bytes(&req), OutLen: abi.Size[abi.MLX5CreateQPResp](), State: r, Release: r.release}, nil
}

// provQP is a QP's send and receive queues. Its send queue rings the
// QP's own BlueFlame register.
type provQP struct {
	p    *Provider
	qp   *provider.QP
	prep *prep
	sq   *SQ
	rq   *RQ      // nil on an SRQ or without receives
	srq  *provSRQ // the SRQ the QP receives from
	scq  *ProvCQ
	rcq  *ProvCQ
	// inline is where a post copies its inline data from the caller's
	// memory first (MaxInline bytes).
	inline []byte
}

func (p *Provider) NewQP(qp *provider.QP, req provider.DriverReq, out []byte) (provider.QPQueues, error) {
	r := req.State.(*prep)
	var resp abi.MLX5CreateQPResp
	copy(abi.Bytes(&resp), out)
	typ, _ := qpType(qp.Type)
	q := r.qp
	q.qp, q.prep = qp, r
	q.scq, _ = qp.SendCQ.(*ProvCQ)
	q.rcq, _ = qp.RecvCQ.(*ProvCQ)
	if q.scq == nil || q.rcq == nil {
		return nil, fmt.Errorf("mlx5: CQs of another provider: %w", sys.ErrInvalid)
	}
	bfSize := int(p.resp.BfRegSize)
	bf, err := NewBlueFlame(r.uar.mem[bfOffset:bfOffset+bfSize], true, Device{})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 QP", Err: err}
	}
	if r.sq.WQECnt > 0 {
		q.sq, err = NewSQ(SQConfig{Buf: r.buf.mem[r.sqOff : r.sqOff+r.sq.Bytes], Sizing: r.sq, QPN: qp.Num,
			Type: typ, DBRec: r.db.mem, BlueFlame: bf, Writer: Device{}, Spans: p.spans(), SignalAll: qp.SignalAll})
		if err != nil {
			return nil, &sys.Error{Op: "mlx5 QP", Err: err}
		}
		q.inline = make([]byte, r.sq.MaxInline)
	}
	if r.rq.WQECnt > 0 {
		if q.rq, err = NewRQ(r.buf.mem[:r.rq.Bytes], r.rq, r.db.mem, Device{}); err != nil {
			return nil, &sys.Error{Op: "mlx5 QP", Err: err}
		}
	}
	if qp.SRQ != nil {
		if q.srq, _ = qp.SRQ.(*provSRQ); q.srq == nil {
			return nil, fmt.Errorf("mlx5: an SRQ of another provider: %w", sys.ErrInvalid)
		}
	}
	// The caps the QP reports are what its queues hold.
	if q.sq != nil {
		qp.Cap.MaxSendWR, qp.Cap.MaxInlineData = uint32(r.sq.MaxPost), uint32(r.sq.MaxInline)
	}
	if q.rq != nil {
		qp.Cap.MaxRecvWR, qp.Cap.MaxRecvSGE = uint32(r.rq.MaxPost), uint32(r.rq.MaxGS)
	}
	return q, nil
}

// PostSend posts wr's chain. No stack check (as Poll): the frame is
// small, and what it calls checks its own.
//
//go:nosplit
func (q *provQP) PostSend(wr *provider.SendWR) error {
	if q.sq == nil {
		return fmt.Errorf("uverbs PostSend: the QP has no send queue (MaxSendWR 0): %w", sys.ErrInvalid)
	}
	if wr != nil && wr.Next == nil {
		// One request: a plain one (postOneSend's first case), without
		// inline data or with it, is built here, without postOneSend's
		// frame.
		var err error
		sq, qp := q.sq, q.qp
		o := uint(wr.Opcode)
		if wr.Flags&provider.SendInline == 0 && o < uint(len(plainOps)) &&
			qp.Type != provider.QPTypeUD && len(wr.SGL) <= int(qp.Cap.MaxSendSGE) && len(wr.SGL) <= sq.maxGS &&
			(!plainOps[o].rcOnly || qp.Type == provider.QPTypeRC) {
			p := &plainOps[o]
			if sq.RingNow() {
				// Built and rung in one call, without Ring.
				if sq.PutPlainRing(p.op, sendFM(wr.Flags), wr.Imm&p.immMask, p.raddr, wr) != nil {
					return provider.PostFailed(0, wr.WRID, provider.ErrSendQueueFull)
				}
				return nil
			}
			if sq.PutPlain(p.op, sendFM(wr.Flags), wr.Imm&p.immMask, p.raddr, wr) != nil {
				err = provider.ErrSendQueueFull
			}
		} else if o < uint(len(plainOps)) && !plainOps[o].rcOnly &&
			qp.Type != provider.QPTypeUD && len(wr.SGL) <= int(qp.Cap.MaxSendSGE) && len(wr.SGL) <= sq.maxGS {
			// Inline: what fails the case above with these conditions
			// true has SendInline set (rcOnly opcodes are not plain
			// inline). Built and rung in one call when RingNow says
			// so; what that does not post, and the rest, as in a post
			// list (postOneSend tries PutInline, then the general path).
			if sq.RingNow() {
				p := &plainOps[o]
				var done bool
				if len(wr.SGL) == 1 { // PutInlineRing's usual case, without its frame
					done, err = sq.putInlineOneRing(p, wr, &wr.SGL[0])
				} else {
					done, err = sq.PutInlineRing(p.op, sendFM(wr.Flags), wr.Imm&p.immMask, p.raddr, wr, qp.Cap.MaxInlineData)
				}
				if done && err == nil {
					return nil
				}
			}
			err = q.postOneSend(wr)
		} else if (wr.Opcode == provider.WRAtomicCmpAndSwp || wr.Opcode == provider.WRAtomicFetchAndAdd) &&
			qp.Type == provider.QPTypeRC && wr.Flags&provider.SendInline == 0 && len(wr.SGL) == 1 &&
			wr.RemoteAddr%8 == 0 && wr.SGL[0].Length >= AtomicSize && sq.maxGS >= 1 && qp.Cap.MaxSendSGE >= 1 {
			// An atomic, as in postOneSend.
			op := uint8(OpAtomicCS)
			if wr.Opcode == provider.WRAtomicFetchAndAdd {
				op = OpAtomicFA
			}
			if sq.RingNow() {
				// Built and rung in one call, without Ring.
				if sq.PutAtomicRing(op, sendFM(wr.Flags), wr) != nil {
					return provider.PostFailed(0, wr.WRID, provider.ErrSendQueueFull)
				}
				return nil
			}
			if sq.PutAtomic(op, sendFM(wr.Flags), wr) != nil {
				err = provider.ErrSendQueueFull
			}
		} else {
			err = q.postOneSend(wr)
		}
		if err != nil {
			q.sq.Abort()
			err = provider.PostFailed(0, wr.WRID, err)
		}
		q.sq.Ring()
		return err
	}
	var err error
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if err = q.postOneSend(wr); err != nil {
			q.sq.Abort()
			err = provider.PostFailed(i, wr.WRID, err)
			break
		}
	}
	q.sq.Ring()
	return err
}

func (q *provQP) postOneSend(wr *provider.SendWR) error {
	qp := q.qp
	// The plain requests (SEND and RDMA WRITE, with or without
	// immediate data, RDMA READ and the atomics on RC; within the QP's
	// scatter/gather count, not UD; SEND and RDMA WRITE also inline
	// within the QP's inline size, from addresses above the first page)
	// pass every check CheckSend makes: decided here and built in one
	// call.
	if n := len(wr.SGL); n <= int(qp.Cap.MaxSendSGE) && qp.Type != provider.QPTypeUD {
		var op uint8
		imm, raddr := uint32(0), false
		if o := uint(wr.Opcode); o < uint(len(plainOps)) {
			if p := &plainOps[o]; !p.rcOnly || qp.Type == provider.QPTypeRC && wr.Flags&provider.SendInline == 0 {
				op, imm, raddr = p.op, wr.Imm&p.immMask, p.raddr
			}
		} else if wr.Opcode == provider.WRAtomicCmpAndSwp || wr.Opcode == provider.WRAtomicFetchAndAdd {
			if qp.Type == provider.QPTypeRC && wr.Flags&provider.SendInline == 0 && n == 1 &&
				wr.RemoteAddr%8 == 0 && wr.SGL[0].Length >= AtomicSize && q.sq.maxGS >= 1 {
				op := uint8(OpAtomicCS)
				if wr.Opcode == provider.WRAtomicFetchAndAdd {
					op = OpAtomicFA
				}
				if q.sq.PutAtomic(op, sendFM(wr.Flags), wr) != nil {
					return provider.ErrSendQueueFull
				}
				return nil
			}
		}
		switch {
		case op == 0:
		case wr.Flags&provider.SendInline == 0:
			if n <= q.sq.maxGS {
				if q.sq.PutPlain(op, sendFM(wr.Flags), imm, raddr, wr) != nil {
					return provider.ErrSendQueueFull
				}
				return nil
			}
		default:
			if done, err := q.sq.PutInline(op, sendFM(wr.Flags), imm, raddr, wr, qp.Cap.MaxInlineData); done {
				if err != nil { // ErrBusy, PutInline's only error
					return provider.ErrSendQueueFull
				}
				return nil
			}
		}
	}
	if err := provider.CheckSend(qp, wr); err != nil {
		return err
	}
	var op uint8
	imm := uint32(0)
	switch wr.Opcode {
	case provider.WRSend:
		op = OpSend
	case provider.WRSendWithImm:
		op, imm = OpSendImm, wr.Imm
	case provider.WRSendWithInv:
		op, imm = OpSendInval, wr.InvalidateRKey
	case provider.WRRDMAWrite:
		op = OpRDMAWrite
	case provider.WRRDMAWriteWithImm:
		op, imm = OpRDMAWriteImm, wr.Imm
	case provider.WRRDMARead:
		op = OpRDMARead
	case provider.WRAtomicCmpAndSwp:
		op = OpAtomicCS
	case provider.WRAtomicFetchAndAdd:
		op = OpAtomicFA
	default:
		return fmt.Errorf("uverbs PostSend: %v: the mlx5 provider does not post it: %w", wr.Opcode, sys.ErrNotSupported)
	}
	fm := sendFM(wr.Flags)
	sq := q.sq
	if err := sq.Begin(op, fm, imm); err != nil {
		return sendErr(err)
	}
	var err error
	switch op {
	case OpRDMAWrite, OpRDMAWriteImm, OpRDMARead:
		err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey)
	case OpAtomicCS:
		if err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey); err == nil {
			err = sq.Atomic(wr.Swap, wr.CompareAdd)
		}
	case OpAtomicFA:
		if err = sq.RemoteAddr(wr.RemoteAddr, wr.RKey); err == nil {
			err = sq.Atomic(wr.CompareAdd, 0)
		}
	default: // sends
		if qp.Type == provider.QPTypeUD {
			av, _ := wr.AH.Data.(*AV)
			if av == nil {
				return fmt.Errorf("uverbs PostSend: UD: an AH of another provider: %w", sys.ErrInvalid)
			}
			err = sq.Datagram(av, wr.RemoteQPN, wr.RemoteQKey)
		}
	}
	if err != nil {
		return sendErr(err)
	}
	if wr.Flags&provider.SendInline != 0 {
		// Through the QP's scratch buffer: CopyInline turns memory that
		// cannot be read into an error (CheckSend held the total to
		// MaxInline, the buffer's size).
		n, err := provider.CopyInline(q.inline, wr.SGL)
		if err != nil {
			return err
		}
		if n > 0 {
			if err := sq.Inline(q.inline[:n]); err != nil {
				return sendErr(err)
			}
		}
	} else {
		for _, s := range wr.SGL {
			if err := sq.Data(s.Addr, s.Length, s.LKey); err != nil {
				return sendErr(err)
			}
		}
	}
	return sendErr(sq.Finish(wr.WRID))
}

// plainOp is how a plain request of one WROpcode is built: its mlx5
// opcode, the mask of wr.Imm that goes in the ctrl segment (all of it
// with immediate data, none without), whether a remote address segment
// follows the ctrl segment, and whether only an RC QP posts it (not
// inline).
type plainOp struct {
	op      uint8
	raddr   bool
	rcOnly  bool
	immMask uint32
}

// plainOps is the plain requests' opcode decision for the WROpcodes below
// its length (one load instead of a switch); the atomics, also plain,
// have more conditions and are decided apart.
var plainOps = [...]plainOp{
	provider.WRRDMAWrite:        {op: OpRDMAWrite, raddr: true},
	provider.WRRDMAWriteWithImm: {op: OpRDMAWriteImm, raddr: true, immMask: ^uint32(0)},
	provider.WRSend:             {op: OpSend},
	provider.WRSendWithImm:      {op: OpSendImm, immMask: ^uint32(0)},
	provider.WRRDMARead:         {op: OpRDMARead, raddr: true, rcOnly: true},
}

// sendFM is the ctrl segment's fm_ce_se bits of a work request's flags.
func sendFM(f provider.SendFlags) uint8 {
	return sendFMs[f&(provider.SendFence|provider.SendSignaled|provider.SendSolicited)]
}

// sendFMs is sendFM's table: one load instead of three tests.
var sendFMs = func() (t [8]uint8) {
	for f := range provider.SendFlags(len(t)) {
		if f&provider.SendSignaled != 0 {
			t[f] |= CtrlCQUpdate
		}
		if f&provider.SendSolicited != 0 {
			t[f] |= CtrlSolicited
		}
		if f&provider.SendFence != 0 {
			t[f] |= CtrlFence
		}
	}
	return t
}()

// inlineTotal is the inline bytes of sgl, false if they pass max or an
// entry's address is in the first page or wraps (CheckSend's refusals).
func inlineTotal(sgl []provider.SGE, max uint32) (int, bool) {
	var n uint64
	for i := range sgl {
		s := &sgl[i]
		n += uint64(s.Length)
		if s.Length > 0 && (s.Addr < 4096 || s.Addr+uint64(s.Length) < s.Addr) {
			return 0, false
		}
	}
	return int(n), n <= uint64(max)
}

// sendErr names the post in the device format's errors (ErrInvalid
// matches EINVAL); a full queue is the preallocated ErrSendQueueFull.
func sendErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrBusy):
		return provider.ErrSendQueueFull
	}
	return &sys.Error{Op: "uverbs PostSend", Err: err}
}

func (q *provQP) PostRecv(wr *provider.RecvWR) error {
	if q.srq != nil {
		return fmt.Errorf("uverbs PostRecv: the QP receives from an SRQ: %w", sys.ErrInvalid)
	}
	if q.rq == nil {
		return fmt.Errorf("uverbs PostRecv: the QP has no receive queue (MaxRecvWR 0): %w", sys.ErrInvalid)
	}
	return postRecvList(q.rq, wr)
}

// recvQueue is a receive queue of a QP or an SRQ.
type recvQueue interface {
	Begin() error
	Data(addr uint64, length, lkey uint32) error
	Finish(wrID uint64) error
	Ring()
}

func postRecvList[Q recvQueue](q Q, wr *provider.RecvWR) error {
	var err error
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if err = postOneRecv(q, wr); err != nil {
			err = provider.PostFailed(i, wr.WRID, err)
			break
		}
	}
	q.Ring()
	return err
}

func postOneRecv[Q recvQueue](q Q, wr *provider.RecvWR) error {
	if err := q.Begin(); err != nil {
		if errors.Is(err, ErrBusy) {
			return provider.ErrRecvQueueFull
		}
		return &sys.Error{Op: "uverbs PostRecv", Err: err}
	}
	for _, s := range wr.SGL {
		if err := q.Data(s.Addr, s.Length, s.LKey); err != nil {
			return &sys.Error{Op: "uverbs PostRecv", Err: err}
		}
	}
	if err := q.Finish(wr.WRID); err != nil {
		return &sys.Error{Op: "uverbs PostRecv", Err: err}
	}
	return nil
}

// reset empties the queues for a QP moved to RESET (mlx5_modify_qp):
// its CQEs leave both CQs, the rings and doorbell record start over.
func (q *provQP) Reset() {
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

func (q *provQP) Unmap() error {
	q.rcq.clean(q.prep.uidx, q.srq)
	if q.scq != q.rcq {
		q.scq.clean(q.prep.uidx, nil)
	}
	q.prep.release()
	return nil
}

// ---- shared receive queue ----

func (p *Provider) SRQDriverData(cfg *provider.SRQConfig) (provider.DriverReq, error) {
	sz, err := SRQSize(int(cfg.MaxWR), int(cfg.MaxSGE), p.limits())
	if err != nil {
		return provider.DriverReq{}, fmt.Errorf("mlx5: %w", err)
	}
	r, err := p.newPrep("SRQ", sz.Bytes)
	if err != nil {
		return provider.DriverReq{}, err
	}
	r.srq = sz
	// The SRQ's user index is kernel bookkeeping: receive CQEs carry
	// their QP's, so the table holds no queue for it.
	if r.uidx, err = p.newUIdx(nil); err != nil {
		r.release()
		return provider.DriverReq{}, err
	}
	r.hasU = true
	// The kernel derives the WQE size from max_sge and the ring from
	// max_wr: it gets the rounded values (mlx5_create_srq).
	cfg.MaxWR, cfg.MaxSGE = uint32(sz.MaxWR), uint32(sz.MaxGS)
	req := CreateSRQData(r.buf.addr(), r.db.addr(), r.uidx)
	return provider.DriverReq{In: abi.Bytes(&req), OutLen: abi.Size[abi.MLX5CreateSRQResp](), State: r, Release: r.release}, nil
}

// provSRQ is an SRQ's WQE list. Completions free WQEs under the SRQ's
// lock, as posts take them.
type provSRQ struct {
	p    *Provider
	srq  *provider.SRQ
	prep *prep
	q    *SRQ
}

func (p *Provider) NewSRQ(srq *provider.SRQ, req provider.DriverReq, out []byte) (provider.SRQQueue, error) {
	r := req.State.(*prep)
	var resp abi.MLX5CreateSRQResp
	copy(abi.Bytes(&resp), out)
	q, err := NewSRQ(r.buf.mem, r.srq, r.db.mem, Device{})
	if err != nil {
		return nil, &sys.Error{Op: "mlx5 SRQ", Err: err}
	}
	srq.Num = resp.SRQN
	srq.MaxWR = uint32(r.srq.MaxWR)
	return &provSRQ{p: p, srq: srq, prep: r, q: q}, nil
}

func (q *provSRQ) PostRecv(wr *provider.RecvWR) error { return postRecvList(q.q, wr) }

// complete frees the WQE of a receive completion and returns its id.
func (q *provSRQ) complete(counter uint16) uint64 {
	if l := q.srq.Lock; l != nil {
		l.Lock()
		defer l.Unlock()
	}
	id, _ := q.q.Complete(counter)
	return id
}

// fixedSize: mlx5 SRQs keep their size (the kernel refuses a resize);
// MODIFY_SRQ arms the limit only.
func (q *provSRQ) FixedSize() string { return "mlx5 SRQs cannot be resized" }

// modifyDriverData: MODIFY_SRQ on mlx5 carries no driver data.
func (q *provSRQ) ModifyDriverData() (in, out []byte) { return nil, nil }

func (q *provSRQ) Modified(resized bool) error {
	if resized {
		return fmt.Errorf("uverbs SRQ.Modify: mlx5 cannot resize an SRQ: %w", sys.ErrNotSupported)
	}
	return nil
}

func (q *provSRQ) Unmap() error {
	q.prep.release()
	return nil
}

// ---- address handle ----

func (p *Provider) AHDriverOutLen() int { return abi.Size[abi.MLX5CreateAHResp]() }

// AHCreated builds the AH's address vector (mlx5_create_ah): for RoCE
// the destination MAC from the kernel's response and the UDP source
// port from the flow label, or a random valid one without
// (RoCEUDPSport).
func (p *Provider) AHCreated(ah *provider.AH, a *provider.AHAttr, out []byte) error {
	var resp abi.MLX5CreateAHResp
	copy(abi.Bytes(&resp), out)
	eth := a.Ethernet
	// The mlx5 rate code is the IB rate plus MLX5_STAT_RATE_OFFSET (the
	// kernel's ib_rate_to_mlx5); 0 is the port's own rate.
	rate := a.StaticRate
	if rate != 0 {
		rate += 5
	}
	var av AV
	if eth {
		if p.resp.CmdsSuppUhw&abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH == 0 {
			return fmt.Errorf("uverbs CreateAH: mlx5: the kernel does not return the destination MAC: %w", sys.ErrNotSupported)
		}
		av = RoCEAV(rate, a.SL, resp.DMAC, a.TrafficClass, a.HopLimit, a.SGIDIndex, a.FlowLabel, a.DGID, RoCEUDPSport(a.FlowLabel))
	} else {
		av = IBAV(rate, a.SL, a.SrcPathBits, a.DLID, a.IsGlobal, a.TrafficClass, a.HopLimit, a.SGIDIndex, a.FlowLabel, a.DGID)
	}
	ah.Data = &av
	return nil
}
