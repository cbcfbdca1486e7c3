package rxe

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// Provider is soft-RoCE's provider (rdma-core's providers/rxe): every
// queue is a ring the kernel maps into the process (struct rxe_queue_buf),
// polled and posted here without system calls; the send queue's doorbell
// is an empty POST_SEND write().
type Provider struct {
	ctx *provider.Context
}

// New returns the rxe provider of a context.
func New(ctx *provider.Context) *Provider { return &Provider{ctx: ctx} }

func (p *Provider) Name() string                     { return "rxe" }
func (p *Provider) ContextDriverData() ([]byte, int) { return nil, 0 }
func (p *Provider) ContextCreated([]byte) error      { return nil }
func (p *Provider) Close()                           {}

// queue is one mapped rxe ring. The index mask and element size come
// from the header the kernel wrote; the kernel masks indices itself, so a
// damaged header cannot make it write out of bounds.
type queue struct {
	mem  []byte // the whole mapping, for munmap
	hdr  *abi.RXEQueueBuf
	data []byte
	mask uint32
	log2 uint32
}

func (p *Provider) mapRing(what string, mi abi.MMInfo) (*queue, error) {
	if mi.Size < abi.OffsetofRXEQueueBufData {
		return nil, &sys.Error{Op: "rxe map " + what, Err: fmt.Errorf("kernel reported a %d-byte queue", mi.Size)}
	}
	mem, err := p.ctx.FD().Mmap("rxe map "+what, int64(mi.Offset), int(mi.Size))
	if err != nil {
		return nil, err
	}
	r, err := newQueue(what, mem)
	if err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	return r, nil
}

// newQueue reads the header of the queue mapped at mem.
func newQueue(what string, mem []byte) (*queue, error) {
	if len(mem) < int(abi.OffsetofRXEQueueBufData) {
		return nil, &sys.Error{Op: "rxe map " + what, Err: fmt.Errorf("a %d-byte queue", len(mem))}
	}
	r := &queue{mem: mem, hdr: mmio.At[abi.RXEQueueBuf](mem, 0), data: mem[abi.OffsetofRXEQueueBufData:]}
	r.mask = r.hdr.IndexMask
	r.log2 = r.hdr.Log2ElemSize
	// In 64 bits: a mask of 0xffffffff must not wrap to 0 slots, nor a
	// large element size shift the product out of range.
	slots := uint64(r.mask) + 1
	if r.log2 >= 32 || slots<<r.log2 > uint64(len(r.data)) || r.mask&(r.mask+1) != 0 {
		return nil, &sys.Error{Op: "rxe map " + what, Err: fmt.Errorf("queue header (mask %#x, element 2^%d) does not fit %d bytes", r.mask, r.log2, len(r.data))}
	}
	return r, nil
}

// sendSlotSize and recvSlotSize are what a work request may fill of a
// slot: the WQE up to its scatter/gather list, then the list or the
// inline data (rxe sizes its queues the same way).
func sendSlotSize(c provider.QPCap) uint64 {
	payload := uint64(abi.OffsetofRXESendWQEDMA) + abi.OffsetofRXEDMAInfoSGE
	return payload + max(uint64(c.MaxSendSGE)*uint64(abi.SizeofRXESGE), uint64(c.MaxInlineData), 8)
}

func recvSlotSize(maxSGE uint32) uint64 {
	return uint64(abi.OffsetofRXERecvWQEDMA) + abi.OffsetofRXEDMAInfoSGE + uint64(maxSGE)*uint64(abi.SizeofRXESGE)
}

// fits checks that each slot of the ring holds need bytes, so posts
// stay inside their slot.
func (r *queue) fits(what string, need uint64) error {
	if uint64(1)<<r.log2 < need {
		return &sys.Error{Op: "rxe map " + what, Err: fmt.Errorf("%d-byte slots, a work request needs %d", 1<<r.log2, need)}
	}
	return nil
}

func (r *queue) unmap() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := sys.Munmap(r.mem)
	r.mem, r.data, r.hdr = nil, nil, nil
	return err
}

func (r *queue) producer() uint32 { return atomic.LoadUint32(&r.hdr.ProducerIndex) }
func (r *queue) consumer() uint32 { return atomic.LoadUint32(&r.hdr.ConsumerIndex) }

