// Package siw is the provider of soft-iWARP devices (the kernel's siw
// driver; rdma-core's providers/siw) in pure Go, behind uverbs' provider
// interface (uverbs/internal/provider).
//
// The kernel allocates every queue and maps it into the process
// (rdma/siw-abi.h): the send queue is an array of struct siw_sqe, the
// receive queue and an SRQ of struct siw_rqe, a CQ of struct siw_cqe
// followed by struct siw_cq_ctrl. Ownership of each slot is its VALID
// flag: the producer fills a slot whose flag is clear, then sets it; the
// consumer copies a slot whose flag is set, then clears it. There are no
// shared indices: each side keeps its own. Posting a receive is shared
// memory only (the kernel refuses POST_RECV for a user QP); posting a
// send needs a system call only to start an idle send queue: an empty
// POST_SEND, skipped when the slot before the first new one is still
// VALID (the kernel has not taken it yet, so it is still working through
// the queue and will reach the new ones). Arming a CQ is a store into
// siw_cq_ctrl. Posting and polling allocate nothing.
//
// iWARP differs from RoCE in what a work request may be: RC only, no
// atomics, no immediate data from user space, no memory windows or
// local invalidation, at most 6 scatter/gather entries and 80 bytes
// inline. The provider refuses the rest before anything reaches the
// queue, naming the opcode.
package siw

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// Provider is soft-iWARP's provider.
type Provider struct {
	ctx *provider.Context
}

// New returns the siw provider of a context.
func New(ctx *provider.Context) *Provider { return &Provider{ctx: ctx} }

func (p *Provider) Name() string { return "siw" }

// ContextDriverData: GET_CONTEXT answers struct siw_uresp_alloc_ctx (the
// device id), which nothing here needs.
func (p *Provider) ContextDriverData() ([]byte, int) { return nil, abi.Size[abi.SIWURespAllocCtx]() }
func (p *Provider) ContextCreated([]byte) error      { return nil }
func (p *Provider) Close()                           {}

// RegMRDriverData is struct siw_ureq_reg_mr (a stag key of 0, as libsiw
// sends) and room for struct siw_uresp_reg_mr: the kernel refuses a
// registration without them.
func (p *Provider) RegMRDriverData() ([]byte, int) {
	return make([]byte, abi.Size[abi.SIWUReqRegMR]()), abi.Size[abi.SIWURespRegMR]()
}

// The sizes of the mapped entries (TestLayout checks them against
// internal/abi's, which are checked against the UAPI header).
const (
	sqeSize   = 120
	rqeSize   = 112
	cqeSize   = 32
	ctrlSize  = 8
	maxInline = abi.SIW_MAX_INLINE
	maxSGE    = abi.SIW_MAX_SGE
	valid     = abi.SIW_WQE_VALID
)

// head is the start of every entry (siw_sqe, siw_rqe, siw_cqe): the id,
// then the 32-bit word of the flags (u16 in a work request, u8 in a
// completion) and the fields beside them (num_sge and opcode; opcode and
// status). The word is stored at once to publish a work request, and
// read to find whether a slot holds one.
type head struct {
	ID   uint64
	Word uint32
}

// word is the flags word of the entry e.
func word[T abi.SIWSQE | abi.SIWRQE | abi.SIWCQE](e *T) *uint32 { return &provider.As[head](e).Word }

// inlineArea is where an inline send's data goes: after sge[0] of the
// SQE, whose length says how much (80 bytes, SIW_MAX_INLINE).
func inlineArea(e *abi.SIWSQE) []byte { return provider.As[[sqeSize]byte](e)[40 : 40+maxInline] }

// mapQueue maps n entries of size bytes (and extra bytes after them) at
// the mmap key the kernel reported. n must be a power of two, as the
// kernel rounds every queue.
func (p *Provider) mapQueue(what string, key uint64, n uint32, size, extra int) ([]byte, error) {
	switch {
	case key == abi.SIW_INVAL_UOBJ_KEY:
		return nil, &sys.Error{Op: "siw map " + what, Err: errors.New("the kernel reported no mapping for it")}
	case n == 0 || n&(n-1) != 0:
		return nil, &sys.Error{Op: "siw map " + what, Err: fmt.Errorf("the kernel reported %d entries, not a power of two", n)}
	case uint64(n)*uint64(size) > math.MaxInt32:
		return nil, &sys.Error{Op: "siw map " + what, Err: fmt.Errorf("the kernel reported %d entries", n)}
	}
	return p.ctx.FD().Mmap("siw map "+what, int64(key), int(n)*size+extra)
}

