package mlx5

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// SQ is the send queue of one QP: a ring of 64-byte blocks in the QP
// buffer, the send word of the QP's doorbell record and a BlueFlame
// register. Work requests are built in place with Begin, the segment
// methods and Finish, and handed to the device with Ring; any number of
// Finish calls may share one Ring (a post list). PutPlain, PutInline and
// PutAtomic build the common requests whole in one call, in the same
// WQE format (the segments wrap at the ring's end as Begin's do).
//
// An SQ is not safe for concurrent use (libmlx5 holds sq.lock around a
// post; the provider does the same). Completions retire work requests
// through Complete, which the CQ's poller calls without that lock: the
// retired count is atomic, and the work request ids it reads were written
// before the doorbell that let the device complete them.
type SQ struct {
	buf       []byte // WQECnt*64 bytes
	mask      uint32 // WQECnt-1
	qpn       uint32
	qpType    QPType
	maxPost   uint32
	maxGS     int
	maxInline int
	dbrec     *[DBRecSize]byte
	sndRec    *uint32 // the doorbell record's send word, for Ring's mmio calls
	bf        *BlueFlame
	bfDS      int // the largest WQE, in 16-byte units, Ring copies to the BlueFlame buffer; 0: none
	w         Writer
	spans     *provider.Spans // registered memory, read without a fault net
	// segs views buf as 16-byte segments, index masked to the ring, so
	// the plain-request builder writes without bounds checks; dev is set
	// when w is Device{}: Ring calls the mmio stores directly.
	segs mmio.Ring[[SegSize]byte]
	// blocks views buf as 64-byte blocks the same way, for Ring's
	// BlueFlame copy.
	blocks mmio.Ring[[SendWQEBB]byte]
	// wqes views buf as 64-byte blocks of four segments, for the
	// builders: a WQE's first block (ctrl, remote address or atomic, the
	// first data segments) never wraps, so its segments are one Slot and
	// a masked index.
	wqes mmio.Ring[[SendWQEBB / SegSize][SegSize]byte]
	dev  bool

	// sigAll is CtrlCQUpdate when every work request is signaled
	// (sq_sig_all at create, SQConfig.SignalAll), else 0: or-ed into each
	// request's flags without a branch.
	sigAll uint8
	// PreferBF copies WQEs that are not inline to the BlueFlame buffer too
	// (libmlx5's MLX5_POST_SEND_PREFER_BF); off by default, as there.
	PreferBF bool

	curPost uint32        // 64-byte blocks posted, libmlx5's sq.cur_post
	head    uint32        // work requests posted
	tail    atomic.Uint32 // work requests retired: stored by the poller, loaded by the poster
	wrs     []sqWR        // per first block of a posted WQE (index masked)

	// the work request being built
	building bool
	start    int // byte offset of its ctrl segment
	pos      int // byte offset of its next segment
	ds       int
	opcode   uint8
	fmCeSe   uint8
	imm      uint32
	nsge     int
	hasRAddr bool
	hasAtom  bool
	hasDgram bool
	inlHdr   int // byte offset of the inline header, -1 if none
	inlLen   int

	// since the last Ring
	pending    int
	lastStart  int
	lastDS     int
	lastInline bool
}

// sqWR is what the send queue keeps of a posted work request, at the
// index of its first block: its id for the completion and the number
// of work requests posted before it (libmlx5's sq.wrid and
// sq.wqe_head, here one slice, so one bounds check a post and a
// completion).
type sqWR struct {
	id   uint64
	head uint32
}

// SQConfig describes a send queue to NewSQ.
type SQConfig struct {
	Buf       []byte     // the SQ part of the QP buffer: Sizing.Bytes bytes at the SQ offset
	Sizing    SQSizing   // from SQSize
	QPN       uint32     // the QP number CREATE_QP returned
	Type      QPType     // RC, UC or UD
	DBRec     []byte     // the QP's 8-byte doorbell record (send word at SndDBR)
	BlueFlame *BlueFlame // the QP's register
	Writer    Writer     // Device{} outside tests
	// Spans is the context's registered memory, whose inline data the
	// one-entry builder copies without a fault net; nil: none.
	Spans *provider.Spans
	// SignalAll makes every work request signaled (sq_sig_all at create).
	SignalAll bool
}