// full reports whether a producer at prod may not add another entry: the
// ring is full, or holds limit entries. rxe rounds rings up to a power of
// two, so the ring can hold more than the capacity the kernel reported;
// holding to the reported capacity keeps CQs sized from it safe.
func (r *queue) full(prod, limit uint32) bool {
	used := (prod - r.consumer()) & r.mask
	return used >= r.mask || used >= limit
}

// next is the producer index and whether another entry may go there
// (full's test), with the header pointer loaded once.
func (r *queue) next(limit uint32) (prod uint32, ok bool) {
	h := r.hdr
	prod = atomic.LoadUint32(&h.ProducerIndex)
	used := (prod - atomic.LoadUint32(&h.ConsumerIndex)) & r.mask
	return prod, used < r.mask && used < limit
}

// room is how many entries the ring holds: one slot stays empty to tell
// a full ring from an empty one. It is what an SRQ reports as its size
// (rxe's query answers the index mask); a QP's rings are held to the
// capacity CREATE_QP reported instead (see full).
func (r *queue) room() uint32 { return r.mask }

// slot is entry i's offset. mapRing checked log2 < 32: the mask spares
// the shift's check for counts of 32 and more.
func (r *queue) slot(i uint32) int { return int((i & r.mask) << (r.log2 & 31)) }

func (r *queue) slotSize() int { return 1 << r.log2 }

// be32 converts between host order and the big-endian immediate data the
// kernel keeps in work requests and completions (amd64 and arm64 are
// little-endian: internal/abi builds only there).
func be32(v uint32) uint32 { return bits.ReverseBytes32(v) }

// ---- completion queue ----

// CQ is a completion queue's ring. uverbs.CQ.Poll runs Poll's loop
// itself for a CQ without a lock, from Hdr, WCs, CopyWC and SawErrors.
type CQ struct {
	p    *Provider
	ring *queue
	// Hdr and WCs are the ring's header and its slots as completions,
	// for the poll loops: no bounds check per completion (setRing
	// checked them once).
	Hdr *abi.RXEQueueBuf
	WCs mmio.Ring[abi.WC]
}

// setRing makes r the CQ's ring, checking that its slots hold
// completions.
func (q *CQ) setRing(r *queue) error {
	wcs, err := mmio.NewRing[abi.WC](r.data, uint64(r.mask)+1, r.slotSize())
	if err != nil {
		return &sys.Error{Op: "rxe map CQ", Err: err}
	}
	q.ring, q.Hdr, q.WCs = r, r.hdr, wcs
	return nil
}

func (p *Provider) CQDriverData(int) (provider.DriverReq, error) {
	return provider.DriverReq{OutLen: abi.Size[abi.RXECreateCQResp]()}, nil
}

func (p *Provider) NewCQ(cq *provider.CQ, _ provider.DriverReq, out []byte) (provider.CQQueue, error) {
	var resp abi.RXECreateCQResp
	copy(abi.Bytes(&resp), out)
	ring, err := p.mapRing("CQ", resp.MI)
	if err != nil {
		return nil, err
	}
	q := &CQ{p: p}
	if err := q.setRing(ring); err != nil {
		ring.unmap()
		return nil, err
	}
	return q, nil
}

// Poll moves up to len(wc) completions from the ring into wc.
// uverbs.CQ.Poll has the same loop written out for a CQ without a lock
// (a call and a frame less); this is the interface's, under the CQ's
// lock.
func (q *CQ) Poll(wc []provider.WC) (n int) {
	h := q.Hdr
	prod := atomic.LoadUint32(&h.ProducerIndex)
	cons := atomic.LoadUint32(&h.ConsumerIndex)
	var status uint32
	for ; n < len(wc) && cons != prod; n++ {
		status |= CopyWC(&wc[n], q.WCs.Slot(cons))
		cons = (cons + 1) & q.WCs.Mask()
	}
	if n > 0 {
		if status != 0 {
			q.SawErrors(cons, n)
		}
		atomic.StoreUint32(&h.ConsumerIndex, cons)
	}
	return n
}