// ---- completion queue ----

// CQ is a completion queue: num_cqe siw_cqe, then the notify word.
type CQ struct {
	p    *Provider
	mem  []byte
	ring mmio.Ring[abi.SIWCQE]
	ctrl *abi.SIWCQCtrl
	get  uint32 // the next entry to read
}

func (p *Provider) CQDriverData(int) (provider.DriverReq, error) {
	return provider.DriverReq{OutLen: abi.Size[abi.SIWURespCreateCQ]()}, nil
}

func (p *Provider) NewCQ(_ *provider.CQ, _ provider.DriverReq, out []byte) (provider.CQQueue, error) {
	var resp abi.SIWURespCreateCQ
	copy(abi.Bytes(&resp), out)
	mem, err := p.mapQueue("CQ", resp.CQKey, resp.NumCQE, cqeSize, ctrlSize)
	if err != nil {
		return nil, err
	}
	q, err := newCQ(p, mem, resp.NumCQE)
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	q.mem = mem
	return q, nil
}

func newCQ(p *Provider, mem []byte, n uint32) (*CQ, error) {
	ring, err := mmio.NewRing[abi.SIWCQE](mem, uint64(n), cqeSize)
	if err != nil {
		return nil, &sys.Error{Op: "siw map CQ", Err: err}
	}
	q := &CQ{p: p, ring: ring, ctrl: mmio.At[abi.SIWCQCtrl](mem, int(n)*cqeSize)}
	atomic.StoreUint32(&q.ctrl.Flags, abi.SIW_NOTIFY_NOT)
	return q, nil
}

// wcOpcode and wcStatus map siw's completion opcodes and statuses to the
// verbs' (libsiw's map_cqe_opcode and map_cqe_status).
var (
	wcOpcode = [abi.SIW_NUM_OPCODES]uint32{
		abi.SIW_OP_WRITE: 1, abi.SIW_OP_READ: 2, abi.SIW_OP_READ_LOCAL_INV: 2,
		abi.SIW_OP_SEND: 0, abi.SIW_OP_SEND_WITH_IMM: 0, abi.SIW_OP_SEND_REMOTE_INV: 0,
		abi.SIW_OP_FETCH_AND_ADD: 4, abi.SIW_OP_COMP_AND_SWAP: 3, abi.SIW_OP_RECEIVE: 128,
	}
	wcStatus = [abi.SIW_NUM_WC_STATUS]uint32{
		abi.SIW_WC_SUCCESS: 0, abi.SIW_WC_LOC_LEN_ERR: 1, abi.SIW_WC_LOC_PROT_ERR: 4,
		abi.SIW_WC_LOC_QP_OP_ERR: 2, abi.SIW_WC_WR_FLUSH_ERR: 5, abi.SIW_WC_BAD_RESP_ERR: 7,
		abi.SIW_WC_LOC_ACCESS_ERR: 8, abi.SIW_WC_REM_ACCESS_ERR: 10, abi.SIW_WC_REM_INV_REQ_ERR: 9,
		abi.SIW_WC_GENERAL_ERR: 21,
	}
)

// wcGeneralErr is IBV_WC_GENERAL_ERR, for a status or opcode the table
// does not know.
const wcGeneralErr = 21

// Poll moves up to len(wc) completions into wc, clearing each entry's
// flags word after copying it: the slot is the kernel's again.
func (q *CQ) Poll(wc []provider.WC) (n int) {
	for ; n < len(wc); n++ {
		e := q.ring.Slot(q.get)
		fw := word(e)
		if atomic.LoadUint32(fw)&valid == 0 {
			break
		}
		w := &wc[n]
		w.WRID, w.ByteLen, w.QPNum = e.ID, e.Bytes, uint32(*e.BaseQP.QPID())
		w.VendorErr, w.Imm, w.SrcQP, w.Flags = 0, 0, 0, 0
		w.PKeyIndex, w.SLID, w.SL, w.DLIDPathBits, w.PortNum = 0, 0, 0, 0, 0
		if int(e.Opcode) < len(wcOpcode) {
			w.Opcode = wcOpcode[e.Opcode]
		} else {
			w.Opcode = 0
		}
		if int(e.Status) < len(wcStatus) {
			w.Status = wcStatus[e.Status]
		} else {
			w.Status = wcGeneralErr
		}
		if w.Status != provider.WCSuccess {
			q.p.ctx.SawErrorCompletion(w.QPNum)
		}
		// flags, opcode and status: 0, in one store after the copy.
		atomic.StoreUint32(fw, 0)
		q.get++
	}
	return n
}