// NewSQ returns the send queue c describes, empty.
func NewSQ(c SQConfig) (*SQ, error) {
	s := c.Sizing
	if s.WQECnt <= 0 || s.WQECnt > 1<<16 || s.WQECnt&(s.WQECnt-1) != 0 || len(c.Buf) < s.WQECnt*SendWQEBB {
		return nil, invalid("send queue of %d blocks in %d bytes", s.WQECnt, len(c.Buf))
	}
	if len(c.DBRec) < DBRecSize || c.BlueFlame == nil || c.Writer == nil {
		return nil, invalid("send queue without doorbell record, BlueFlame register or writer")
	}
	if c.Type != RC && c.Type != UC && c.Type != UD {
		return nil, invalid("QP type %v", c.Type)
	}
	// The largest WQE the builder can make must fit WQESize, so that
	// MaxPost work requests never overrun the ring: ctrl (+ raddr, or +
	// the UD datagram) and MaxGS data segments or MaxInline bytes, or an
	// atomic's 64 bytes.
	head := 2 * SegSize
	if c.Type == UD {
		head = SegSize + AVSize
	}
	need := max(head+s.MaxGS*SegSize, head+align(4+s.MaxInline, SegSize), SendWQEBB)
	if s.MaxPost <= 0 || s.MaxGS < 0 || s.MaxInline < 0 || s.MaxPost*s.WQESize > s.WQECnt*SendWQEBB ||
		s.WQESize%SendWQEBB != 0 || s.WQESize/SegSize > maxDS || need > s.WQESize {
		return nil, invalid("send queue sizing %+v", s)
	}
	segs, err := mmio.NewRing[[SegSize]byte](c.Buf[:s.WQECnt*SendWQEBB], uint64(s.WQECnt*SendWQEBB/SegSize), SegSize)
	if err != nil {
		return nil, invalid("send queue ring: %v", err)
	}
	blocks, err := mmio.NewRing[[SendWQEBB]byte](c.Buf[:s.WQECnt*SendWQEBB], uint64(s.WQECnt), SendWQEBB)
	if err != nil {
		return nil, invalid("send queue ring: %v", err)
	}
	wqes, err := mmio.NewRing[[SendWQEBB / SegSize][SegSize]byte](c.Buf[:s.WQECnt*SendWQEBB], uint64(s.WQECnt), SendWQEBB)
	if err != nil {
		return nil, invalid("send queue ring: %v", err)
	}
	_, dev := c.Writer.(Device)
	spans := c.Spans
	if spans == nil {
		spans = new(provider.Spans)
	}
	var sigAll uint8
	if c.SignalAll {
		sigAll = CtrlCQUpdate
	}
	return &SQ{
		segs: segs, blocks: blocks, wqes: wqes, dev: dev,
		buf: c.Buf[:s.WQECnt*SendWQEBB], mask: uint32(s.WQECnt - 1), qpn: c.QPN & 0xffffff, qpType: c.Type,
		maxPost: uint32(s.MaxPost), maxGS: s.MaxGS, maxInline: s.MaxInline,
		dbrec: (*[DBRecSize]byte)(c.DBRec), sndRec: mmio.At[uint32](c.DBRec, SndDBR), bf: c.BlueFlame, bfDS: bfDS(c.BlueFlame), w: c.Writer,
		wrs: make([]sqWR, s.WQECnt), inlHdr: -1, spans: spans, sigAll: sigAll,
	}, nil
}

// bfDS is SQ.bfDS for the register bf: half of it, none without
// BlueFlame.
func bfDS(bf *BlueFlame) int {
	if !bf.blueFlame {
		return 0
	}
	return bf.half / SegSize
}

// Outstanding is the number of work requests posted and not yet retired.
func (q *SQ) Outstanding() int { return int(q.head - q.tail.Load()) }

// Counter is the send counter in 64-byte blocks (its low 16 bits are what
// the doorbell record and the WQE index carry).
func (q *SQ) Counter() uint32 { return q.curPost }

// seg returns the 16 bytes at the ring offset off.
func (q *SQ) seg(off int) []byte { return q.buf[off : off+SegSize] }

// advance moves the segment cursor by one 16-byte unit, wrapping to the
// start of the ring at its end (libmlx5: seg == qend -> mlx5_get_send_wqe(qp, 0)).
func (q *SQ) advance(n int) {
	q.pos += n
	if q.pos >= len(q.buf) {
		q.pos -= len(q.buf)
	}
	q.ds += n / SegSize
}

// Begin starts a work request: opcode is an Op* value, fmCeSe the Ctrl*
// bits (CtrlCQUpdate for a signaled one, CtrlSolicited, CtrlFence), imm the
// immediate data of the *_IMM opcodes or the rkey of OpSendInval (host
// order). It returns ErrBusy when the queue holds its maximum of
// outstanding work requests, ErrInvalid for an opcode the QP type does not
// have. A work request begun and not finished is dropped by the next Begin
// or by Abort; nothing reaches the device before Ring.
func (q *SQ) Begin(opcode, fmCeSe uint8, imm uint32) error {
	q.building = false
	switch opcode {
	case OpSend, OpSendImm:
	case OpRDMAWrite, OpRDMAWriteImm:
		if q.qpType == UD {
			return invalid("opcode %#x on a UD QP", opcode)
		}
	case OpRDMARead, OpAtomicCS, OpAtomicFA, OpSendInval:
		if q.qpType != RC {
			return invalid("opcode %#x on a %v QP", opcode, q.qpType)
		}
	case OpNOP:
	default:
		return invalid("send opcode %#x", opcode)
	}
	if q.head-q.tail.Load() >= q.maxPost {
		return ErrBusy
	}
	fmCeSe |= q.sigAll
	q.building = true
	q.start = int(q.curPost&q.mask) * SendWQEBB
	q.pos = q.start
	q.ds = 0
	q.opcode, q.fmCeSe, q.imm = opcode, fmCeSe&(CtrlCQUpdate|CtrlSolicited|CtrlFence|CtrlSmallFence), imm
	q.nsge, q.inlHdr, q.inlLen = 0, -1, 0
	q.hasRAddr, q.hasAtom, q.hasDgram = false, false, false
	q.advance(SegSize) // the ctrl segment, written by Finish
	return nil
}