// CopyWC fills w from rxe's completion e and returns its status. It is
// one block copy (abi.CopyWC: uverbs.WorkCompletion starts with
// ib_uverbs_wc's layout, and WCFlags are the kernel's bits); then Imm,
// the union at ex, turns to host order if it is immediate data (it stays as it is if
// it is an invalidated rkey, and becomes 0 if it is neither), and the
// port widens to an int. Small enough to be inlined into the loops.
// TestRxePollWritesEveryField catches a field it misses.
func CopyWC(w *provider.WC, e *abi.WC) uint32 {
	abi.CopyWC(w, e)
	w.PortNum = int(e.PortNum)
	if k := provider.WCFlags(e.WCFlags); k&(provider.WCWithImm|provider.WCWithInv) == 0 {
		w.Imm = 0
	} else if k&provider.WCWithImm != 0 {
		w.Imm = be32(w.Imm)
	}
	return e.Status
}

// SawErrors tells the context of the completions in error among the n
// in the ring before index next, before the consumer index moves past
// them: the device may have moved their QPs to ERR. It is the only work
// Poll does for an error, and only then.
func (q *CQ) SawErrors(next uint32, n int) {
	for i := range uint32(n) {
		if e := q.WCs.Slot(next - uint32(n) + i); e.Status != 0 {
			q.p.ctx.SawErrorCompletion(e.QPNum)
		}
	}
}

func (q *CQ) ResizeDriverOutLen() int { return abi.Size[abi.RXEResizeCQResp]() }

func (q *CQ) Resized(out []byte) error {
	var resp abi.RXEResizeCQResp
	copy(abi.Bytes(&resp), out)
	old := q.ring
	ring, err := q.p.mapRing("resized CQ", resp.MI)
	if err != nil {
		return err
	}
	if err := q.setRing(ring); err != nil {
		ring.unmap()
		return err
	}
	return old.unmap()
}

func (q *CQ) Unmap() error { return q.ring.unmap() }

// NewCQOnMemory is a CQ on a ring in ordinary memory, laid out as the
// kernel maps one (struct rxe_queue_buf, then the slots), for tests of
// the poll loops, uverbs' included. Its Unmap does nothing.
func NewCQOnMemory(ctx *provider.Context, mem []byte) (*CQ, error) {
	r, err := newQueue("test CQ", mem)
	if err != nil {
		return nil, err
	}
	r.mem = nil // not a mapping: nothing to unmap
	q := &CQ{p: New(ctx)}
	if err := q.setRing(r); err != nil {
		return nil, err
	}
	return q, nil
}

// ---- queue pair ----

// QP is a queue pair's send and receive rings. uverbs calls its
// PostSend directly, without the interface's dispatch.
type QP struct {
	p     *Provider
	qp    *provider.QP
	sq    *queue
	rq    *queue // nil with an SRQ
	db    []byte // the POST_SEND doorbell command, ready to write
	dbOut []byte // its response
	bell  sys.Doorbell
	// plain[op] is set for the opcodes postSend builds itself (see
	// plainOpcodes); maxWR and maxSGE are the QP's send capacity.
	plain  [16]bool
	maxWR  uint32
	maxSGE int
	// flushTypes are the FLUSH types the QP may post (FlushGlobal,
	// FlushPersistent: the device's capabilities, read once at create;
	// 0 for UC and UD, or a device without FLUSH).
	flushTypes provider.FlushType
}

// plainOpcodes are the opcodes whose work requests, without SendInline,
// need no check but the scatter/gather count (uverbs' QP.checkSend):
// those of RC and UC that carry data, no UD address, atomic or
// capability check. UC has no RDMA READ.
func plainOpcodes(t provider.QPType) (m [16]bool) {
	for _, op := range []provider.WROpcode{provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv, provider.WRRDMARead} {
		m[op] = t == provider.QPTypeRC || t == provider.QPTypeUC && op != provider.WRRDMARead
	}
	return m
}

func (p *Provider) QPDriverData(*provider.QPConfig) (provider.DriverReq, error) {
	return provider.DriverReq{OutLen: abi.Size[abi.RXECreateQPResp]()}, nil
}