// Arm asks for an event at the next completion (or the next solicited
// one): a store, as libsiw's siw_notify_cq; the kernel reads the word
// when it adds a completion.
func (q *CQ) Arm(solicitedOnly bool) error {
	f := uint32(abi.SIW_NOTIFY_SOLICITED)
	if !solicitedOnly {
		f |= abi.SIW_NOTIFY_NEXT_COMPLETION
	}
	atomic.StoreUint32(&q.ctrl.Flags, f)
	return nil
}

// FixedSize: the kernel's siw has no resize_cq.
func (q *CQ) FixedSize() string {
	return "siw CQs cannot be resized (the kernel driver has no RESIZE_CQ)"
}

func (q *CQ) ResizeDriverOutLen() int { return 0 }
func (q *CQ) Resized([]byte) error {
	return &sys.Error{Op: "siw resize CQ", Err: sys.ErrNotSupported}
}

func (q *CQ) Unmap() error {
	if q.mem == nil {
		return nil
	}
	err := sys.Munmap(q.mem)
	q.mem = nil
	return err
}

// ---- queue pair ----

// QP is a queue pair's send and receive queues.
type QP struct {
	p     *Provider
	qp    *provider.QP
	sqMem []byte
	rqMem []byte
	sq    mmio.Ring[abi.SIWSQE]
	rq    mmio.Ring[abi.SIWRQE] // zero with an SRQ
	sqPut uint32
	rqPut uint32
	nsq   uint32
	db    []byte // the POST_SEND doorbell command, ready to write
	dbOut []byte
	bell  sys.Doorbell
	// sigAll: every send request completes (the QP's SignalAll).
	sigAll uint16
}

func (p *Provider) QPDriverData(cfg *provider.QPConfig) (provider.DriverReq, error) {
	if cfg.Type != provider.QPTypeRC {
		return provider.DriverReq{}, fmt.Errorf("siw (iWARP) has RC queue pairs only, not %s: %w", qpTypeName(cfg.Type), sys.ErrNotSupported)
	}
	return provider.DriverReq{OutLen: abi.Size[abi.SIWURespCreateQP]()}, nil
}

func qpTypeName(t provider.QPType) string {
	switch t {
	case provider.QPTypeUC:
		return "UC"
	case provider.QPTypeUD:
		return "UD"
	}
	return fmt.Sprintf("type %d", t)
}

func (p *Provider) NewQP(qp *provider.QP, _ provider.DriverReq, out []byte) (provider.QPQueues, error) {
	var resp abi.SIWURespCreateQP
	copy(abi.Bytes(&resp), out)
	q := &QP{p: p, qp: qp, nsq: resp.NumSQE}
	var err error
	if q.sqMem, err = p.mapQueue("send queue", resp.SQKey, resp.NumSQE, sqeSize, 0); err != nil {
		return nil, err
	}
	if q.sq, err = mmio.NewRing[abi.SIWSQE](q.sqMem, uint64(resp.NumSQE), sqeSize); err != nil {
		q.Unmap()
		return nil, &sys.Error{Op: "siw map send queue", Err: err}
	}
	if qp.SRQ == nil {
		if q.rqMem, err = p.mapQueue("receive queue", resp.RQKey, resp.NumRQE, rqeSize, 0); err != nil {
			q.Unmap()
			return nil, err
		}
		if q.rq, err = mmio.NewRing[abi.SIWRQE](q.rqMem, uint64(resp.NumRQE), rqeSize); err != nil {
			q.Unmap()
			return nil, &sys.Error{Op: "siw map receive queue", Err: err}
		}
	}
	// The doorbell: POST_SEND with no work requests makes the kernel
	// read the send queue. Built once, so posting allocates nothing.
	q.dbOut = make([]byte, abi.Size[abi.PostSendResp]())
	req := abi.PostSend{QPHandle: qp.Handle, WQESize: uint32(abi.SizeofSendWR)}
	req.Response = sys.PointerTo(q.dbOut)
	q.db = p.ctx.FD().CommandBuffer(abi.IB_USER_VERBS_CMD_POST_SEND, abi.Bytes(&req), len(q.dbOut))
	if q.bell, err = p.ctx.FD().Doorbell(q.db); err != nil {
		q.Unmap()
		return nil, err
	}
	if qp.SignalAll {
		q.sigAll = abi.SIW_WQE_SIGNALLED
	}
	return q, nil
}

