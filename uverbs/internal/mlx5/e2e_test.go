package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

type pairConfig struct {
	typ         QPType
	sendWR, sge int
	inline      int
	recvWR      int
	cqe         int
	cqeSize     int
	srq         bool // B receives on an SRQ
	canBF       bool
}

// end is one side as a provider would hold it, plus its model.
type end struct {
	m        *mqp
	sq       *SQ
	rq       *RQ
	srq      *SRQ
	scq, rcq *CQ
	lkey     uint32
	base     uint64 // its 64 KiB of registered memory
}

func newCQPair(t *testing.T, m *model, n, cqeSize int) (*CQ, *mcq) {
	t.Helper()
	s, err := CQSize(n, cqeSize, 4096)
	if err != nil {
		t.Fatal(err)
	}
	buf, db := make([]byte, s.Bytes), make([]byte, 8)
	InitCQBuffer(buf, s)
	cq, err := NewCQ(CQConfig{Buf: buf, Sizing: s, CQN: 7, DBRec: db, UAR: make([]byte, 4096), Writer: m})
	if err != nil {
		t.Fatal(err)
	}
	return cq, &mcq{buf: buf, ncqe: uint32(s.NCQE), cqeSize: cqeSize, dbrec: db}
}

func newEnd(t *testing.T, m *model, c pairConfig, qpn uint32, key uint32, base uint64, withSRQ bool) *end {
	t.Helper()
	sqs, err := SQSize(c.typ, false, c.sendWR, c.sge, c.inline, lim)
	if err != nil {
		t.Fatal(err)
	}
	rqs, err := RQSize(c.recvWR, c.sge, withSRQ, lim)
	if err != nil {
		t.Fatal(err)
	}
	sqOff, n := QPBuffer(sqs, rqs, 4096)
	buf, dbrec, uar := make([]byte, n), make([]byte, 8), make([]byte, 4096)
	bf, err := NewBlueFlame(uar[BFOffset:BFOffset+512], c.canBF, m)
	if err != nil {
		t.Fatal(err)
	}
	e := &end{lkey: key, base: base}
	e.sq, err = NewSQ(SQConfig{Buf: buf[sqOff:], Sizing: sqs, QPN: qpn, Type: c.typ, DBRec: dbrec, BlueFlame: bf, Writer: m})
	if err != nil {
		t.Fatal(err)
	}
	mq := &mqp{qpn: qpn, typ: c.typ, sq: e.sq, dbrec: dbrec, bfReg: uar[BFOffset : BFOffset+512], qkey: 0x1111}
	if withSRQ {
		ss, err := SRQSize(c.recvWR, c.sge, lim)
		if err != nil {
			t.Fatal(err)
		}
		sdb := make([]byte, 4)
		e.srq, err = NewSRQ(make([]byte, ss.Bytes), ss, sdb, m)
		if err != nil {
			t.Fatal(err)
		}
		mq.srq = &mqpSRQ{q: e.srq, dbrec: sdb}
	} else {
		e.rq, err = NewRQ(buf[:rqs.Bytes], rqs, dbrec, m)
		if err != nil {
			t.Fatal(err)
		}
		mq.rq = e.rq
	}
	var ms, mr *mcq
	e.scq, ms = newCQPair(t, m, c.cqe, c.cqeSize)
	e.rcq, mr = newCQPair(t, m, c.cqe, c.cqeSize)
	mq.scq, mq.rcq = ms, mr
	e.m = mq
	m.qps = append(m.qps, mq)
	m.mem.keys[key] = [2]uint64{base, base + 1<<16}
	return e
}

func newPair(t *testing.T, c pairConfig) (*model, *end, *end) {
	t.Helper()
	m := &model{t: t, mem: &memory{b: make([]byte, 1<<17), keys: map[uint32][2]uint64{}}}
	a := newEnd(t, m, c, 0x100, 0xa, 0, false)
	b := newEnd(t, m, c, 0x200, 0xb, 1<<16, c.srq)
	a.m.peer, b.m.peer = b.m, a.m
	return m, a, b
}

func (e *end) mem(m *model, off, n int) []byte { return m.mem.b[int(e.base)+off:][:n] }