// PutPlain builds the whole work request wr, with no inline data,
// atomic or datagram segment, in one call straight into the ring: the
// ctrl segment (opcode, fmCeSe, imm), the remote address segment when
// hasRAddr (RDMA write and read: wr.RemoteAddr, wr.RKey), and one data
// segment per gather entry of wr.SGL of non-zero length. The caller has
// checked the opcode for the QP type and that len(wr.SGL) is at most the
// queue's MaxGS. It returns ErrBusy when the queue is full.
func (q *SQ) PutPlain(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR) error {
	return q.putPlain(opcode, fmCeSe, imm, hasRAddr, wr, false)
}

// PutPlainRing is PutPlain followed by Ring in one call, for a post of
// the one work request wr when RingNow says so: it rings the doorbell as
// Ring would (the doorbell record, a write barrier, the first 8 bytes of
// the ctrl segment to the BlueFlame register, a write barrier, the
// BlueFlame half toggled) straight from the builder, without what
// PutPlain records for Ring.
func (q *SQ) PutPlainRing(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR) error {
	return q.putPlain(opcode, fmCeSe, imm, hasRAddr, wr, true)
}

// RingNow says whether a work request may be rung as it is built
// (PutPlainRing): on the device, without PreferBF (so Ring would not
// copy it to the BlueFlame buffer) and with nothing pending.
func (q *SQ) RingNow() bool { return q.dev && !q.PreferBF && q.pending == 0 }

// putPlain is PutPlain, and with ring PutPlainRing.
func (q *SQ) putPlain(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR, ring bool) error {
	if q.head-q.tail.Load() >= q.maxPost {
		return ErrBusy
	}
	fmCeSe |= q.sigAll
	cur := q.curPost
	i := cur * (SendWQEBB / SegSize)
	wqe := q.wqes.Slot(cur)
	ds := uint32(1)
	if hasRAddr {
		PutRAddr(wqe[1][:], wr.RemoteAddr, wr.RKey)
		ds++
	}
	for k := range wr.SGL {
		s := &wr.SGL[k]
		if s.Length == 0 {
			continue // counted, no segment (as Data)
		}
		if ds < SendWQEBB/SegSize {
			PutData(wqe[ds&(SendWQEBB/SegSize-1)][:], s.Length, s.LKey, s.Addr)
		} else {
			PutData(q.segs.Slot(i + ds)[:], s.Length, s.LKey, s.Addr)
		}
		ds++
	}
	PutCtrl(wqe[0][:], opcode, 0, uint16(cur), q.qpn, uint8(ds), fmCeSe, imm)
	if ring {
		// done, and Ring's doorbell for this request alone.
		idx := cur & q.mask
		q.wrs[idx] = sqWR{id: wr.WRID, head: q.head}
		q.head++
		q.curPost = cur + (ds+SendWQEBB/SegSize-1)/(SendWQEBB/SegSize)
		q.building = false
		bf := q.bf
		mmio.Doorbell(q.sndRec, q.curPost&0xffff, mmio.At[uint64](bf.reg, bf.offset), be.Uint64(wqe[0][:]))
		bf.offset ^= bf.half
		return nil
	}
	q.done(cur, ds, wr.WRID, false)
	return nil
}

// done records the work request just built at block counter cur, ds
// 16-byte units long: its id for the completion, the queue's counters,
// and what Ring needs of it.
func (q *SQ) done(cur, ds uint32, wrID uint64, inline bool) {
	q.record(cur, ds, wrID)
	q.pending++
	q.lastStart, q.lastDS, q.lastInline = int(cur&q.mask)*SendWQEBB, int(ds), inline
}

// record records the work request just built at block counter cur, ds
// 16-byte units long, before any doorbell that lets the device complete
// it: its id and the head count for the completion, and the queue's
// counters. It returns the new block counter.
func (q *SQ) record(cur, ds uint32, wrID uint64) (next uint32) {
	q.wrs[cur&q.mask] = sqWR{id: wrID, head: q.head}
	q.head++
	next = cur + (ds+SendWQEBB/SegSize-1)/(SendWQEBB/SegSize)
	q.curPost = next
	q.building = false
	return next
}

