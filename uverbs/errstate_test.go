package uverbs

import (
	"slices"
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/mmio"
)

// TestPollErrorMarksQP: Poll returning a completion in error marks its
// QP as maybe in ERR (the next PostRecv asks the kernel); successful
// completions and unknown QP numbers change nothing, and neither branch
// allocates.
func TestPollErrorMarksQP(t *testing.T) {
	c := &Context{}
	qp := &QP{num: 0x11}
	qp.state.Store(uint32(QPStateRTS))
	c.qps.add(qp)
	r := fakeCQRing(t, 8)
	q := fakeRxeCQ(t, &rxeProvider{ctx: c}, r)
	put := func(e abi.WC) {
		*mmio.At[abi.WC](r.data, r.slot(r.hdr.ProducerIndex)) = e
		r.hdr.ProducerIndex = (r.hdr.ProducerIndex + 1) & r.mask
	}
	wc := make([]WorkCompletion, 4)
	put(abi.WC{WRID: 1, Status: uint32(WCSuccess), QPNum: 0x11})
	put(abi.WC{WRID: 2, Status: uint32(WCRemAccessErr), QPNum: 0x99}) // no such QP
	if n := q.poll(wc); n != 2 {
		t.Fatalf("poll = %d, want 2", n)
	}
	if s := qp.state.Load(); s != uint32(QPStateRTS) {
		t.Fatalf("state %#x after successful completions, want RTS unmarked", s)
	}
	put(abi.WC{WRID: 3, Status: uint32(WCWRFlushErr), QPNum: 0x11})
	if n := q.poll(wc); n != 1 {
		t.Fatalf("poll = %d, want 1", n)
	}
	if s := qp.state.Load(); s&qpErrSeen == 0 || qp.State() != QPStateRTS {
		t.Errorf("state %#x after a completion in error: want RTS with the error mark", s)
	}
	allocs := testing.AllocsPerRun(100, func() {
		put(abi.WC{WRID: 4, Status: uint32(WCRetryExcErr), QPNum: 0x11})
		put(abi.WC{WRID: 5, QPNum: 0x11})
		q.poll(wc)
	})
	if allocs != 0 {
		t.Errorf("poll of completions in error allocates %v times", allocs)
	}
}

// TestAsyncErrorEventMarksQP: error events mark the QPs they concern.
func TestAsyncErrorEventMarksQP(t *testing.T) {
	c := &Context{}
	cq1, cq2 := &CQ{}, &CQ{}
	qp1 := &QP{num: 1, sendCQ: cq1, recvCQ: cq1}
	qp2 := &QP{num: 2, sendCQ: cq1, recvCQ: cq2}
	qp3 := &QP{num: 3, sendCQ: cq1, recvCQ: cq1}
	reset := func() {
		for _, qp := range []*QP{qp1, qp2, qp3} {
			qp.state.Store(uint32(QPStateRTS))
			c.qps.add(qp)
		}
	}
	marked := func() (m []uint32) {
		for _, qp := range []*QP{qp1, qp2, qp3} {
			if qp.state.Load()&qpErrSeen != 0 {
				m = append(m, qp.num)
			}
		}
		return m
	}
	for _, tc := range []struct {
		ev   AsyncEvent
		want []uint32
	}{
		{AsyncEvent{Type: EventQPFatal, QP: qp1}, []uint32{1}},
		{AsyncEvent{Type: EventQPReqErr, QP: qp2}, []uint32{2}},
		{AsyncEvent{Type: EventQPAccessErr, QP: qp3}, []uint32{3}},
		{AsyncEvent{Type: EventCQErr, CQ: cq2}, []uint32{2}},
		{AsyncEvent{Type: EventDeviceFatal}, []uint32{1, 2, 3}},
		{AsyncEvent{Type: EventCommEst, QP: qp1}, nil},
		{AsyncEvent{Type: EventPortErr, Port: 1}, nil},
	} {
		reset()
		c.noteAsyncEvent(tc.ev)
		if got := marked(); !slices.Equal(got, tc.want) {
			t.Errorf("%v: QPs %v marked, want %v", tc.ev.Type, got, tc.want)
		}
	}
}