// postRecv posts one receive of the whole 4 KiB slot i of e's memory.
func (e *end) postRecv(t *testing.T, wrID uint64, off int) {
	t.Helper()
	var err error
	if e.srq != nil {
		if err = e.srq.Begin(); err == nil {
			if err = e.srq.Data(e.base+uint64(off), 4096, e.lkey); err == nil {
				err = e.srq.Finish(wrID)
			}
		}
		e.srq.Ring()
	} else {
		if err = e.rq.Begin(); err == nil {
			if err = e.rq.Data(e.base+uint64(off), 4096, e.lkey); err == nil {
				err = e.rq.Finish(wrID)
			}
		}
		e.rq.Ring()
	}
	if err != nil {
		t.Fatalf("post receive: %v", err)
	}
}

// poll drains cq the way a provider's poll_cq would, retiring work
// requests, and returns the completions with their wr_ids.
type wc struct {
	CQE
	wrID uint64
}

func (e *end) poll(t *testing.T, cq *CQ, out []wc) []wc {
	t.Helper()
	for {
		var c CQE
		got, ok := cq.Poll(&c)
		if !got {
			break
		}
		if !ok {
			t.Fatalf("undecodable CQE %+v", c)
		}
		w := wc{CQE: c}
		switch {
		case c.Requester():
			w.wrID = e.sq.Complete(c.WQECounter)
		case e.srq != nil:
			id, ok := e.srq.Complete(c.WQECounter)
			if !ok {
				t.Fatalf("SRQ completion for WQE %d, which is not posted", c.WQECounter)
			}
			w.wrID = id
		default:
			w.wrID = e.rq.Complete(c.WQECounter)
		}
		out = append(out, w)
	}
	cq.UpdateCI()
	return out
}