// PutAtomic builds the whole compare-and-swap (OpAtomicCS: wr.Swap,
// wr.CompareAdd) or fetch-and-add (OpAtomicFA: wr.CompareAdd is the
// addend, compare is written as 0) wr in one call, straight into the
// ring: ctrl, remote address, atomic and the 8-byte data segment of the
// local buffer wr.SGL[0]. The caller has made CheckSend's checks. It
// returns ErrBusy when the queue is full.
func (q *SQ) PutAtomic(opcode, fmCeSe uint8, wr *provider.SendWR) error {
	return q.putAtomic(opcode, fmCeSe, wr, false)
}

// PutAtomicRing is PutAtomic followed by Ring in one call, as
// PutPlainRing is PutPlain's (when RingNow says so).
func (q *SQ) PutAtomicRing(opcode, fmCeSe uint8, wr *provider.SendWR) error {
	return q.putAtomic(opcode, fmCeSe, wr, true)
}

// putAtomic is PutAtomic, and with ring PutAtomicRing.
func (q *SQ) putAtomic(opcode, fmCeSe uint8, wr *provider.SendWR, ring bool) error {
	if q.head-q.tail.Load() >= q.maxPost {
		return ErrBusy
	}
	fmCeSe |= q.sigAll
	swapAdd, compare := wr.Swap, wr.CompareAdd
	if opcode == OpAtomicFA {
		swapAdd, compare = wr.CompareAdd, 0
	}
	sge := &wr.SGL[0]
	cur := q.curPost
	wqe := q.wqes.Slot(cur)
	PutRAddr(wqe[1][:], wr.RemoteAddr, wr.RKey)
	PutAtomic(wqe[2][:], swapAdd, compare)
	PutData(wqe[3][:], AtomicSize, sge.LKey, sge.Addr)
	const ds = 4
	PutCtrl(wqe[0][:], opcode, 0, uint16(cur), q.qpn, ds, fmCeSe, 0)
	if ring {
		// done, and Ring's doorbell for this request alone (putPlain).
		idx := cur & q.mask
		q.wrs[idx] = sqWR{id: wr.WRID, head: q.head}
		q.head++
		q.curPost = cur + 1
		q.building = false
		bf := q.bf
		mmio.Doorbell(q.sndRec, q.curPost&0xffff, mmio.At[uint64](bf.reg, bf.offset), be.Uint64(wqe[0][:]))
		bf.offset ^= bf.half
		return nil
	}
	q.done(cur, ds, wr.WRID, false)
	return nil
}

// PutInline builds the whole work request wr with inline data in one
// call, straight into the ring: the ctrl segment, the remote address
// segment when hasRAddr (RDMA write), and the inline segment holding the
// bytes of wr.SGL, copied from the caller's memory straight into the
// ring. The caller has checked the opcode for the QP type; PutInline
// checks the inline bytes against max (the QP's MaxInlineData) and the
// queue's MaxInline, and the addresses as CheckSend does. It returns
// false, doing nothing, for what it does not build: data above those
// sizes or at an address CheckSend refuses, data that would wrap at the
// ring's end (then Begin, Inline and Finish build it), and memory that
// cannot be read: the copy has a fault net of its own (the fault panics
// with SetPanicOnFault and its deferred function recovers it, cheaper
// than a call to provider.CopyInline), nothing is posted, and the
// general path's CopyInline makes the error. It returns ErrBusy when
// the queue is full.
func (q *SQ) PutInline(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR, max uint32) (done bool, err error) {
	return q.putInline(opcode, fmCeSe, imm, hasRAddr, wr, max, false)
}

// PutInlineRing is PutInline followed by Ring in one call, as
// PutPlainRing is PutPlain's (when RingNow says so): a request of one
// or two blocks is copied to the BlueFlame buffer as Ring would (the
// doorbell record, a write barrier, the blocks, a write barrier, the
// BlueFlame half toggled) straight from the builder.
func (q *SQ) PutInlineRing(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR, max uint32) (done bool, err error) {
	return q.putInline(opcode, fmCeSe, imm, hasRAddr, wr, max, true)
}

