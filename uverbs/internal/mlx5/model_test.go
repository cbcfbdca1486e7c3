package mlx5

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// This file is a software model of the device side of mlx5, enough to run
// the package's post and poll paths end to end on plain memory: the QP
// buffers, doorbell records and UAR page are Go slices, the Writer the
// queues publish through is a recorder that checks the order of the
// stores, and on each doorbell the model consumes the new send WQEs,
// executes them against a second QP and writes CQEs.

// memory is the model's host memory: addresses are offsets into b, and a
// key (lkey or rkey) grants access to one range of it.
type memory struct {
	b    []byte
	keys map[uint32][2]uint64 // key -> [start, end)
}

func (m *memory) at(key uint32, addr uint64, n int) ([]byte, bool) {
	r, ok := m.keys[key]
	if !ok || addr < r[0] || addr+uint64(n) > r[1] || addr+uint64(n) < addr {
		return nil, false
	}
	return m.b[addr : addr+uint64(n)], true
}

// mcq is the device's view of a CQ.
type mcq struct {
	buf     []byte
	ncqe    uint32
	cqeSize int
	dbrec   []byte
	pi      uint32
}

// mqp is one modelled QP: the driver's queues and the device's state.
type mqp struct {
	qpn          uint32
	typ          QPType
	sq           *SQ
	rq           *RQ
	srq          *mqpSRQ
	dbrec        []byte
	bfReg        []byte
	scq, rcq     *mcq
	peer         *mqp
	qkey         uint32
	hwSQ         uint32 // blocks consumed
	hwRQ         uint32 // receives consumed
	snapshot     []byte // the SQ ring as it was when the doorbell record was written
	snapDBR      uint32
	rqSnap       []byte // the RQ ring when its record was last written
	lastBFOffset int
	bfK          int
	errored      bool
	doorbells    int
	blueFlames   int
}

// mqpSRQ is an SRQ and the device's position in its list.
type mqpSRQ struct {
	q      *SRQ
	dbrec  []byte
	hwHead int
	used   uint32
	snap   []byte // the ring when the record was last written
}

type model struct {
	t    *testing.T
	mem  *memory
	qps  []*mqp
	log  []string // the order of the stores, for the checks
	need string   // what the next store must be ("" for anything)
}

// The model is the queues' Writer: it performs each store on plain memory
// and checks it is in the order qp.c post_send_db uses.
func (m *model) StoreUint32BE(b []byte, off int, v uint32) {
	if m.need == "barrier" {
		m.t.Errorf("doorbell record store right after a UAR store, before the write barrier")
	}
	binary.BigEndian.PutUint32(b[off:], v)
	for _, q := range m.qps {
		if &b[0] == &q.dbrec[0] && off == SndDBR {
			// The device may read the WQEs from now on: what it reads
			// is what was written before this store.
			q.snapshot = append(q.snapshot[:0], q.sq.buf...)
			q.snapDBR = v
			m.need = "barrier-before-uar"
			m.log = append(m.log, fmt.Sprintf("dbr %d %d", q.qpn, v))
		}
		// Receive records: the device reads receive WQEs as they were
		// when the record was written.
		if &b[0] == &q.dbrec[0] && off == RcvDBR && q.rq != nil {
			q.rqSnap = append(q.rqSnap[:0], q.rq.buf...)
		}
		if q.srq != nil && &b[0] == &q.srq.dbrec[0] {
			q.srq.snap = append(q.srq.snap[:0], q.srq.q.buf...)
		}
	}
}

func (m *model) WriteBarrier() {
	switch m.need {
	case "barrier-before-uar":
		m.need = "uar"
	case "barrier", "bf":
		m.need = ""
	}
	m.log = append(m.log, "barrier")
}

func (m *model) uarQP(b []byte) *mqp {
	for _, q := range m.qps {
		for k := 0; k < len(q.bfReg); k += 64 {
			if &b[0] == &q.bfReg[k] {
				return q
			}
		}
	}
	return nil
}