func (p *Provider) NewQP(qp *provider.QP, _ provider.DriverReq, out []byte) (provider.QPQueues, error) {
	var resp abi.RXECreateQPResp
	copy(abi.Bytes(&resp), out)
	q := &QP{p: p, qp: qp}
	var err error
	if q.sq, err = p.mapRing("send queue", resp.SQMI); err != nil {
		return nil, err
	}
	if err := q.sq.fits("send queue", sendSlotSize(qp.Cap)); err != nil {
		q.sq.unmap()
		return nil, err
	}
	if qp.SRQ == nil {
		if q.rq, err = p.mapRing("receive queue", resp.RQMI); err != nil {
			q.sq.unmap()
			return nil, err
		}
		if err := q.rq.fits("receive queue", recvSlotSize(qp.Cap.MaxRecvSGE)); err != nil {
			q.Unmap()
			return nil, err
		}
	}
	// The doorbell: POST_SEND with no work requests kicks the kernel's
	// requester. Built once, so posting allocates nothing.
	q.dbOut = make([]byte, abi.Size[abi.PostSendResp]())
	req := abi.PostSend{QPHandle: qp.Handle, WQESize: uint32(abi.SizeofSendWR)}
	req.Response = sys.PointerTo(q.dbOut)
	q.db = p.ctx.FD().CommandBuffer(abi.IB_USER_VERBS_CMD_POST_SEND, abi.Bytes(&req), len(q.dbOut))
	if q.bell, err = p.ctx.FD().Doorbell(q.db); err != nil {
		q.Unmap()
		return nil, err
	}
	q.plain, q.maxWR, q.maxSGE = plainOpcodes(qp.Type), qp.Cap.MaxSendWR, int(qp.Cap.MaxSendSGE)
	if qp.Type == provider.QPTypeRC { // FLUSH is RC's only
		if qp.CapsEx&abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL != 0 {
			q.flushTypes |= provider.FlushGlobal
		}
		if qp.CapsEx&abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT != 0 {
			q.flushTypes |= provider.FlushPersistent
		}
	}
	return q, nil
}

func (q *QP) Unmap() error {
	err := q.sq.unmap()
	if e := q.rq.unmap(); err == nil {
		err = e
	}
	return err
}

