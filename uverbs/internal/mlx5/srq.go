package mlx5

// SRQ is a shared receive queue: WQEs of a 16-byte next segment
// (next_wqe_index) and data segments, kept as a linked free list as in
// rdma-core's classic srq.c layout. head is the next WQE to post, tail the
// last free one, which is never posted, so the list is never empty; a WQE
// whose receive completed is linked after tail again (Free). The doorbell
// record is one big-endian word: the 16-bit count of receives posted.
//
// Not safe for concurrent use (libmlx5 holds srq.lock in post and free).
type SRQ struct {
	buf     []byte
	shift   uint
	cnt     int
	maxGS   int
	dbrec   []byte
	w       Writer
	head    int
	tail    int
	counter uint32
	wrid    []uint64
	posted  []bool

	building bool
	cur      int // the WQE being built
	n, nsge  int
	pending  int
}

// NewSRQ returns the SRQ of buf (Sizing.Bytes bytes) with its 4-byte
// doorbell record, every WQE linked into the free list (the buffer must be
// zeroed or fresh).
func NewSRQ(buf []byte, s SRQSizing, dbrec []byte, w Writer) (*SRQ, error) {
	if s.WQECnt < 2 || s.WQECnt > 1<<16 || s.WQECnt&(s.WQECnt-1) != 0 || s.WQESize != 1<<s.WQEShift ||
		s.WQESize < srqNextSegLen+SegSize || len(buf) < s.WQECnt*s.WQESize || srqNextSegLen+s.MaxGS*SegSize > s.WQESize {
		return nil, invalid("SRQ sizing %+v in %d bytes", s, len(buf))
	}
	if len(dbrec) < 4 || w == nil {
		return nil, invalid("SRQ without doorbell record or writer")
	}
	q := &SRQ{buf: buf[:s.WQECnt*s.WQESize], shift: uint(s.WQEShift), cnt: s.WQECnt, maxGS: s.MaxGS,
		dbrec: dbrec[:4], w: w, tail: s.WQECnt - 1, wrid: make([]uint64, s.WQECnt), posted: make([]bool, s.WQECnt)}
	for i := range s.WQECnt - 1 {
		q.setNext(i, i+1)
	}
	return q, nil
}

func (q *SRQ) wqe(i int) []byte { return q.buf[i<<q.shift : (i+1)<<q.shift] }

// setNext writes next_wqe_index (struct mlx5_wqe_srq_next_seg @2) of WQE i.
func (q *SRQ) setNext(i, next int) { be.PutUint16(q.wqe(i)[2:], uint16(next)) }

func (q *SRQ) next(i int) int { return int(be.Uint16(q.wqe(i)[2:])) }

// Begin starts a receive on the WQE at the head of the free list; ErrBusy
// when only the tail is left (srq.c: head == tail, "SRQ is full").
func (q *SRQ) Begin() error {
	q.building = false
	if q.head == q.tail {
		return ErrBusy
	}
	q.building = true
	q.cur = q.head
	q.n, q.nsge = 0, 0
	return nil
}

// Data adds a scatter entry. Unlike the RQ, zero-length entries get a
// segment (srq.c mlx5_post_srq_recv writes every one).
func (q *SRQ) Data(addr uint64, length, lkey uint32) error {
	if !q.building {
		return invalid("Data outside Begin/Finish")
	}
	if q.nsge >= q.maxGS {
		return invalid("more than %d scatter entries", q.maxGS)
	}
	q.nsge++
	PutData(q.wqe(q.cur)[srqNextSegLen+q.n*SegSize:], length, lkey, addr)
	q.n++
	return nil
}

// Finish ends the receive (with the terminator entry when the list is
// shorter than the WQE), records wrID and takes the WQE off the list.
func (q *SRQ) Finish(wrID uint64) error {
	if !q.building {
		return invalid("Finish without Begin")
	}
	if q.n < q.maxGS {
		PutDataEnd(q.wqe(q.cur)[srqNextSegLen+q.n*SegSize:])
	}
	q.wrid[q.cur] = wrID
	q.posted[q.cur] = true
	q.head = q.next(q.cur)
	q.pending++
	q.building = false
	return nil
}

// Ring publishes the receives finished since the last Ring: the doorbell
// record gets the 16-bit count of receives ever posted.
func (q *SRQ) Ring() {
	if q.pending == 0 {
		return
	}
	q.counter += uint32(q.pending)
	q.pending = 0
	q.w.StoreUint32BE(q.dbrec, 0, q.counter&0xffff)
}

// Complete returns the wrID of the receive a responder completion names
// (wqe_counter is the SRQ WQE index) and frees its WQE. ok is false for an
// index that is not a posted WQE (a corrupt or repeated completion), which
// is left alone.
func (q *SRQ) Complete(counter uint16) (wrID uint64, ok bool) {
	i := int(counter)
	if i >= q.cnt || !q.posted[i] {
		return 0, false
	}
	q.posted[i] = false
	q.setNext(q.tail, i)
	q.tail = i
	return q.wrid[i], true
}

// Outstanding is the number of receives posted and not completed.
func (q *SRQ) Outstanding() int {
	n := 0
	for _, p := range q.posted {
		if p {
			n++
		}
	}
	return n
}