func (m *model) StoreUint64BE(b []byte, off int, v uint64) {
	binary.BigEndian.PutUint64(b[off:], v)
	q := m.uarQP(b[off:])
	if q == nil {
		m.log = append(m.log, "uar-other")
		return // a CQ arm: TestArm checks those
	}
	if m.need != "uar" {
		m.t.Fatalf("QP %#x: doorbell without a doorbell record and write barrier before it (state %q)", q.qpn, m.need)
	}
	m.need = "barrier"
	// The doorbell is the first 8 bytes of the last WQE's ctrl segment:
	// its index lies between what the device has consumed and the record.
	idx := uint16(v >> 40)
	if uint32(v)>>8 != q.qpn || uint16(idx-uint16(q.hwSQ)) >= uint16(uint16(q.snapDBR)-uint16(q.hwSQ)) {
		m.t.Fatalf("QP %#x: doorbell %#x does not name this QP or a posted WQE (consumed %d, record %d)", q.qpn, v, q.hwSQ, q.snapDBR)
	}
	m.checkHalf(q, off)
	q.doorbells++
	m.execute(q)
}

func (m *model) Copy64(dst []byte, src *[64]byte) bool {
	copy(dst[:64], src[:])
	q := m.uarQP(dst)
	if q == nil {
		m.t.Fatalf("BlueFlame copy outside any QP's register")
	}
	if m.need != "uar" && m.need != "bf" {
		m.t.Fatalf("QP %#x: BlueFlame copy without a doorbell record and write barrier before it (state %q)", q.qpn, m.need)
	}
	if m.need == "uar" {
		m.checkHalf(q, len(q.bfReg)-len(dst))
		q.blueFlames++
		q.bfK = 0
	}
	// each block must be what the ring held at the record, wrapping
	start := (int(q.hwSQ&(uint32(len(q.snapshot)/64)-1)) + q.bfK) * 64 % len(q.snapshot)
	if string(dst[:64]) != string(q.snapshot[start:start+64]) {
		m.t.Fatalf("QP %#x: BlueFlame block %d differs from the WQE in the ring", q.qpn, q.bfK)
	}
	q.bfK++
	m.need = "bf"
	return true
}

func (m *model) checkHalf(q *mqp, off int) {
	half := len(q.bfReg) / 2
	if off != 0 && off != half {
		m.t.Fatalf("QP %#x: UAR store at %d, not a BlueFlame half", q.qpn, off)
	}
	if q.doorbells+q.blueFlames > 0 && off == q.lastBFOffset {
		m.t.Fatalf("QP %#x: two rings in a row on the same BlueFlame half %d", q.qpn, off)
	}
	q.lastBFOffset = off
}

func (m *model) ring(q *mqp) {
	wasBF := q.blueFlames
	q.sq.Ring()
	if m.need != "" {
		m.t.Fatalf("QP %#x: Ring ended with a UAR store not followed by a write barrier (state %q)", q.qpn, m.need)
	}
	if q.blueFlames > wasBF {
		// the WQE was handed over by BlueFlame: run it now
		m.execute(q)
	}
}

// seg reads the 16 bytes at ring offset off of the snapshot, wrapping.
func (q *mqp) seg(off int) []byte {
	off %= len(q.snapshot)
	return q.snapshot[off : off+16]
}

// execute consumes every WQE up to the doorbell record.
func (m *model) execute(q *mqp) {
	for uint16(q.hwSQ) != uint16(q.snapDBR) {
		start := int(q.hwSQ&(uint32(len(q.snapshot)/64)-1)) * 64
		ctrl := q.seg(start)
		w := binary.BigEndian.Uint32(ctrl[0:])
		opcode, idx := uint8(w), uint16(w>>8)
		qd := binary.BigEndian.Uint32(ctrl[4:])
		ds := int(qd & 0x3f)
		if idx != uint16(q.hwSQ) || qd>>8 != q.qpn || ds == 0 {
			m.t.Fatalf("QP %#x: WQE at block %d has index %d, QPN %#x, ds %d", q.qpn, q.hwSQ, idx, qd>>8, ds)
		}
		fm := ctrl[11]
		imm := binary.BigEndian.Uint32(ctrl[12:])
		segs := make([][]byte, 0, ds-1)
		for i := 1; i < ds; i++ {
			segs = append(segs, q.seg(start+16*i))
		}
		if q.errored {
			m.cqe(q.scq, errCQE(CQEReqErr, SyndWRFlush, opcode, q.qpn, idx))
		} else if synd := m.run(q, opcode, imm, fm, segs, start); synd != 0 {
			m.cqe(q.scq, errCQE(CQEReqErr, synd, opcode, q.qpn, idx))
			q.errored = true
		} else if fm&CtrlCQUpdate != 0 {
			c := make([]byte, 64)
			binary.BigEndian.PutUint32(c[56:], uint32(opcode)<<24|q.qpn)
			binary.BigEndian.PutUint16(c[60:], idx)
			if opcode == OpRDMARead {
				binary.BigEndian.PutUint32(c[44:], uint32(gatherLen(segs[1:])))
			}
			c[63] = CQEReq << 4
			m.cqe(q.scq, c)
		}
		q.hwSQ += uint32((ds*16 + 63) / 64)
	}
}