// PostSend writes the chain into the send queue, then rings the doorbell
// once if anything was posted. The work requests of the plain opcodes
// (most of them: RDMA WRITE and READ and SEND of RC and UC, without
// SendInline) are checked and built here, without a call; the others go
// through postOneSend, which has uverbs check them (provider.CheckSend).
//
// The doorbell is the QP's sys.Doorbell, a write(2) without the FD's
// lock. That is safe because the fd outlives every doorbell: the fd is
// closed only by Context.Close, after it has closed every QP (QPs have no
// dependents, so their Close is never refused: the closed flag is set
// even when the kernel's destroy fails), and a QP rings only while open:
// a locked QP's post holds the send lock and checks the closed flag
// under it, and its Close takes the lock; a TD QP's Close must not run
// beside a post (docs/threading.md), as it unmaps the queue.
//
// A plain request's slot: every field that the kernel reads for these
// opcodes is written, and nothing is cleared first. The kernel's
// requester and completer (rxe_req.c, rxe_comp.c) read of a user's send
// WQE: the work request's ID, opcode, flags, immediate data or rkey to
// invalidate, the union member of the opcode (rdma: remote address and
// rkey; the atomic, ud, mw and flush members belong to opcodes that
// postOneSend builds after clearing the slot's whole fixed part), iova,
// and the DMA state (length, resid, cur_sge, num_sge, sge_offset, the
// SGEs). It reads state (posted = 0), status and has_rd_atomic before it
// writes them, so they are zeroed; it sets mask and first_psn/last_psn
// before reading them, and they are zeroed with their neighbours, as
// 64-bit stores of zero. The union's other bytes keep what an earlier
// request of the slot left there: no plain opcode reads them.
func (q *QP) PostSend(wr *provider.SendWR) error {
	r, first := q.sq, wr
	for ; wr != nil; wr = wr.Next {
		op := wr.Opcode
		if op >= provider.WROpcode(len(q.plain)) || !q.plain[op] || wr.Flags&provider.SendInline != 0 || len(wr.SGL) > q.maxSGE {
			if op != provider.WRFlush || !q.flushOK(wr) {
				if err := q.postOneSend(wr); err != nil {
					return q.postFailed(first, wr, err)
				}
				continue
			}
			// FLUSH, built here too: uverbs' checks (flushOK), each once.
			prod, ok := r.next(q.maxWR)
			if !ok {
				return q.postFailed(first, wr, provider.ErrSendQueueFull)
			}
			w := mmio.At[abi.RXESendWQE](r.data, r.slot(prod))
			w.WR.WRID = wr.WRID
			w.WR.Reserved, w.WR.Opcode, w.WR.SendFlags = 0, uint32(op), uint32(wr.Flags)
			*w.WR.Ex.ImmData() = 0
			*w.WR.WR.Flush() = abi.RXESendWRWRFlush{RemoteAddr: wr.RemoteAddr, RKey: wr.RKey,
				Type: uint8(wr.FlushType), Level: uint8(wr.FlushLevel)}
			w.Status, w.State, w.IOVA = 0, 0, wr.RemoteAddr
			w.Mask, w.FirstPSN, w.LastPSN, w.AckLength, w.SSN, w.HasRDAtomic = 0, 0, 0, 0, 0, 0
			n := uint32(wr.FlushLength)
			w.DMA.Length, w.DMA.Resid, w.DMA.CurSGE, w.DMA.NumSGE = n, n, 0, 0
			w.DMA.SGEOffset, w.DMA.Reserved = 0, 0
			atomic.StoreUint32(&r.hdr.ProducerIndex, (prod+1)&r.mask)
			continue
		}
		// Built here, not in a function of its own: the call would
		// cost more than the checks above.
		prod, ok := r.next(q.maxWR)
		if !ok {
			return q.postFailed(first, wr, provider.ErrSendQueueFull)
		}
		off := r.slot(prod)
		w := mmio.At[abi.RXESendWQE](r.data, off)
		var length uint64
		for j, s := range wr.SGL {
			*mmio.At[abi.RXESGE](r.data, off+plainSGEOffset+j*int(abi.SizeofRXESGE)) = abi.RXESGE(s)
			length += uint64(s.Length)
		}
		if length > math.MaxUint32 {
			return q.postFailed(first, wr, provider.ErrMessageTooLong("Send", length))
		}
		// The fixed part (see above).
		w.WR.WRID = wr.WRID
		w.WR.Reserved, w.WR.Opcode, w.WR.SendFlags = 0, uint32(op), uint32(wr.Flags)
		var ex uint32
		switch op {
		case provider.WRRDMAWriteWithImm, provider.WRSendWithImm:
			ex = be32(wr.Imm)
		case provider.WRSendWithInv:
			ex = wr.InvalidateRKey
		}
		*w.WR.Ex.ImmData() = ex
		var iova uint64
		if op == provider.WRRDMAWrite || op == provider.WRRDMAWriteWithImm || op == provider.WRRDMARead {
			rd := w.WR.WR.RDMA()
			iova = wr.RemoteAddr
			rd.RemoteAddr, rd.RKey, rd.Reserved = iova, wr.RKey, 0
		}
		w.Status, w.State, w.IOVA = 0, 0, iova
		w.Mask, w.FirstPSN, w.LastPSN, w.AckLength, w.SSN, w.HasRDAtomic = 0, 0, 0, 0, 0, 0
		w.DMA.Length, w.DMA.Resid, w.DMA.CurSGE, w.DMA.NumSGE = uint32(length), uint32(length), 0, uint32(len(wr.SGL))
		w.DMA.SGEOffset, w.DMA.Reserved = 0, 0
		atomic.StoreUint32(&r.hdr.ProducerIndex, (prod+1)&r.mask)
	}
	// uverbs passes at least one request, so something was posted.
	if r, ok := q.bell.Ring(); !ok {
		return q.doorbellFailed(index(first, nil), q.bell.Err("rxe doorbell", r), nil)
	}
	return nil
}

