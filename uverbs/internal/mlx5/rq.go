package mlx5

import "sync/atomic"

// RQ is the receive queue of a QP not on an SRQ: a ring of WQEs of data
// segments at offset 0 of the QP buffer, and the receive word of the QP's
// doorbell record. Build receives with Begin, Data, Finish; Ring publishes
// them. Not safe for concurrent use (libmlx5 holds rq.lock).
type RQ struct {
	buf     []byte
	mask    uint32
	shift   uint
	maxPost uint32
	maxGS   int
	dbrec   []byte
	w       Writer
	head    uint32        // receives posted
	tail    atomic.Uint32 // receives completed: stored by the poller, loaded by the poster
	wrid    []uint64

	building bool
	off      int // the WQE being built
	n        int // its data segments
	nsge     int // its gather entries, zero-length ones included
	pending  int
}

// NewRQ returns the receive queue of buf (Sizing.Bytes bytes at offset 0 of
// the QP buffer), with the QP's 8-byte doorbell record dbrec.
func NewRQ(buf []byte, s RQSizing, dbrec []byte, w Writer) (*RQ, error) {
	if s.WQECnt <= 0 || s.WQECnt > 1<<16 || s.WQECnt&(s.WQECnt-1) != 0 || s.WQESize != 1<<s.WQEShift ||
		len(buf) < s.WQECnt*s.WQESize || s.MaxGS*SegSize > s.WQESize || s.MaxPost > s.WQECnt {
		return nil, invalid("receive queue sizing %+v in %d bytes", s, len(buf))
	}
	if len(dbrec) < DBRecSize || w == nil {
		return nil, invalid("receive queue without doorbell record or writer")
	}
	return &RQ{buf: buf[:s.WQECnt*s.WQESize], mask: uint32(s.WQECnt - 1), shift: uint(s.WQEShift),
		maxPost: uint32(s.MaxPost), maxGS: s.MaxGS, dbrec: dbrec[:DBRecSize], w: w, wrid: make([]uint64, s.WQECnt)}, nil
}

// Outstanding is the number of receives posted and not completed.
func (q *RQ) Outstanding() int { return int(q.head - q.tail.Load()) }

// Begin starts a receive; ErrBusy when the queue is full.
func (q *RQ) Begin() error {
	q.building = false
	if q.head-q.tail.Load() >= q.maxPost {
		return ErrBusy
	}
	q.building = true
	q.off = int((q.head+uint32(q.pending))&q.mask) << q.shift
	q.n, q.nsge = 0, 0
	return nil
}

// Data adds a scatter entry; zero-length entries take no segment
// (qp.c mlx5_post_recv).
func (q *RQ) Data(addr uint64, length, lkey uint32) error {
	if !q.building {
		return invalid("Data outside Begin/Finish")
	}
	if q.nsge >= q.maxGS {
		return invalid("more than %d scatter entries", q.maxGS)
	}
	q.nsge++
	if length == 0 {
		return nil
	}
	PutData(q.buf[q.off+q.n*SegSize:], length, lkey, addr)
	q.n++
	return nil
}

// Finish ends the receive, terminating a scatter list shorter than the
// WQE with an MLX5_INVALID_LKEY entry, and records wrID.
func (q *RQ) Finish(wrID uint64) error {
	if !q.building {
		return invalid("Finish without Begin")
	}
	if q.n < q.maxGS {
		PutDataEnd(q.buf[q.off+q.n*SegSize:])
	}
	q.wrid[(q.head+uint32(q.pending))&q.mask] = wrID
	q.pending++
	q.building = false
	return nil
}

// Ring publishes the receives finished since the last Ring: the doorbell
// record's receive word gets the 16-bit head counter, a store ordered
// after the WQE stores. Receives need no UAR write.
func (q *RQ) Ring() {
	if q.pending == 0 {
		return
	}
	q.head += uint32(q.pending)
	q.pending = 0
	q.w.StoreUint32BE(q.dbrec, RcvDBR, q.head&0xffff)
}

// Complete retires the receive of a responder completion with
// wqe_counter counter and returns its wrID (cq.c handle_responder:
// idx = wqe_counter & (wqe_cnt-1); tail++).
func (q *RQ) Complete(counter uint16) uint64 {
	q.tail.Add(1)
	return q.wrid[uint32(counter)&q.mask]
}

// Reset empties the queue for a QP moved to RESET.
func (q *RQ) Reset() {
	q.head, q.pending, q.building = 0, 0, false
	q.tail.Store(0)
	q.w.StoreUint32BE(q.dbrec, RcvDBR, 0)
}