// putInlineOneRing is PutInlineRing of a gather list of one entry, s
// (wr.SGL[0]), the usual inline post, for the plain request p
// (provQP.PostSend's decision) on a QP whose MaxInlineData is the
// queue's MaxInline (NewQP makes it so). Data inside a registered MR
// (q.spans: memory that stays mapped while it is registered) is posted
// here, without a fault net, with one length and address check instead
// of inlineTotal's loop and one call that copies the data into the
// request and the request to the BlueFlame buffer
// (mmio.RecordInlineCopy64). Other data, and a request of more than two
// blocks or more than the BlueFlame copy takes, are putInline's.
func (q *SQ) putInlineOneRing(p *plainOp, wr *provider.SendWR, s *provider.SGE) (bool, error) {
	n, addr := s.Length, s.Addr
	// The lookup first: a miss costs little more than putInline's call.
	if !q.spans.Covers(s.LKey, addr, n) {
		return q.putInline(p.op, sendFM(wr.Flags), wr.Imm&p.immMask, p.raddr, wr, uint32(q.maxInline), true)
	}
	if n-1 >= uint32(q.maxInline) || addr < 4096 || addr+uint64(n) < addr { // n-1: n is not 0
		return false, nil
	}
	cur := q.curPost
	off := SegSize + 4 // the data's offset in the first block
	if p.raddr {
		off += SegSize
	}
	start := int(cur&q.mask) * SendWQEBB
	ds := uint32(off+int(n)+SegSize-1) / SegSize // ctrl, remote address, InlineDS
	if start+int(ds)*SegSize > len(q.buf) {
		return false, nil // the data would wrap: Begin, Inline and Finish
	}
	if ds > 2*SendWQEBB/SegSize || int(ds) > q.bfDS {
		return q.putInline(p.op, sendFM(wr.Flags), wr.Imm&p.immMask, p.raddr, wr, uint32(q.maxInline), true)
	}
	if q.head-q.tail.Load() >= q.maxPost {
		return true, ErrBusy
	}
	blk := q.blocks.Slot(cur)
	if p.raddr {
		PutRAddr(blk[SegSize:2*SegSize], wr.RemoteAddr, wr.RKey)
		PutInlineHeader(blk[2*SegSize:2*SegSize+4], n)
	} else {
		PutInlineHeader(blk[SegSize:SegSize+4], n)
	}
	PutCtrl(blk[:SegSize], p.op, 0, uint16(cur), q.qpn, uint8(ds), sendFM(wr.Flags)|q.sigAll, wr.Imm&p.immMask)
	// done, and Ring's BlueFlame copy of this request alone, as in
	// putInline: one block, or two. The data does not wrap, so neither
	// do its blocks (the buffer is whole blocks).
	next := q.record(cur, ds, wr.WRID)
	bf := q.bf
	var rung bool
	if ds <= SendWQEBB/SegSize {
		rung = mmio.RecordInlineCopy64(q.sndRec, next&0xffff, mmio.At[[SendWQEBB]byte](bf.reg, bf.offset), blk, off, addr, int(n))
	} else {
		rung = mmio.RecordInlineCopy128(q.sndRec, next&0xffff, mmio.At[[2 * SendWQEBB]byte](bf.reg, bf.offset), mmio.At[[2 * SendWQEBB]byte](q.buf, start), off, addr, int(n))
	}
	if !rung {
		q.inlineRefused(p, wr)
		return true, nil
	}
	q.bf.offset ^= q.bf.half // q.bf again: nothing but q lives across the call
	return true, nil
}

// inlineRefused finishes putInlineOneRing's post of p and wr when the
// register's RecordInlineCopy refused (a register not 64-byte aligned;
// it stored nothing): the data into the request, then Ring. The request
// and the queue's counters are as putInlineOneRing left them; what it
// computed is computed again from wr, so that its frame keeps nothing
// across the copy's call.
func (q *SQ) inlineRefused(p *plainOp, wr *provider.SendWR) {
	s := &wr.SGL[0]
	off := SegSize + 4
	if p.raddr {
		off += SegSize
	}
	ds := (off + int(s.Length) + SegSize - 1) / SegSize
	cur := q.curPost - uint32(ds+SendWQEBB/SegSize-1)/(SendWQEBB/SegSize)
	start := int(cur&q.mask) * SendWQEBB
	copy(q.buf[start+off:start+off+int(s.Length)], mmio.BytesAt(s.Addr, int(s.Length)))
	q.pending, q.lastStart, q.lastDS, q.lastInline = 1, start, ds, true
	q.Ring()
}