func (q *QP) Unmap() error {
	var err error
	for _, m := range []*[]byte{&q.sqMem, &q.rqMem} {
		if *m != nil {
			if e := sys.Munmap(*m); err == nil {
				err = e
			}
			*m = nil
		}
	}
	return err
}

// sendOpcode maps the verbs' opcodes to siw's; 0xff: not from user space.
var sendOpcode = func() (m [16]uint8) {
	for i := range m {
		m[i] = 0xff
	}
	m[provider.WRRDMAWrite] = abi.SIW_OP_WRITE
	m[provider.WRSend] = abi.SIW_OP_SEND
	m[provider.WRRDMARead] = abi.SIW_OP_READ
	m[provider.WRSendWithInv] = abi.SIW_OP_SEND_REMOTE_INV
	return m
}()

// errSendInERR and errRecvInERR refuse a post to a QP in ERR (or marked as maybe in ERR by an
// error completion): siw does not flush what user space adds to a queue
// after the QP stopped, so the request would never complete.
var (
	errSendInERR = &sys.Error{Op: "uverbs PostSend", Err: fmt.Errorf("the QP is in ERR (or had an error completion): siw flushes nothing posted after that, so the request was not queued: %w", sys.ErrInvalid)}
	errRecvInERR = &sys.Error{Op: "uverbs PostRecv", Err: fmt.Errorf("the QP is in ERR (or had an error completion): siw flushes nothing posted after that, so the request was not queued: %w", sys.ErrInvalid)}
)

// check refuses what siw cannot execute, then has uverbs make the checks
// every device shares.
func (q *QP) check(wr *provider.SendWR) (uint8, error) {
	op := uint8(0xff)
	if wr.Opcode < provider.WROpcode(len(sendOpcode)) {
		op = sendOpcode[wr.Opcode]
	}
	// The plain requests (RDMA WRITE, SEND and a one-entry RDMA READ,
	// not inline, within the QP's scatter/gather count) pass every
	// check: decided here without a call (CheckSend's general checks
	// were a third of a post's instructions).
	if n := len(wr.SGL); wr.Flags&provider.SendInline == 0 && n <= int(q.qp.Cap.MaxSendSGE) && n <= maxSGE &&
		(op == abi.SIW_OP_WRITE || op == abi.SIW_OP_SEND || op == abi.SIW_OP_READ && n <= 1) {
		return op, nil
	}
	if op == 0xff {
		return 0, fmt.Errorf("uverbs PostSend: %v: siw (iWARP) executes RDMA_WRITE, RDMA_READ, SEND and SEND_WITH_INV from user space, no immediate data, atomics, memory windows, local invalidation or FLUSH: %w", wr.Opcode, sys.ErrNotSupported)
	}
	if err := provider.CheckSend(q.qp, wr); err != nil {
		return 0, err
	}
	if wr.Flags&provider.SendInline != 0 {
		if op != abi.SIW_OP_SEND && op != abi.SIW_OP_WRITE {
			return 0, fmt.Errorf("uverbs PostSend: %v inline: siw sends inline only SEND and RDMA_WRITE: %w", wr.Opcode, sys.ErrInvalid)
		}
	} else if len(wr.SGL) > maxSGE {
		return 0, fmt.Errorf("uverbs PostSend: %d scatter/gather entries, siw takes %d: %w", len(wr.SGL), maxSGE, sys.ErrInvalid)
	} else if op == abi.SIW_OP_READ && len(wr.SGL) > 1 {
		// The kernel places a read's response into sge[0] only and
		// ignores the rest (siw_read_to_orq).
		return 0, fmt.Errorf("uverbs PostSend: RDMA_READ into %d scatter/gather entries: siw reads into one: %w", len(wr.SGL), sys.ErrNotSupported)
	}
	return op, nil
}