// flushOK reports whether the FLUSH wr passes uverbs' checks of
// QP.checkSend (a type the device executes, a level, a 32-bit length,
// the scatter/gather count, no inline); when not, postOneSend has them
// made again for the error.
func (q *QP) flushOK(wr *provider.SendWR) bool {
	t := wr.FlushType
	return t != 0 && t&^q.flushTypes == 0 && wr.FlushLevel <= provider.FlushMR && wr.FlushLength <= math.MaxUint32 &&
		wr.Flags&provider.SendInline == 0 && len(wr.SGL) <= q.maxSGE
}

// index is wr's position in the chain from first (nil: the chain's
// length).
func index(first, wr *provider.SendWR) int {
	i := 0
	for w := first; w != wr; w = w.Next {
		i++
	}
	return i
}

// postFailed ends a post whose request wr, in the chain from first,
// failed with err before reaching the queue: it rings the doorbell for
// the requests before wr, and reports err with wr's index (PostError).
func (q *QP) postFailed(first, wr *provider.SendWR, err error) error {
	i := index(first, wr)
	err = provider.PostFailed(i, wr.WRID, err)
	if i > 0 {
		if r, ok := q.bell.Ring(); !ok {
			return q.doorbellFailed(i, q.bell.Err("rxe doorbell", r), err)
		}
	}
	return err
}

// plainSGEOffset is where a send WQE's scatter/gather list starts.
const plainSGEOffset = int(abi.OffsetofRXESendWQEDMA) + abi.OffsetofRXEDMAInfoSGE

// doorbellFailed handles a doorbell that failed after posted requests
// were published to the send queue. They cannot be taken back: the
// kernel reads the producer index whenever its requester runs (at the
// next doorbell, or from its timers), so they would run later, after
// PostSend reported failure. Moving the QP to ERR makes the requester
// flush them (WCWRFlushErr) instead. postErr is the error of a request
// after them that was not posted, if any.
//
// PostSend refuses sends before RTS, and a locked QP's Modify to RESET
// waits for posts in progress, so the kernel refusing the doorbell for
// the QP's state takes a TD QP modified during a post, or a kernel
// failure of another kind.
func (q *QP) doorbellFailed(posted int, dbErr, postErr error) error {
	what := fmt.Sprintf("%d work request(s)", posted)
	if postErr != nil {
		what += fmt.Sprintf(" (the next one was not: %s)", strings.TrimPrefix(postErr.Error(), "uverbs PostSend: "))
	}
	if err := q.p.ctx.ModifyToErr(q.qp); err != nil {
		return fmt.Errorf("uverbs PostSend: %w, after %s had been written to the send queue; moving the QP to ERR to flush them failed too (%v): they run at the next doorbell unless the QP is reset", dbErr, what, err)
	}
	return fmt.Errorf("uverbs PostSend: %w, after %s had been written to the send queue: the QP was moved to ERR, so they complete with WCWRFlushErr instead of running", dbErr, what)
}