// putInline is PutInline, and with ring PutInlineRing.
func (q *SQ) putInline(opcode, fmCeSe uint8, imm uint32, hasRAddr bool, wr *provider.SendWR, max uint32, ring bool) (done bool, err error) {
	total, ok := inlineTotal(wr.SGL, max)
	if !ok || total > q.maxInline {
		return false, nil
	}
	cur := q.curPost
	ds := uint32(1)
	if hasRAddr {
		ds++
	}
	hdr := int(cur&q.mask)*SendWQEBB + int(ds)*SegSize // in the WQE's first block
	if hdr+4+total > len(q.buf) {
		return false, nil
	}
	if q.head-q.tail.Load() >= q.maxPost {
		return true, ErrBusy
	}
	// The segments first, the data last: after the copy only the
	// bookkeeping is left. If the copy faults, what was written is in
	// blocks that are not posted.
	fmCeSe |= q.sigAll
	wqe := q.wqes.Slot(cur)
	if hasRAddr {
		PutRAddr(wqe[1][:], wr.RemoteAddr, wr.RKey)
	}
	if total > 0 {
		ds += uint32(total+4+SegSize-1) / SegSize // InlineDS
	}
	PutCtrl(wqe[0][:], opcode, 0, uint16(cur), q.qpn, uint8(ds), fmCeSe, imm)
	if total > 0 {
		dst := q.buf[hdr : hdr+4+total]
		PutInlineHeader(dst, uint32(total))
		dst = dst[4:]
		f := inlineNet{old: debug.SetPanicOnFault(true)}
		defer func() {
			if !f.done {
				f.fault(recover())
			}
		}()
		if sgl := wr.SGL; len(sgl) == 1 { // the usual case, without the loop
			copy(dst, mmio.BytesAt(sgl[0].Addr, int(sgl[0].Length)))
		} else {
			n := 0
			for i := range sgl {
				s := &sgl[i]
				n += copy(dst[n:], mmio.BytesAt(s.Addr, int(s.Length)))
			}
		}
		f.done = true
		debug.SetPanicOnFault(f.old)
		if ring && ds <= 2*SendWQEBB/SegSize && int(ds) <= q.bfDS {
			// done, and Ring's BlueFlame copy of this request alone:
			// one block, or two (an inline RDMA write of more than 12
			// bytes) in one call. The data does not wrap, so neither
			// do its blocks; a register half holds two blocks when it
			// holds more than four segments (it is a multiple of 64
			// bytes).
			idx := cur & q.mask
			next := q.record(cur, ds, wr.WRID)
			bf := q.bf
			var rung bool
			if ds <= SendWQEBB/SegSize {
				rung = mmio.RecordCopy64(q.sndRec, next&0xffff, mmio.At[[SendWQEBB]byte](bf.reg, bf.offset), q.blocks.Slot(cur))
			} else {
				rung = mmio.RecordCopy128(q.sndRec, next&0xffff, mmio.At[[2 * SendWQEBB]byte](bf.reg, bf.offset), mmio.At[[2 * SendWQEBB]byte](q.buf, int(idx)*SendWQEBB))
			}
			if rung {
				bf.offset ^= bf.half
				return true, nil
			}
			// A register RecordCopy refused (it stored nothing): Ring.
			q.pending, q.lastStart, q.lastDS, q.lastInline = 1, int(idx)*SendWQEBB, int(ds), true
			q.Ring()
			return true, nil
		}
	}
	q.done(cur, ds, wr.WRID, total > 0)
	if ring {
		q.Ring()
	}
	return true, nil
}

// inlineNet is the state of putInline's fault net: the goroutine's
// fault setting before it and whether the copy finished.
type inlineNet struct {
	old, done bool
}

// fault is what putInline's deferred function does after a copy that
// did not finish, with what it recovered, r: the fault setting is
// restored and a memory fault is dropped, so that putInline returns
// false (its results are still zero) and the request is built on the
// general path, whose CopyInline faults on the same memory and makes
// the error; any other panic goes on (nil, from runtime.Goexit, is
// nothing to handle). The deferred function leaves putInline's results
// alone, so they stay in registers.
func (f *inlineNet) fault(r any) {
	debug.SetPanicOnFault(f.old)
	if _, fault := r.(interface{ Addr() uintptr }); !fault && r != nil {
		panic(r)
	}
}

// Abort drops the work request being built.
func (q *SQ) Abort() { q.building = false }

func (q *SQ) check(what string) error {
	if !q.building {
		return invalid("%s outside Begin/Finish", what)
	}
	return nil
}

// RemoteAddr adds the remote address segment of an RDMA write, read or
// atomic; it must come first after Begin.
func (q *SQ) RemoteAddr(raddr uint64, rkey uint32) error {
	if err := q.check("RemoteAddr"); err != nil {
		return err
	}
	switch q.opcode {
	case OpRDMAWrite, OpRDMAWriteImm, OpRDMARead, OpAtomicCS, OpAtomicFA:
	default:
		return invalid("remote address on opcode %#x", q.opcode)
	}
	if q.ds != 1 {
		return invalid("remote address after other segments")
	}
	PutRAddr(q.seg(q.pos), raddr, rkey)
	q.advance(SegSize)
	q.hasRAddr = true
	return nil
}

// Atomic adds the atomic segment: for OpAtomicCS the swap and compare
// values, for OpAtomicFA the addend (compare ignored). It follows
// RemoteAddr; the 8-byte local buffer follows as one Data call.
func (q *SQ) Atomic(swapAdd, compare uint64) error {
	if err := q.check("Atomic"); err != nil {
		return err
	}
	if q.opcode != OpAtomicCS && q.opcode != OpAtomicFA {
		return invalid("atomic segment on opcode %#x", q.opcode)
	}
	if !q.hasRAddr || q.hasAtom || q.ds != 2 {
		return invalid("atomic segment must follow the remote address")
	}
	if q.opcode == OpAtomicFA {
		compare = 0
	}
	PutAtomic(q.seg(q.pos), swapAdd, compare)
	q.advance(SegSize)
	q.hasAtom = true
	return nil
}