func errCQE(op, synd, sqOp uint8, qpn uint32, idx uint16) []byte {
	c := make([]byte, 64)
	c[55] = synd
	c[54] = 0x42
	binary.BigEndian.PutUint32(c[56:], uint32(sqOp)<<24|qpn)
	binary.BigEndian.PutUint16(c[60:], idx)
	c[63] = op << 4
	return c
}

func gatherLen(segs [][]byte) int {
	n := 0
	for _, s := range segs {
		n += int(binary.BigEndian.Uint32(s[0:]))
	}
	return n
}

// gather collects the payload of a WQE: inline data or data segments.
func (m *model) gather(q *mqp, segs [][]byte, segStart int) ([]byte, uint8) {
	if len(segs) == 0 {
		return nil, 0
	}
	h := binary.BigEndian.Uint32(segs[0][0:])
	if h&InlineSeg != 0 {
		n := int(h &^ InlineSeg)
		out := make([]byte, n)
		for i := range n {
			out[i] = q.snapshot[(segStart+4+i)%len(q.snapshot)]
		}
		return out, 0
	}
	var out []byte
	for _, s := range segs {
		n := int(binary.BigEndian.Uint32(s[0:]))
		b, ok := m.mem.at(binary.BigEndian.Uint32(s[4:]), binary.BigEndian.Uint64(s[8:]), n)
		if !ok {
			return nil, SyndLocalProt
		}
		out = append(out, b...)
	}
	return out, 0
}

// run executes one WQE; a nonzero syndrome fails it.
func (m *model) run(q *mqp, opcode uint8, imm uint32, fm uint8, segs [][]byte, start int) uint8 {
	p := q.peer
	switch opcode {
	case OpNOP:
		return 0
	case OpSend, OpSendImm:
		rest, restStart := segs, start+16
		if q.typ == UD {
			av := make([]byte, 0, AVSize)
			av = append(append(append(av, segs[0]...), segs[1]...), segs[2]...)
			if binary.BigEndian.Uint32(av[8:])&ExtendedUDAV == 0 || binary.BigEndian.Uint32(av[8:])&0xffffff != p.qpn {
				m.t.Fatalf("UD datagram segment names QP %#x, not %#x", binary.BigEndian.Uint32(av[8:]), p.qpn)
			}
			if binary.BigEndian.Uint32(av[0:]) != p.qkey {
				return 0 // dropped: wrong Q_Key
			}
			rest, restStart = segs[3:], start+64
		}
		data, synd := m.gather(q, rest, restStart)
		if synd != 0 {
			return synd
		}
		op := uint8(CQERespSend)
		if opcode == OpSendImm {
			op = CQERespSendImm
		}
		return m.deliver(q, op, data, imm, true)
	case OpRDMAWrite, OpRDMAWriteImm, OpRDMARead:
		raddr, rkey := binary.BigEndian.Uint64(segs[0][0:]), binary.BigEndian.Uint32(segs[0][8:])
		if opcode == OpRDMARead {
			n := gatherLen(segs[1:])
			src, ok := m.mem.at(rkey, raddr, n)
			if !ok {
				return SyndRemoteAccess
			}
			src = append([]byte(nil), src...)
			for _, s := range segs[1:] {
				l := int(binary.BigEndian.Uint32(s[0:]))
				dst, ok := m.mem.at(binary.BigEndian.Uint32(s[4:]), binary.BigEndian.Uint64(s[8:]), l)
				if !ok {
					return SyndLocalProt
				}
				copy(dst, src)
				src = src[l:]
			}
			return 0
		}
		data, synd := m.gather(q, segs[1:], start+32)
		if synd != 0 {
			return synd
		}
		dst, ok := m.mem.at(rkey, raddr, len(data))
		if !ok {
			return SyndRemoteAccess
		}
		copy(dst, data)
		if opcode == OpRDMAWriteImm {
			return m.deliver(q, CQERespWRImm, nil, imm, false)
		}
		return 0
	case OpAtomicCS, OpAtomicFA:
		raddr, rkey := binary.BigEndian.Uint64(segs[0][0:]), binary.BigEndian.Uint32(segs[0][8:])
		swapAdd, cmp := binary.BigEndian.Uint64(segs[1][0:]), binary.BigEndian.Uint64(segs[1][8:])
		if binary.BigEndian.Uint32(segs[2][0:]) != 8 {
			m.t.Fatalf("atomic's data segment says %d bytes", binary.BigEndian.Uint32(segs[2][0:]))
		}
		t, ok := m.mem.at(rkey, raddr, 8)
		if !ok || raddr%8 != 0 {
			return SyndRemoteAccess
		}
		res, ok := m.mem.at(binary.BigEndian.Uint32(segs[2][4:]), binary.BigEndian.Uint64(segs[2][8:]), 8)
		if !ok {
			return SyndLocalProt
		}
		old := binary.LittleEndian.Uint64(t)
		if opcode == OpAtomicCS {
			if old == cmp {
				binary.LittleEndian.PutUint64(t, swapAdd)
			}
		} else {
			binary.LittleEndian.PutUint64(t, old+swapAdd)
		}
		binary.LittleEndian.PutUint64(res, old)
		return 0
	}
	m.t.Fatalf("QP %#x: opcode %#x", q.qpn, opcode)
	return 0
}