func (q *QP) postOneSend(wr *provider.SendWR) error {
	if err := provider.CheckSend(q.qp, wr); err != nil {
		return err
	}
	r := q.sq
	prod := r.producer()
	if r.full(prod, q.qp.Cap.MaxSendWR) {
		return provider.ErrSendQueueFull
	}
	off := r.slot(prod)
	wqe := mmio.At[abi.RXESendWQE](r.data, off)
	*wqe = abi.RXESendWQE{}
	wqe.WR.WRID = wr.WRID
	wqe.WR.Opcode = uint32(wr.Opcode)
	wqe.WR.SendFlags = uint32(wr.Flags)
	dma := off + int(abi.OffsetofRXESendWQEDMA)
	payload := dma + abi.OffsetofRXEDMAInfoSGE
	var length uint64
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		rd := wqe.WR.WR.RDMA()
		rd.RemoteAddr, rd.RKey = wr.RemoteAddr, wr.RKey
		wqe.IOVA = wr.RemoteAddr
	case provider.WRSend, provider.WRSendWithImm, provider.WRSendWithInv:
		if q.qp.Type == provider.QPTypeUD {
			ud := wqe.WR.WR.UD()
			ud.RemoteQPN, ud.RemoteQKey, ud.AHNum = wr.RemoteQPN, wr.RemoteQKey, wr.AH.Num
		}
	case provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		at := wqe.WR.WR.Atomic()
		at.RemoteAddr, at.CompareAdd, at.Swap, at.RKey = wr.RemoteAddr, wr.CompareAdd, wr.Swap, wr.RKey
		wqe.IOVA = wr.RemoteAddr
	case provider.WRAtomicWrite:
		rd := wqe.WR.WR.RDMA()
		rd.RemoteAddr, rd.RKey = wr.RemoteAddr, wr.RKey
		wqe.IOVA = wr.RemoteAddr
		copy(r.data[payload:payload+8], wr.AtomicWrite[:])
		wqe.DMA.Length, wqe.DMA.Resid = 8, 8
		goto publish
	case provider.WRFlush:
		fl := wqe.WR.WR.Flush()
		fl.RemoteAddr, fl.RKey, fl.Type, fl.Level = wr.RemoteAddr, wr.RKey, uint8(wr.FlushType), uint8(wr.FlushLevel)
		wqe.IOVA = wr.RemoteAddr
		wqe.DMA.Length, wqe.DMA.Resid = uint32(wr.FlushLength), uint32(wr.FlushLength)
		goto publish
	case provider.WRBindMW:
		b := wr.Bind
		mw := wqe.WR.WR.MW()
		mw.Addr, mw.Length, mw.MRLKey, mw.MWRKey, mw.RKey, mw.Access = b.Addr, b.Length, b.MR.LKey, b.MW.RKey.Load(), b.RKey, uint32(b.Access)
		// The kernel names the window by its current rkey and gives it
		// the new one when the bind executes: the next bind or
		// invalidation must use the new key (libibverbs' ibv_bind_mw
		// updates ibv_mw.rkey the same way, when posting).
		b.MW.RKey.Store(b.RKey)
		goto publish
	case provider.WRLocalInv:
		*wqe.WR.Ex.InvalidateRKey() = wr.InvalidateRKey
		goto publish
	}
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		*wqe.WR.Ex.ImmData() = be32(wr.Imm)
	case provider.WRSendWithInv:
		*wqe.WR.Ex.InvalidateRKey() = wr.InvalidateRKey
	}
	if wr.Flags&provider.SendInline != 0 {
		n, err := provider.CopyInline(r.data[payload:], wr.SGL)
		if err != nil {
			return err
		}
		length = uint64(n)
	} else {
		for i, s := range wr.SGL {
			e := mmio.At[abi.RXESGE](r.data, payload+i*int(abi.SizeofRXESGE))
			e.Addr, e.Length, e.LKey = s.Addr, s.Length, s.LKey
			length += uint64(s.Length)
		}
		if length > math.MaxUint32 {
			return provider.ErrMessageTooLong("Send", length)
		}
	}
	wqe.DMA.Length, wqe.DMA.Resid = uint32(length), uint32(length)
	wqe.DMA.NumSGE = uint32(len(wr.SGL))
publish:
	atomic.StoreUint32(&r.hdr.ProducerIndex, (prod+1)&r.mask)
	return nil
}

func (q *QP) PostRecv(wr *provider.RecvWR) error {
	err := q.p.postRecvRing(q.rq, q.qp.Cap.MaxRecvWR, q.qp.Cap.MaxRecvSGE, wr)
	if q.qp.State.Load() >= provider.StateErr { // ERR, or maybe (marked)
		if kerr := q.p.ctx.FlushRecvs(q.qp); kerr != nil && err == nil {
			err = kerr
		}
	}
	return err
}