// Datagram adds the UD datagram segment: the address handle's AV with the
// remote QPN and Q_Key. It must come first after Begin on a UD QP.
func (q *SQ) Datagram(av *AV, remoteQPN, qkey uint32) error {
	if err := q.check("Datagram"); err != nil {
		return err
	}
	if q.qpType != UD || q.ds != 1 || av == nil {
		return invalid("datagram segment on a %v QP or after other segments", q.qpType)
	}
	// ctrl is the first 16 bytes of a 64-byte block, so the 48-byte AV
	// never crosses the end of the ring.
	PutDatagram(q.buf[q.pos:q.pos+AVSize], av, remoteQPN, qkey)
	q.advance(AVSize)
	q.hasDgram = true
	return nil
}

// Data adds a gather entry. Zero-length entries are counted against the
// limit but take no segment, as in libmlx5. For atomics the entry is the
// 8-byte result buffer and its segment says 8 bytes.
func (q *SQ) Data(addr uint64, length, lkey uint32) error {
	if err := q.check("Data"); err != nil {
		return err
	}
	if q.inlHdr >= 0 {
		return invalid("data segment after inline data")
	}
	if q.nsge >= q.maxGS {
		return invalid("more than %d gather entries", q.maxGS)
	}
	q.nsge++
	if length == 0 {
		return nil
	}
	if q.opcode == OpAtomicCS || q.opcode == OpAtomicFA {
		length = AtomicSize
	}
	PutData(q.seg(q.pos), length, lkey, addr)
	q.advance(SegSize)
	return nil
}

// Inline copies b into the work request as inline data; successive calls
// append to one inline segment (a gather list sent inline). It fails,
// writing nothing visible, when the total passes the queue's MaxInline.
func (q *SQ) Inline(b []byte) error {
	if err := q.check("Inline"); err != nil {
		return err
	}
	if q.nsge > 0 {
		return invalid("inline data after data segments")
	}
	switch q.opcode {
	case OpSend, OpSendImm, OpSendInval, OpRDMAWrite, OpRDMAWriteImm:
	default:
		return invalid("inline data on opcode %#x", q.opcode)
	}
	if q.inlLen+len(b) > q.maxInline {
		return invalid("%d inline bytes above the queue's %d", q.inlLen+len(b), q.maxInline)
	}
	if q.inlHdr < 0 {
		q.inlHdr = q.pos
	}
	// Data starts 4 bytes after the header and wraps at the ring's end
	// like the segments (qp.c set_data_inl_seg).
	off := q.inlHdr + 4 + q.inlLen
	for len(b) > 0 {
		if off >= len(q.buf) {
			off -= len(q.buf)
		}
		n := copy(q.buf[off:], b)
		b = b[n:]
		off += n
		q.inlLen += n
	}
	return nil
}

// Finish completes the work request begun last and records wrID for its
// completion. The device sees it after the next Ring.
func (q *SQ) Finish(wrID uint64) error {
	if err := q.check("Finish"); err != nil {
		return err
	}
	switch q.opcode {
	case OpRDMAWrite, OpRDMAWriteImm, OpRDMARead:
		if !q.hasRAddr {
			return invalid("opcode %#x without remote address", q.opcode)
		}
	case OpAtomicCS, OpAtomicFA:
		if !q.hasAtom || q.ds != 4 {
			return invalid("atomic without remote address, atomic segment and one 8-byte data segment")
		}
	}
	if q.qpType == UD && !q.hasDgram {
		return invalid("UD send without datagram segment")
	}
	if q.inlLen > 0 {
		PutInlineHeader(q.buf[q.inlHdr:], uint32(q.inlLen))
		q.ds += InlineDS(q.inlLen)
	}
	ds := q.ds
	PutCtrl(q.seg(q.start), q.opcode, 0, uint16(q.curPost), q.qpn, uint8(ds), q.fmCeSe, q.imm)
	idx := q.curPost & q.mask
	q.wrs[idx] = sqWR{id: wrID, head: q.head}
	q.head++
	q.curPost += uint32((ds*SegSize + SendWQEBB - 1) / SendWQEBB)
	q.building = false
	q.pending++
	q.lastStart, q.lastDS, q.lastInline = q.start, ds, q.inlLen > 0
	return nil
}