// wantSendCompletions fails unless got are successful completions of
// the work requests want, in order.
func wantSendCompletions(t *testing.T, it int, got []wc, want []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("iteration %d: %d send completions, want %d", it, len(got), len(want))
	}
	for i, w := range got {
		if w.wrID != want[i] || w.Status != WCSuccess {
			t.Fatalf("iteration %d: completion %+v, want wr_id %d", it, w, want[i])
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestModelRC runs every RC operation between two modelled QPs for long
// enough to wrap the send queue many times, the CQs (owner bit flips) and
// the 16-bit WQE counter, with post lists, unsignaled work requests
// retired by later signaled ones, inline data and BlueFlame, and checks
// every byte moved and every completion.
func TestModelRC(t *testing.T) {
	for _, c := range []pairConfig{
		{typ: RC, sendWR: 8, sge: 2, inline: 60, recvWR: 8, cqe: 15, cqeSize: 64, canBF: true},
		{typ: RC, sendWR: 5, sge: 3, inline: 100, recvWR: 4, cqe: 7, cqeSize: 128, canBF: false},
		{typ: RC, sendWR: 8, sge: 2, inline: 60, recvWR: 8, cqe: 15, cqeSize: 64, canBF: true, srq: true},
	} {
		t.Run("", func(t *testing.T) { runRC(t, c) })
	}
}

func runRC(t *testing.T, c pairConfig) {
	m, a, b := newPair(t, c)
	rng := rand.New(rand.NewPCG(1, uint64(c.sendWR)))
	var nextID uint64 = 1
	target := b.mem(m, 0, 1<<16) // B's memory is the RDMA target and receive space
	_ = target
	const iters = 40000
	for it := 0; it < iters; it++ {
		// one post list of 1..3 work requests; the last is signaled
		n := 1 + rng.IntN(min(3, int(a.sq.maxPost)))
		type posted struct {
			id   uint64
			op   uint8
			sig  bool
			data []byte
			imm  uint32
			off  int // B offset
		}
		var ps []posted
		recvs := 0
		for i := range n {
			op := []uint8{OpSend, OpSendImm, OpRDMAWrite, OpRDMAWriteImm, OpRDMARead, OpAtomicCS, OpAtomicFA}[rng.IntN(7)]
			sig := i == n-1 || rng.IntN(4) == 0
			fm := uint8(0)
			if sig {
				fm = CtrlCQUpdate
			}
			if rng.IntN(8) == 0 {
				fm |= CtrlFence
			}
			p := posted{id: nextID, op: op, sig: sig, imm: rng.Uint32()}
			nextID++
			size := 1 + rng.IntN(200)
			useInline := rng.IntN(2) == 0 && size <= a.sq.maxInline
			slot := 4096 * (i + 1) // A's source/result area, B's target area
			src := a.mem(m, slot, size)
			for j := range src {
				src[j] = byte(rng.Uint32())
			}
			p.data = append([]byte(nil), src...)
			p.off = 4096*8 + slot
			must(t, a.sq.Begin(op, fm, p.imm))
			switch op {
			case OpSend, OpSendImm, OpRDMAWrite, OpRDMAWriteImm:
				if op == OpRDMAWrite || op == OpRDMAWriteImm {
					must(t, a.sq.RemoteAddr(b.base+uint64(p.off), b.lkey))
				}
				if useInline {
					half := size / 2
					must(t, a.sq.Inline(src[:half]))
					must(t, a.sq.Inline(src[half:]))
				} else {
					half := size / 2
					must(t, a.sq.Data(a.base+uint64(slot), uint32(half), a.lkey))
					must(t, a.sq.Data(a.base+uint64(slot+half), uint32(size-half), a.lkey))
				}
				if op != OpRDMAWrite {
					recvs++
				}
			case OpRDMARead:
				copy(b.mem(m, p.off, size), p.data)
				clear(src)
				must(t, a.sq.RemoteAddr(b.base+uint64(p.off), b.lkey))
				must(t, a.sq.Data(a.base+uint64(slot), uint32(size), a.lkey))
			case OpAtomicCS, OpAtomicFA:
				p.off &^= 7
				old := rng.Uint64()
				binary.LittleEndian.PutUint64(b.mem(m, p.off, 8), old)
				p.data = binary.LittleEndian.AppendUint64(nil, old)
				must(t, a.sq.RemoteAddr(b.base+uint64(p.off), b.lkey))
				if op == OpAtomicCS {
					must(t, a.sq.Atomic(old+1, old))
				} else {
					must(t, a.sq.Atomic(1, 0))
				}
				must(t, a.sq.Data(a.base+uint64(slot), 8, a.lkey))
			}
			must(t, a.sq.Finish(p.id))
			ps = append(ps, p)
		}
		for i := range recvs {
			b.postRecv(t, uint64(1000000+it*4+i), 4096*(12+i))
		}
		m.ring(a.m)
		if a.m.errored {
			t.Fatalf("iteration %d: the model failed a work request: %+v", it, a.poll(t, a.scq, nil))
		}

		// completions: one per signaled send-queue work request on A,
		// one per receive on B; all of A's WQEs retire with the last.
		var want []uint64
		for _, p := range ps {
			if p.sig {
				want = append(want, p.id)
			}
		}
		wantSendCompletions(t, it, a.poll(t, a.scq, nil), want)
		if a.sq.Outstanding() != 0 {
			t.Fatalf("iteration %d: %d work requests outstanding after the signaled last one completed", it, a.sq.Outstanding())
		}
		rgot := b.poll(t, b.rcq, nil)
		if len(rgot) != recvs {
			t.Fatalf("iteration %d: %d receive completions, want %d", it, len(rgot), recvs)
		}
		ri := 0
		for i, p := range ps {
			slot := 4096 * (i + 1)
			switch p.op {
			case OpSend, OpSendImm:
				w := rgot[ri]
				ri++
				if w.WCOpcode != WCOpRecv || int(w.ByteLen) != len(p.data) || w.SrcQP != a.m.qpn ||
					(p.op == OpSendImm) != (w.WCFlags&WCFlagWithImm != 0) || (p.op == OpSendImm && w.Imm != p.imm) {
					t.Fatalf("iteration %d: receive %+v for %+v", it, w, p)
				}
				if got := b.mem(m, 4096*(12+ri-1), len(p.data)); !bytes.Equal(got, p.data) {
					t.Fatalf("iteration %d: received data differs", it)
				}
			case OpRDMAWrite, OpRDMAWriteImm:
				if got := b.mem(m, p.off, len(p.data)); !bytes.Equal(got, p.data) {
					t.Fatalf("iteration %d: written data differs", it)
				}
				if p.op == OpRDMAWriteImm {
					w := rgot[ri]
					ri++
					if w.WCOpcode != WCOpRecvRDMAWImm || w.Imm != p.imm || w.WCFlags&WCFlagWithImm == 0 {
						t.Fatalf("iteration %d: write-with-immediate completion %+v", it, w)
					}
				}
			case OpRDMARead:
				if got := a.mem(m, slot, len(p.data)); !bytes.Equal(got, p.data) {
					t.Fatalf("iteration %d: read data differs", it)
				}
			case OpAtomicCS, OpAtomicFA:
				old := binary.LittleEndian.Uint64(p.data)
				if got := binary.LittleEndian.Uint64(a.mem(m, slot, 8)); got != old {
					t.Fatalf("iteration %d: atomic returned %#x, want %#x", it, got, old)
				}
				if got := binary.LittleEndian.Uint64(b.mem(m, p.off, 8)); got != old+1 {
					t.Fatalf("iteration %d: atomic left %#x, want %#x", it, got, old+1)
				}
			}
		}
	}
	if a.sq.Counter() < 1<<16 {
		t.Errorf("the send counter reached only %d: the 16-bit WQE index did not wrap", a.sq.Counter())
	}
	if a.m.scq.pi < 2*a.m.scq.ncqe || b.m.rcq.pi < 2*b.m.rcq.ncqe {
		t.Errorf("the CQs did not wrap twice (%d, %d CQEs)", a.m.scq.pi, b.m.rcq.pi)
	}
	if c.canBF && a.m.blueFlames == 0 {
		t.Errorf("no work request went by BlueFlame")
	}
	if a.m.doorbells == 0 {
		t.Errorf("no work request went by the 8-byte doorbell")
	}
	if !c.canBF && a.m.blueFlames != 0 {
		t.Errorf("%d BlueFlame copies on a register without BlueFlame", a.m.blueFlames)
	}
	t.Logf("%d send blocks, %d doorbells, %d BlueFlame copies, %d+%d CQEs", a.sq.Counter(), a.m.doorbells, a.m.blueFlames, a.m.scq.pi, b.m.rcq.pi)
}

// TestModelUD sends datagrams through an RoCE AV; the receiver sees the
// 40-byte GRH space, the GRH flag and the source QP.
func TestModelUD(t *testing.T) {
	m, a, b := newPair(t, pairConfig{typ: UD, sendWR: 4, sge: 1, inline: 32, recvWR: 4, cqe: 3, cqeSize: 64, canBF: true})
	av := RoCEAV(0, 0, rmac, 0, 64, 1, 0, rgid, 0xc000)
	for it := range 3000 {
		msg := []byte{byte(it), byte(it >> 8), 1, 2, 3}
		b.postRecv(t, uint64(it), 0)
		must(t, a.sq.Begin(OpSend, CtrlCQUpdate, 0))
		must(t, a.sq.Datagram(&av, b.m.qpn, b.m.qkey))
		if it%2 == 0 {
			must(t, a.sq.Inline(msg))
		} else {
			copy(a.mem(m, 0, 5), msg)
			must(t, a.sq.Data(a.base, 5, a.lkey))
		}
		must(t, a.sq.Finish(uint64(it)))
		m.ring(a.m)
		if s := a.poll(t, a.scq, nil); len(s) != 1 || s[0].wrID != uint64(it) || s[0].Status != WCSuccess {
			t.Fatalf("iteration %d: send completions %+v", it, s)
		}
		r := b.poll(t, b.rcq, nil)
		if len(r) != 1 || r[0].wrID != uint64(it) || r[0].ByteLen != 45 || r[0].SrcQP != a.m.qpn || r[0].WCFlags&WCFlagGRH == 0 {
			t.Fatalf("iteration %d: receive completions %+v", it, r)
		}
		if got := b.mem(m, 40, 5); !bytes.Equal(got, msg) {
			t.Fatalf("iteration %d: received %x, want %x", it, got, msg)
		}
	}
	// A wrong Q_Key is dropped by the receiver; the sender still completes.
	b.postRecv(t, 99, 0)
	must(t, a.sq.Begin(OpSend, CtrlCQUpdate, 0))
	must(t, a.sq.Datagram(&av, b.m.qpn, 0x2222))
	must(t, a.sq.Inline([]byte("x")))
	must(t, a.sq.Finish(7))
	m.ring(a.m)
	if s := a.poll(t, a.scq, nil); len(s) != 1 {
		t.Fatalf("send completions %+v", s)
	}
	if r := b.poll(t, b.rcq, nil); len(r) != 0 {
		t.Fatalf("a datagram with the wrong Q_Key completed a receive: %+v", r)
	}
}

// TestModelErrors: a bad rkey fails the work request with a remote access
// error CQE, even unsignaled; the QP is in error and flushes the rest,
// each with a flush error CQE; every work request retires.
func TestModelErrors(t *testing.T) {
	m, a, _ := newPair(t, pairConfig{typ: RC, sendWR: 8, sge: 1, inline: 0, recvWR: 8, cqe: 15, cqeSize: 64})
	must(t, a.sq.Begin(OpRDMAWrite, 0, 0))
	must(t, a.sq.RemoteAddr(0, 0xdead))
	must(t, a.sq.Data(a.base, 8, a.lkey))
	must(t, a.sq.Finish(1))
	for id := uint64(2); id <= 4; id++ {
		must(t, a.sq.Begin(OpRDMARead, 0, 0))
		must(t, a.sq.RemoteAddr(0, 0xb))
		must(t, a.sq.Data(a.base, 8, a.lkey))
		must(t, a.sq.Finish(id))
	}
	m.ring(a.m)
	got := a.poll(t, a.scq, nil)
	want := []struct {
		id     uint64
		status uint8
	}{{1, WCRemAccessErr}, {2, WCWRFlushErr}, {3, WCWRFlushErr}, {4, WCWRFlushErr}}
	if len(got) != len(want) {
		t.Fatalf("%d completions, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].wrID != w.id || got[i].Status != w.status || got[i].VendorErr != 0x42 {
			t.Errorf("completion %d: wr_id %d status %d, want %d, %d", i, got[i].wrID, got[i].Status, w.id, w.status)
		}
	}
	if a.sq.Outstanding() != 0 {
		t.Errorf("%d work requests outstanding", a.sq.Outstanding())
	}
	// RESET empties the queue and zeroes the record.
	a.sq.Reset()
	if a.sq.Counter() != 0 || binary.BigEndian.Uint32(a.m.dbrec[SndDBR:]) != 0 {
		t.Errorf("after Reset: counter %d, record %d", a.sq.Counter(), binary.BigEndian.Uint32(a.m.dbrec[SndDBR:]))
	}
}

// TestBusy: each bounded queue returns ErrBusy at once when full and
// takes work again after completions.
func TestBusy(t *testing.T) {
	m, a, b := newPair(t, pairConfig{typ: RC, sendWR: 4, sge: 1, inline: 16, recvWR: 4, cqe: 31, cqeSize: 64, srq: true})
	// max_post-1 unsignaled work requests and a signaled last one
	for i := range a.sq.maxPost {
		fm := uint8(0)
		if i == a.sq.maxPost-1 {
			fm = CtrlCQUpdate
		}
		must(t, a.sq.Begin(OpNOP, fm, 0))
		must(t, a.sq.Finish(uint64(i)))
	}
	for range 2 { // a busy Begin changes nothing: still busy
		if err := a.sq.Begin(OpSend, 0, 0); !errors.Is(err, ErrBusy) {
			t.Fatalf("SQ with %d outstanding: Begin = %v, want ErrBusy", a.sq.Outstanding(), err)
		}
	}
	m.ring(a.m)
	if got := a.poll(t, a.scq, nil); len(got) != 1 || got[0].wrID != uint64(a.sq.maxPost-1) || a.sq.Outstanding() != 0 {
		t.Fatalf("completions %+v, %d outstanding", got, a.sq.Outstanding())
	}
	must(t, a.sq.Begin(OpNOP, 0, 0))
	a.sq.Abort()

	for i := range a.rq.maxPost {
		a.postRecv(t, uint64(i), 0)
	}
	if err := a.rq.Begin(); !errors.Is(err, ErrBusy) {
		t.Fatalf("full RQ: Begin = %v, want ErrBusy", err)
	}
	n := 0
	for b.srq.Begin() == nil {
		must(t, b.srq.Data(b.base, 16, b.lkey))
		must(t, b.srq.Finish(uint64(n)))
		n++
	}
	b.srq.Ring()
	if n != b.srq.cnt-1 {
		t.Errorf("SRQ took %d receives, want %d (one WQE stays the free list's tail)", n, b.srq.cnt-1)
	}
	if _, ok := b.srq.Complete(uint16(b.srq.cnt + 5)); ok {
		t.Error("SRQ completed a WQE index past its end")
	}
}

// TestArm checks the arm word in the doorbell record and the 64-bit UAR
// doorbell, and that Event advances the sequence number.
func TestArm(t *testing.T) {
	m := &model{t: t, mem: &memory{keys: map[uint32][2]uint64{}}}
	cq, mc := newCQPair(t, m, 3, 64)
	m.cqe(mc, []byte{63: CQEReq << 4})
	var c CQE
	cq.Poll(&c)
	must(t, cq.Arm(true))
	word := binary.BigEndian.Uint32(mc.dbrec[CQArmDBR:])
	if word != 1<<24|1 {
		t.Errorf("arm word %#x, want sn 0, solicited, ci 1", word)
	}
	if got := binary.BigEndian.Uint64(cq.uar[CQDoorbell:]); got != uint64(word)<<32|7 {
		t.Errorf("UAR doorbell %#x, want %#x", got, uint64(word)<<32|7)
	}
	cq.Event()
	must(t, cq.Arm(false))
	if word := binary.BigEndian.Uint32(mc.dbrec[CQArmDBR:]); word != 1<<28|1 {
		t.Errorf("arm word %#x after an event, want sn 1, next, ci 1", word)
	}
	want := []string{"barrier", "uar-other", "barrier", "barrier", "uar-other", "barrier"}
	if len(m.log) != len(want) {
		t.Fatalf("store order %v, want %v", m.log, want)
	}
	for i := range want {
		if m.log[i] != want[i] {
			t.Fatalf("store order %v, want %v", m.log, want)
		}
	}
}

// TestOwnerBit: a CQE written with the previous pass's owner bit is not
// software's; the same slot with the current pass's bit is.
func TestOwnerBit(t *testing.T) {
	m := &model{t: t, mem: &memory{keys: map[uint32][2]uint64{}}}
	cq, mc := newCQPair(t, m, 1, 64) // 2 entries
	var c CQE
	if got, _ := cq.Poll(&c); got {
		t.Fatal("a fresh CQ is not empty")
	}
	for pass := range 4 {
		for slot := range 2 {
			m.cqe(mc, []byte{63: CQEReq << 4})
			if got, ok := cq.Poll(&c); !got || !ok {
				t.Fatalf("pass %d slot %d: CQE not seen", pass, slot)
			}
			if got, _ := cq.Poll(&c); got {
				t.Fatalf("pass %d slot %d: a stale CQE of the previous pass was taken", pass, slot)
			}
			cq.UpdateCI()
		}
	}
}

// TestClean: after a QP's reset its unpolled CQEs leave the CQ, the
// others stay in order with their owner bits, and its SRQ receives are
// freed.
func TestClean(t *testing.T) {
	m, a, b := newPair(t, pairConfig{typ: RC, sendWR: 4, sge: 1, recvWR: 7, cqe: 7, cqeSize: 128, srq: true})
	_ = a
	ss, _ := SRQSize(7, 1, lim)
	srq, err := NewSRQ(make([]byte, ss.Bytes), ss, make([]byte, 4), m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		must(t, srq.Begin())
		must(t, srq.Data(0, 1, 1))
		must(t, srq.Finish(uint64(i)))
	}
	srq.Ring()
	cq, mc := b.rcq, b.m.rcq
	// Advance the CQ past a wrap first so owner bits of both passes occur.
	for range 6 {
		m.cqe(mc, []byte{63: CQEReq << 4})
		var c CQE
		cq.Poll(&c)
		cq.UpdateCI()
	}
	put := func(qpn uint32, op uint8, ctr uint16) {
		c := make([]byte, 64)
		be.PutUint32(c[56:], qpn)
		be.PutUint32(c[32:], 9) // an SRQ number
		be.PutUint16(c[60:], ctr)
		c[63] = op << 4
		m.cqe(mc, c)
	}
	put(1, CQERespSend, 0)
	put(2, CQEReq, 10)
	put(1, CQERespSend, 1)
	put(2, CQEReq, 11)
	put(1, CQEReq, 5)
	put(2, CQEReq, 12)
	if got := srq.Outstanding(); got != 3 {
		t.Fatalf("%d SRQ receives outstanding, want 3", got)
	}
	if n := cq.Clean(1, false, srq); n != 3 {
		t.Fatalf("Clean removed %d CQEs, want 3", n)
	}
	if got := srq.Outstanding(); got != 1 {
		t.Errorf("%d SRQ receives outstanding after Clean, want 1", got)
	}
	if got := be.Uint32(mc.dbrec[CQSetCIDBR:]); got != cq.ConsumerIndex() {
		t.Errorf("doorbell record %d, consumer index %d", got, cq.ConsumerIndex())
	}
	for _, want := range []uint16{10, 11, 12} {
		var c CQE
		if got, ok := cq.Poll(&c); !got || !ok || c.QPN != 2 || c.WQECounter != want {
			t.Fatalf("after Clean: %+v (got %v), want QP 2 counter %d", c, got, want)
		}
	}
	var c CQE
	if got, _ := cq.Poll(&c); got {
		t.Fatalf("a CQE left after the survivors: %+v", c)
	}
	cq.UpdateCI()
	// The ring keeps working after Clean.
	put(2, CQEReq, 13)
	if got, ok := cq.Poll(&c); !got || !ok || c.WQECounter != 13 {
		t.Fatalf("after Clean, a new CQE: %+v (got %v)", c, got)
	}
}