// deliver takes the peer's next receive (RQ or SRQ), scatters data into it
// and writes the responder CQE.
func (m *model) deliver(q *mqp, op uint8, data []byte, imm uint32, scatter bool) uint8 {
	p := q.peer
	var wqe []byte
	var counter uint16
	if p.srq != nil {
		s := p.srq
		posted := binary.BigEndian.Uint32(s.dbrec) & 0xffff
		if uint16(posted-s.used) == 0 {
			return SyndRNRRetry
		}
		i := s.hwHead
		w := s.snap[i<<s.q.shift : (i+1)<<s.q.shift]
		wqe = w[srqNextSegLen:]
		s.hwHead = int(binary.BigEndian.Uint16(w[2:]))
		s.used++
		counter = uint16(i)
	} else {
		posted := binary.BigEndian.Uint32(p.dbrec[RcvDBR:]) & 0xffff
		if uint16(posted)-uint16(p.hwRQ) == 0 {
			return SyndRNRRetry
		}
		rq := p.rq
		off := int(p.hwRQ&rq.mask) << rq.shift
		wqe = p.rqSnap[off : off+1<<rq.shift]
		counter = uint16(p.hwRQ)
		p.hwRQ++
	}
	n := len(data)
	if p.typ == UD {
		n += 40
	}
	if scatter {
		rest := data
		if p.typ == UD {
			rest = append(make([]byte, 40), data...)
		}
		for i := 0; i+16 <= len(wqe) && len(rest) > 0; i += 16 {
			s := wqe[i : i+16]
			if binary.BigEndian.Uint32(s[4:]) == InvalidLKey {
				break
			}
			l := min(int(binary.BigEndian.Uint32(s[0:])), len(rest))
			dst, ok := m.mem.at(binary.BigEndian.Uint32(s[4:]), binary.BigEndian.Uint64(s[8:]), l)
			if !ok {
				return SyndRemoteOp
			}
			copy(dst, rest)
			rest = rest[l:]
		}
		if len(rest) > 0 {
			m.cqe(p.rcq, errCQE(CQERespErr, SyndLocalLength, 0, p.qpn, counter))
			return SyndRemoteInvalReq
		}
	}
	c := make([]byte, 64)
	binary.BigEndian.PutUint32(c[36:], imm)
	binary.BigEndian.PutUint32(c[44:], uint32(n))
	fl := q.qpn
	if p.typ == UD {
		fl |= 2 << 28
	}
	binary.BigEndian.PutUint32(c[24:], fl)
	binary.BigEndian.PutUint32(c[56:], p.qpn)
	binary.BigEndian.PutUint16(c[60:], counter)
	c[63] = op << 4
	m.cqe(p.rcq, c)
	return 0
}

// cqe writes c as the next CQE of cq with the owner bit of its pass.
func (m *model) cqe(cq *mcq, c []byte) {
	ci := binary.BigEndian.Uint32(cq.dbrec[CQSetCIDBR:]) & 0xffffff
	if (cq.pi-ci)&0xffffff >= cq.ncqe {
		m.t.Fatalf("CQ overrun: producer %d, consumer index %d, %d entries", cq.pi, ci, cq.ncqe)
	}
	slot := cq.buf[int(cq.pi&(cq.ncqe-1))*cq.cqeSize+cq.cqeSize-64:][:64]
	copy(slot[:63], c[:63])
	owner := uint8(0)
	if cq.pi&cq.ncqe != 0 {
		owner = 1
	}
	slot[63] = c[63]&^1 | owner
	cq.pi++
}
