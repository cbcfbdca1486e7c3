package mlx5

import (
	"errors"
	"testing"
)

// resize is what the device does on RESIZE_CQ (and what
// mlx5_cq_resize_copy_cqes expects of it): a resize CQE at the producer
// index of the old buffer, then every later CQE in the new one, the
// producer index counting on.
func (m *model) resize(mc *mcq, buf []byte, ncqe uint32) {
	m.cqe(mc, []byte{63: CQEResizeCQ << 4})
	mc.buf, mc.ncqe = buf, ncqe
}

// newCQBuf is a fresh buffer for a CQ of n entries.
func newCQBuf(t *testing.T, n, cqeSize int) ([]byte, CQSizing) {
	t.Helper()
	s, err := CQSize(n, cqeSize, 4096)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, s.Bytes)
	InitCQBuffer(buf, s)
	return buf, s
}

// reqCQE is a requester CQE of QP 2 whose WQE counter tells it apart.
func reqCQE(ctr uint16) []byte {
	c := make([]byte, 64)
	be.PutUint32(c[56:], uint32(OpRDMAWrite)<<24|2)
	be.PutUint16(c[60:], ctr)
	c[63] = CQEReq << 4
	return c
}

// pollCounters polls cq dry and returns the WQE counters of its CQEs.
func pollCounters(t *testing.T, cq *CQ) []uint16 {
	t.Helper()
	var got []uint16
	for {
		var c CQE
		ok, dec := cq.Poll(&c)
		if !ok {
			break
		}
		if !dec || c.Opcode != CQEReq || c.QPN != 2 || c.WCOpcode != WCOpRDMAWrite {
			t.Fatalf("CQE %+v (decoded %v): not the requester CQE written", c, dec)
		}
		got = append(got, c.WQECounter)
	}
	cq.UpdateCI()
	return got
}

func wantCounters(t *testing.T, what string, got []uint16, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d CQEs %v, want %d from %d", what, len(got), got, n, from)
	}
	for i, g := range got {
		if int(g) != from+i {
			t.Fatalf("%s: CQEs %v, want %d from %d", what, got, n, from)
		}
	}
}

// TestCQResize moves a CQ with completions waiting to a larger and a
// smaller buffer, at consumer indexes of either wrap parity, for both
// CQE sizes: the waiting completions come out of the new buffer in
// order, the resize CQE is consumed, and the ring goes on in the new
// buffer through several wraps.
func TestCQResize(t *testing.T) {
	for _, c := range []struct {
		from, to, cqeSize int
		consumed, waiting int
	}{
		{from: 7, to: 31, cqeSize: 64, consumed: 13, waiting: 5},
		{from: 31, to: 3, cqeSize: 64, consumed: 45, waiting: 3},
		{from: 31, to: 3, cqeSize: 64, consumed: 40, waiting: 0},
		{from: 3, to: 1, cqeSize: 64, consumed: 5, waiting: 1},
		{from: 7, to: 63, cqeSize: 128, consumed: 6, waiting: 6},
		{from: 63, to: 7, cqeSize: 128, consumed: 100, waiting: 7},
	} {
		m := &model{t: t, mem: &memory{keys: map[uint32][2]uint64{}}}
		cq, mc := newCQPair(t, m, c.from, c.cqeSize)
		ctr := 0
		for range c.consumed {
			m.cqe(mc, reqCQE(uint16(ctr)))
			ctr++
			pollCounters(t, cq)
		}
		for range c.waiting {
			m.cqe(mc, reqCQE(uint16(ctr)))
			ctr++
		}
		buf, s := newCQBuf(t, c.to, c.cqeSize)
		m.resize(mc, buf, uint32(s.NCQE))
		moved, err := cq.Resize(buf, s)
		if err != nil || moved != c.waiting {
			t.Fatalf("%+v: Resize moved %d, %v; want %d", c, moved, err, c.waiting)
		}
		if ci := cq.ConsumerIndex(); ci != uint32(c.consumed+1) || be.Uint32(mc.dbrec[CQSetCIDBR:]) != ci {
			t.Fatalf("%+v: consumer index %d, doorbell record %d; want %d (the resize CQE consumed)",
				c, ci, be.Uint32(mc.dbrec[CQSetCIDBR:]), c.consumed+1)
		}
		wantCounters(t, "waiting", pollCounters(t, cq), c.consumed, c.waiting)
		// Three wraps of the new ring, in batches of up to its size.
		for range 3 {
			from := ctr
			for range s.NCQE {
				m.cqe(mc, reqCQE(uint16(ctr)))
				ctr++
			}
			wantCounters(t, "after the resize", pollCounters(t, cq), from, s.NCQE)
		}
	}
}