// postRecvRing writes receive work requests into a QP's receive queue or
// an SRQ. No doorbell: the kernel reads the ring when a message arrives.
func (p *Provider) postRecvRing(r *queue, maxWR, maxSGE uint32, wr *provider.RecvWR) error {
	for i := 0; wr != nil; i, wr = i+1, wr.Next {
		if len(wr.SGL) > int(maxSGE) {
			return provider.PostFailed(i, wr.WRID, fmt.Errorf("%d scatter/gather entries, the queue takes %d: %w", len(wr.SGL), maxSGE, sys.ErrInvalid))
		}
		prod := r.producer()
		if r.full(prod, maxWR) {
			return provider.PostFailed(i, wr.WRID, provider.ErrRecvQueueFull)
		}
		off := r.slot(prod)
		wqe := mmio.At[abi.RXERecvWQE](r.data, off)
		wqe.WRID = wr.WRID
		sges := off + int(abi.OffsetofRXERecvWQEDMA) + abi.OffsetofRXEDMAInfoSGE
		var length uint64
		for j, s := range wr.SGL {
			e := mmio.At[abi.RXESGE](r.data, sges+j*int(abi.SizeofRXESGE))
			e.Addr, e.Length, e.LKey = s.Addr, s.Length, s.LKey
			length += uint64(s.Length)
		}
		if length > math.MaxUint32 {
			return provider.PostFailed(i, wr.WRID, provider.ErrMessageTooLong("Recv", length))
		}
		wqe.DMA = abi.RXEDMAInfo{Length: uint32(length), Resid: uint32(length), NumSGE: uint32(len(wr.SGL))}
		atomic.StoreUint32(&r.hdr.ProducerIndex, (prod+1)&r.mask)
	}
	return nil
}

// ---- shared receive queue ----

// srq is a shared receive queue's ring.
type srq struct {
	p      *Provider
	srq    *provider.SRQ
	ring   *queue
	newMap abi.MMInfo // where MODIFY_SRQ reports a resized queue
}

func (p *Provider) SRQDriverData(*provider.SRQConfig) (provider.DriverReq, error) {
	return provider.DriverReq{OutLen: abi.Size[abi.RXECreateSRQResp]()}, nil
}

func (p *Provider) NewSRQ(s *provider.SRQ, _ provider.DriverReq, out []byte) (provider.SRQQueue, error) {
	var resp abi.RXECreateSRQResp
	copy(abi.Bytes(&resp), out)
	ring, err := p.mapRing("SRQ", resp.MI)
	if err != nil {
		return nil, err
	}
	if err := ring.fits("SRQ", recvSlotSize(s.MaxSGE)); err != nil {
		ring.unmap()
		return nil, err
	}
	s.Num = resp.SRQNum
	s.MaxWR = ring.room()
	return &srq{p: p, srq: s, ring: ring}, nil
}

func (q *srq) PostRecv(wr *provider.RecvWR) error {
	return q.p.postRecvRing(q.ring, q.srq.MaxWR, q.srq.MaxSGE, wr)
}

// modifyDriverData is rxe's MODIFY_SRQ request data: where the kernel
// writes the new queue's mmap info when the SRQ is resized.
func (q *srq) ModifyDriverData() ([]byte, []byte) {
	q.newMap = abi.MMInfo{}
	out := abi.Bytes(&q.newMap)
	cmd := abi.RXEModifySRQCmd{MmapInfoAddr: uint64(sys.PointerTo(out))}
	return abi.Bytes(&cmd), out
}

func (q *srq) Modified(resized bool) error {
	if !resized {
		return nil
	}
	old := q.ring
	ring, err := q.p.mapRing("resized SRQ", q.newMap)
	if err != nil {
		return err
	}
	if err := ring.fits("resized SRQ", recvSlotSize(q.srq.MaxSGE)); err != nil {
		ring.unmap()
		return err
	}
	q.ring = ring
	q.srq.MaxWR = ring.room()
	return old.unmap()
}

func (q *srq) Unmap() error { return q.ring.unmap() }

// ---- address handle ----

func (p *Provider) AHDriverOutLen() int { return abi.Size[abi.RXECreateAHResp]() }

func (p *Provider) AHCreated(ah *provider.AH, _ *provider.AHAttr, out []byte) error {
	var resp abi.RXECreateAHResp
	copy(abi.Bytes(&resp), out)
	ah.Num = resp.AHNum
	return nil
}

// BreakDoorbell makes the QP's doorbell fail with EINVAL (it names a QP
// handle that does not exist) until restore is called, for tests of
// what a failed doorbell leaves behind.
func (q *QP) BreakDoorbell() (restore func(), err error) {
	good, goodBell := q.db, q.bell
	db, bell, err := q.p.ctx.BrokenDoorbell(q.dbOut)
	if err != nil {
		return nil, err
	}
	q.db, q.bell = db, bell
	return func() { q.db, q.bell = good, goodBell }, nil
}