// Ring hands the work requests finished since the last Ring to the
// device, in the order of qp.c post_send_db: the doorbell record's send
// word gets the block counter (its store orders the WQE stores before it),
// a write barrier, then either the whole WQE copied to the BlueFlame
// buffer (one work request, inline or PreferBF, at most half the
// register) or its first 8 bytes as the doorbell, a write barrier, and the
// BlueFlame half toggles. Ring with nothing pending does nothing.
func (q *SQ) Ring() {
	if q.pending == 0 {
		return
	}
	if !q.dev {
		q.ringWriter()
		return
	}
	// On the device: qp.c post_send_db's order, without the Writer's
	// indirect calls, and with the doorbell record's store and its
	// barrier in the same mmio call as what follows them.
	bf := q.bf
	rec := q.curPost & 0xffff
	if q.bfCopy() {
		// The usual sizes without copyBFDev's frame: one block, or two
		// (an inline RDMA write of more than 12 bytes). A BlueFlame copy
		// ends with the write barrier that flushes it (Copy64's).
		k, n := uint32(q.lastStart)/SendWQEBB, uint32(q.lastDS+3)/4
		if n <= 2 && mmio.RecordCopy64(q.sndRec, rec, mmio.At[[SendWQEBB]byte](bf.reg, bf.offset), q.blocks.Slot(k)) {
			if n == 1 || mmio.Copy64(bf.reg[bf.offset+SendWQEBB:], q.blocks.Slot(k+1)) {
				bf.offset ^= bf.half
				q.pending = 0
				return
			}
			q.ringDoorbellOnly()
			return
		}
		if n > 2 {
			mmio.StoreUint32BE(q.dbrec[:], SndDBR, rec)
			mmio.WriteBarrier()
			if !q.copyBFDev(k, n) {
				q.ringDoorbellOnly()
				return
			}
			bf.offset ^= bf.half
			q.pending = 0
			return
		}
		// A register RecordCopy64 refused: it stored nothing.
	}
	mmio.Doorbell(q.sndRec, rec, mmio.At[uint64](bf.reg, bf.offset), be.Uint64(q.segs.Slot(uint32(q.lastStart) / SegSize)[:]))
	bf.offset ^= bf.half
	q.pending = 0
}

// ringDoorbellOnly ends Ring on the device after the doorbell record
// was written: the doorbell, a write barrier, the BlueFlame half
// toggled (a BlueFlame copy the register refused).
func (q *SQ) ringDoorbellOnly() {
	bf := q.bf
	mmio.StoreUint64BE(bf.reg, bf.offset, be.Uint64(q.segs.Slot(uint32(q.lastStart) / SegSize)[:]))
	mmio.WriteBarrier()
	bf.offset ^= bf.half
	q.pending = 0
}

// ringWriter is Ring through the Writer (tests).
func (q *SQ) ringWriter() {
	bf := q.bf
	q.w.StoreUint32BE(q.dbrec[:], SndDBR, q.curPost&0xffff)
	q.w.WriteBarrier()
	copied := false
	if q.bfCopy() {
		copied = q.copyBF(q.lastStart, int(uint(q.lastDS+3)/4))
	}
	if !copied {
		q.w.StoreUint64BE(bf.reg, bf.offset, be.Uint64(q.buf[q.lastStart:]))
	}
	q.w.WriteBarrier()
	bf.offset ^= bf.half
	q.pending = 0
}

// bfCopy says whether Ring copies the last WQE to the BlueFlame buffer:
// one work request, inline or PreferBF, of more than one segment and at
// most half the register.
func (q *SQ) bfCopy() bool {
	return (q.lastInline || q.PreferBF) && q.pending == 1 && q.lastDS > 1 && q.lastDS <= q.bfDS
}

// copyBFDev is copyBF on the device: n blocks from block k of the
// ring, without the Writer.
func (q *SQ) copyBFDev(k, n uint32) bool {
	bf := q.bf
	dst := bf.reg[bf.offset:]
	for i := range n {
		if !mmio.Copy64(dst[i*SendWQEBB:], q.blocks.Slot(k+i)) {
			return false
		}
	}
	return true
}

// copyBF copies n blocks of the WQE at ring offset off to the current
// BlueFlame half, wrapping in the ring (qp.c mlx5_bf_copy). False if the
// register is not 64-byte aligned (then the first copy wrote nothing).
func (q *SQ) copyBF(off, n int) bool {
	dst := q.bf.reg[q.bf.offset:]
	for i := range n {
		src := (*[SendWQEBB]byte)(q.buf[off : off+SendWQEBB])
		if q.dev {
			if !mmio.Copy64(dst[i*SendWQEBB:], src) {
				return false
			}
		} else if !q.w.Copy64(dst[i*SendWQEBB:], src) {
			return false
		}
		off += SendWQEBB
		if off == len(q.buf) {
			off = 0
		}
	}
	return true
}

// Complete retires work requests for a requester completion (good or
// error) whose wqe_counter is counter: the work request there and every
// unsignaled one before it (cq.c mlx5_parse_cqe: tail = wqe_head[idx] +
// 1). It returns that work request's wrID.
func (q *SQ) Complete(counter uint16) uint64 {
	idx := uint32(counter) & q.mask
	w := &q.wrs[idx]
	q.tail.Store(w.head + 1)
	return w.id
}

// Reset empties the queue for a QP moved to RESET (verbs.c mlx5_modify_qp:
// indices and the doorbell record's send word back to 0). The BlueFlame
// half is the register's, not the QP's, and stays.
func (q *SQ) Reset() {
	q.curPost, q.head, q.pending, q.building = 0, 0, 0, false
	q.tail.Store(0)
	q.w.StoreUint32BE(q.dbrec[:], SndDBR, 0)
}