// PostSend writes the chain into the send queue, then rings the doorbell
// if the queue may be idle (see the package doc). A request refused
// before it reached the queue is reported with PostError; the ones
// before it were posted and the doorbell rings for them.
func (q *QP) PostSend(wr *provider.SendWR) error {
	if q.qp.State.Load() >= provider.StateErr {
		return errSendInERR
	}
	first, start := wr, q.sqPut
	for ; wr != nil; wr = wr.Next {
		op, err := q.check(wr)
		if err != nil {
			return q.postFailed(first, wr, start, err)
		}
		e := q.sq.Slot(q.sqPut)
		fw := word(e)
		if atomic.LoadUint32(fw)&valid != 0 {
			return q.postFailed(first, wr, start, provider.ErrSendQueueFull)
		}
		flags := uint16(valid) | q.sigAll
		if wr.Flags&provider.SendSignaled != 0 {
			flags |= abi.SIW_WQE_SIGNALLED
		}
		if wr.Flags&provider.SendSolicited != 0 {
			flags |= abi.SIW_WQE_SOLICITED
		}
		if wr.Flags&provider.SendFence != 0 {
			flags |= abi.SIW_WQE_READ_FENCE
		}
		e.ID = wr.WRID
		*e.RAddr.RAddr() = wr.RemoteAddr
		e.RKey = wr.RKey
		if op == abi.SIW_OP_SEND_REMOTE_INV {
			// The kernel sends sqe.rkey as the stag to invalidate.
			// (libsiw copies wr.rdma.rkey here, not invalidate_rkey.)
			e.RKey = wr.InvalidateRKey
		}
		nsge := len(wr.SGL)
		sges := e.SGE.SGE()
		if wr.Flags&provider.SendInline != 0 {
			flags |= abi.SIW_WQE_INLINE
			// The data goes after sge[0], whose length says how much.
			dst := inlineArea(e)
			var n uint64
			for _, s := range wr.SGL {
				n += uint64(s.Length)
			}
			if n > maxInline {
				return q.postFailed(first, wr, start, fmt.Errorf("uverbs PostSend: %d bytes inline, siw takes %d: %w", n, maxInline, sys.ErrInvalid))
			}
			c, err := provider.CopyInline(dst, wr.SGL)
			if err != nil {
				return q.postFailed(first, wr, start, err)
			}
			sges[0] = abi.SIWSGE{Length: uint32(c)}
			nsge = 1
		} else {
			var length uint64
			for j, s := range wr.SGL {
				sges[j] = abi.SIWSGE{LAddr: s.Addr, Length: s.Length, LKey: s.LKey}
				length += uint64(s.Length)
			}
			if length > math.MaxUint32 {
				return q.postFailed(first, wr, start, provider.ErrMessageTooLong("Send", length))
			}
		}
		atomic.StoreUint32(fw, uint32(flags)|uint32(nsge)<<16|uint32(op)<<24)
		q.sqPut++
	}
	return q.doorbell(start, q.sqPut-start)
}

// doorbell starts the send queue after n requests were published from
// index start, unless the request before them is still waiting for the
// kernel (which then reaches the new ones by itself).
func (q *QP) doorbell(start, n uint32) error {
	if n == 0 {
		return nil
	}
	if n < q.nsq {
		prev := q.sq.Slot(start - 1)
		if atomic.LoadUint32(word(prev))&valid != 0 {
			return nil
		}
	}
	if r, ok := q.bell.Ring(); !ok {
		return q.doorbellFailed(int(n), q.bell.Err("siw doorbell", r))
	}
	return nil
}

// postFailed ends a post whose request wr failed before reaching the
// queue: the requests before it (from index start) were published, and
// the doorbell rings for them.
func (q *QP) postFailed(first, wr *provider.SendWR, start uint32, err error) error {
	i := 0
	for w := first; w != wr; w = w.Next {
		i++
	}
	err = provider.PostFailed(i, wr.WRID, err)
	if dberr := q.doorbell(start, q.sqPut-start); dberr != nil {
		return fmt.Errorf("%w (and the next one was not: %s)", dberr, strings.TrimPrefix(err.Error(), "uverbs PostSend: "))
	}
	return err
}

// doorbellFailed: published requests cannot be taken back (the kernel
// reads any VALID entry when it next runs the queue), so the QP is moved
// to ERR, which flushes them (siw_sq_flush: WCWRFlushErr) and stops the
// send queue for good.
func (q *QP) doorbellFailed(posted int, dbErr error) error {
	if err := q.p.ctx.ModifyToErr(q.qp); err != nil {
		return fmt.Errorf("uverbs PostSend: %w, after %d work request(s) had been written to the send queue; moving the QP to ERR failed too (%v): they may run later", dbErr, posted, err)
	}
	return fmt.Errorf("uverbs PostSend: %w, after %d work request(s) had been written to the send queue: the QP was moved to ERR, so they complete with WCWRFlushErr instead of running", dbErr, posted)
}