// TestCQResizeTwice resizes again with completions that came through
// the first resize still waiting.
func TestCQResizeTwice(t *testing.T) {
	m := &model{t: t, mem: &memory{keys: map[uint32][2]uint64{}}}
	cq, mc := newCQPair(t, m, 3, 64)
	for i := range 3 {
		m.cqe(mc, reqCQE(uint16(i)))
	}
	buf, s := newCQBuf(t, 15, 64)
	m.resize(mc, buf, uint32(s.NCQE))
	if n, err := cq.Resize(buf, s); n != 3 || err != nil {
		t.Fatalf("first resize: %d, %v", n, err)
	}
	for i := 3; i < 10; i++ {
		m.cqe(mc, reqCQE(uint16(i)))
	}
	buf, s = newCQBuf(t, 31, 64)
	m.resize(mc, buf, uint32(s.NCQE))
	if n, err := cq.Resize(buf, s); n != 10 || err != nil {
		t.Fatalf("second resize: %d, %v", n, err)
	}
	wantCounters(t, "after two resizes", pollCounters(t, cq), 0, 10)
}

// TestCQResizeLost: the CQ takes the new buffer whatever the old one
// holds, and says so when completions may be lost; a buffer of another
// CQE size changes nothing.
func TestCQResizeLost(t *testing.T) {
	newCQ := func(n, waiting int) (*model, *CQ, *mcq) {
		m := &model{t: t, mem: &memory{keys: map[uint32][2]uint64{}}}
		cq, mc := newCQPair(t, m, n, 64)
		for i := range waiting {
			m.cqe(mc, reqCQE(uint16(i)))
		}
		return m, cq, mc
	}

	// No resize CQE: the device wrote none (the old buffer is empty).
	_, cq, mc := newCQ(7, 0)
	buf, s := newCQBuf(t, 15, 64)
	mc.buf, mc.ncqe = buf, uint32(s.NCQE)
	if n, err := cq.Resize(buf, s); !errors.Is(err, ErrResizeLost) || n != 0 {
		t.Errorf("no resize CQE: %d, %v; want ErrResizeLost", n, err)
	}
	if cq.ConsumerIndex() != 0 {
		t.Errorf("no resize CQE, yet the consumer index moved to %d", cq.ConsumerIndex())
	}

	// A full ring of completions and no resize CQE (the CQ overran).
	_, cq, _ = newCQ(3, 4)
	buf, s = newCQBuf(t, 15, 64)
	if n, err := cq.Resize(buf, s); !errors.Is(err, ErrResizeLost) || n != 3 {
		t.Errorf("full ring: %d, %v; want 3 moved, ErrResizeLost", n, err)
	}

	// More completions than the new buffer holds.
	m, cq, mc := newCQ(7, 6)
	buf, s = newCQBuf(t, 3, 64)
	m.resize(mc, buf, uint32(s.NCQE))
	if n, err := cq.Resize(buf, s); !errors.Is(err, ErrResizeLost) || n != 3 {
		t.Errorf("too small: %d, %v; want 3 moved, ErrResizeLost", n, err)
	}

	// A buffer of 128-byte CQEs for a CQ of 64-byte ones: refused,
	// the CQ as it was.
	_, cq, _ = newCQ(7, 2)
	buf, s = newCQBuf(t, 15, 128)
	if n, err := cq.Resize(buf, s); !errors.Is(err, ErrInvalid) || n != 0 {
		t.Errorf("other CQE size: %d, %v; want ErrInvalid", n, err)
	}
	wantCounters(t, "after a refused resize", pollCounters(t, cq), 0, 2)
}

// TestCQResizeTraffic resizes the send CQ of a modelled RC pair between
// post lists, with completions waiting each time, through sizes up and
// down: every work request completes once, in order.
func TestCQResizeTraffic(t *testing.T) {
	m, a, b := newPair(t, pairConfig{typ: RC, sendWR: 8, sge: 1, recvWR: 4, cqe: 7, cqeSize: 64})
	sizes := []int{15, 3, 63, 7, 1, 31}
	next := uint64(1)
	for it := range 600 {
		// A post list of 1..3 signaled RDMA writes, not polled yet.
		want := []uint64{}
		for range 1 + it%3 {
			must(t, a.sq.Begin(OpRDMAWrite, CtrlCQUpdate, 0))
			must(t, a.sq.RemoteAddr(b.base, b.lkey))
			must(t, a.sq.Data(a.base, 8, a.lkey))
			must(t, a.sq.Finish(next))
			want = append(want, next)
			next++
		}
		m.ring(a.m)
		if it%5 == 0 {
			// Resize to a size that holds what waits.
			n := sizes[(it/5)%len(sizes)]
			for n < len(want) {
				n = 2*n + 1
			}
			buf, s := newCQBuf(t, n, 64)
			m.resize(a.m.scq, buf, uint32(s.NCQE))
			moved, err := a.scq.Resize(buf, s)
			if err != nil || moved != len(want) {
				t.Fatalf("iteration %d: resize to %d moved %d, %v; want %d", it, s.NCQE, moved, err, len(want))
			}
		}
		wantSendCompletions(t, it, a.poll(t, a.scq, nil), want)
	}
	if a.sq.Outstanding() != 0 {
		t.Errorf("%d work requests outstanding at the end", a.sq.Outstanding())
	}
}