// PostRecv writes receives into the QP's receive queue: shared memory
// only, no system call.
func (q *QP) PostRecv(wr *provider.RecvWR) error {
	if q.qp.State.Load() >= provider.StateErr {
		return errRecvInERR
	}
	return postRecv(q.p, &q.rq, &q.rqPut, q.qp.Cap.MaxRecvSGE, wr)
}

func postRecv(p *Provider, r *mmio.Ring[abi.SIWRQE], put *uint32, maxSGEs uint32, wr *provider.RecvWR) error {
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if len(wr.SGL) > int(min(maxSGEs, maxSGE)) {
			return provider.PostFailed(i, wr.WRID, fmt.Errorf("uverbs PostRecv: %d scatter/gather entries, the queue takes %d: %w", len(wr.SGL), min(maxSGEs, maxSGE), sys.ErrInvalid))
		}
		e := r.Slot(*put)
		fw := word(e)
		if atomic.LoadUint32(fw)&valid != 0 {
			return provider.PostFailed(i, wr.WRID, provider.ErrRecvQueueFull)
		}
		var length uint64
		for j, s := range wr.SGL {
			e.SGE[j] = abi.SIWSGE{LAddr: s.Addr, Length: s.Length, LKey: s.LKey}
			length += uint64(s.Length)
		}
		if length > math.MaxUint32 {
			return provider.PostFailed(i, wr.WRID, provider.ErrMessageTooLong("Recv", length))
		}
		e.ID = wr.WRID
		atomic.StoreUint32(fw, valid|uint32(len(wr.SGL))<<16)
		*put++
	}
	return nil
}

// ---- shared receive queue ----

type srq struct {
	p   *Provider
	srq *provider.SRQ
	mem []byte
	rq  mmio.Ring[abi.SIWRQE]
	put uint32
}

func (p *Provider) SRQDriverData(*provider.SRQConfig) (provider.DriverReq, error) {
	return provider.DriverReq{OutLen: abi.Size[abi.SIWURespCreateSRQ]()}, nil
}

func (p *Provider) NewSRQ(s *provider.SRQ, _ provider.DriverReq, out []byte) (provider.SRQQueue, error) {
	var resp abi.SIWURespCreateSRQ
	copy(abi.Bytes(&resp), out)
	mem, err := p.mapQueue("SRQ", resp.SRQKey, resp.NumRQE, rqeSize, 0)
	if err != nil {
		return nil, err
	}
	ring, err := mmio.NewRing[abi.SIWRQE](mem, uint64(resp.NumRQE), rqeSize)
	if err != nil {
		sys.Munmap(mem)
		return nil, &sys.Error{Op: "siw map SRQ", Err: err}
	}
	s.MaxWR = resp.NumRQE
	return &srq{p: p, srq: s, mem: mem, rq: ring}, nil
}

func (q *srq) PostRecv(wr *provider.RecvWR) error {
	return postRecv(q.p, &q.rq, &q.put, q.srq.MaxSGE, wr)
}

// FixedSize: the SRQ's ring is mapped once; siw's MODIFY_SRQ changes only
// the limit.
func (q *srq) FixedSize() string {
	return "a siw SRQ cannot be resized (the kernel driver changes only its limit)"
}

func (q *srq) ModifyDriverData() ([]byte, []byte) { return nil, nil }
func (q *srq) Modified(bool) error                { return nil }

func (q *srq) Unmap() error {
	if q.mem == nil {
		return nil
	}
	err := sys.Munmap(q.mem)
	q.mem = nil
	return err
}

// ---- address handle ----

// iWARP has no address handles: CREATE_AH fails in the kernel before
// these are asked.
func (p *Provider) AHDriverOutLen() int                                    { return 0 }
func (p *Provider) AHCreated(*provider.AH, *provider.AHAttr, []byte) error { return nil }

// BreakDoorbell makes the QP's doorbell fail with EINVAL (its POST_SEND
// names a QP handle that does not exist) until restore is called, for
// tests of what a failed doorbell leaves behind.
func (q *QP) BreakDoorbell() (restore func(), err error) {
	good, goodBell := q.db, q.bell
	db, bell, err := q.p.ctx.BrokenDoorbell(q.dbOut)
	if err != nil {
		return nil, err
	}
	q.db, q.bell = db, bell
	return func() { q.db, q.bell = good, goodBell }, nil
}
