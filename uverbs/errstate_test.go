package uverbs

import (
	"slices"
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"github.com/purerdma/rdma/uverbs/internal/rxe"
)

// TestPollErrorMarksQP: Poll returning a completion in error marks its
// QP as maybe in ERR (the next PostRecv asks the kernel); successful
// completions and unknown QP numbers change nothing, and neither branch
// allocates. Both loops: CQ.Poll's (a CQ with a TD), which reads the QP
// numbers back from the ring, and the interface's (locked); an error
// that is not the last completion of a poll, and one in a poll that
// wraps the ring, mark their QP too.
func TestPollErrorMarksQP(t *testing.T) {
	for _, path := range rxePollPaths {
		t.Run(path, func(t *testing.T) {
			c := &Context{pc: provider.NewContext(nil, 0)}
			qp := &QP{num: 0x11}
			qp.pv.Num = qp.num
			qp.pv.State.Store(uint32(QPStateRTS))
			c.pc.AddQP(&qp.pv)
			q, r := fakeRxeCQ(t, c, 8)
			poll := rxePoller(t, path, q)
			put := func(e abi.WC) {
				r.put(r.hdr.ProducerIndex, e)
				r.hdr.ProducerIndex = (r.hdr.ProducerIndex + 1) & r.mask
			}
			marked := func(what string, want bool) {
				t.Helper()
				s := qp.pv.State.Load()
				if got := s&provider.ErrSeen != 0; got != want || qp.State() != QPStateRTS {
					t.Fatalf("%s: state %#x, want RTS, error mark %v", what, s, want)
				}
				qp.pv.State.Store(uint32(QPStateRTS))
			}
			wc := make([]WorkCompletion, 4)
			put(abi.WC{WRID: 1, Status: uint32(WCSuccess), QPNum: 0x11})
			put(abi.WC{WRID: 2, Status: uint32(WCRemAccessErr), QPNum: 0x99}) // no such QP
			if n := poll(wc); n != 2 {
				t.Fatalf("poll = %d, want 2", n)
			}
			marked("after successful completions", false)
			put(abi.WC{WRID: 3, Status: uint32(WCWRFlushErr), QPNum: 0x11})
			if n := poll(wc); n != 1 {
				t.Fatalf("poll = %d, want 1", n)
			}
			marked("after a completion in error", true)
			put(abi.WC{WRID: 4, Status: uint32(WCWRFlushErr), QPNum: 0x11})
			put(abi.WC{WRID: 5, QPNum: 0x99})
			if n := poll(wc); n != 2 {
				t.Fatalf("poll = %d, want 2", n)
			}
			marked("after an error followed by a success", true)
			// The ring empty at its last slot: the error is in slot 7,
			// the success after it in slot 0.
			r.hdr.ProducerIndex, r.hdr.ConsumerIndex = 7, 7
			put(abi.WC{WRID: 6, Status: uint32(WCRetryExcErr), QPNum: 0x11})
			put(abi.WC{WRID: 7, QPNum: 0x99})
			if n := poll(wc); n != 2 || wc[0].WRID != 6 || wc[1].WRID != 7 {
				t.Fatalf("poll across the wrap = %d (WRIDs %d, %d), want 2 (6, 7)", n, wc[0].WRID, wc[1].WRID)
			}
			marked("after an error in a poll that wrapped", true)
			allocs := testing.AllocsPerRun(100, func() {
				put(abi.WC{WRID: 4, Status: uint32(WCRetryExcErr), QPNum: 0x11})
				put(abi.WC{WRID: 5, QPNum: 0x11})
				poll(wc)
			})
			if allocs != 0 {
				t.Errorf("poll of completions in error allocates %v times", allocs)
			}
		})
	}
}

// TestAsyncErrorEventMarksQP: error events mark the QPs they concern.
func TestAsyncErrorEventMarksQP(t *testing.T) {
	c := &Context{pc: provider.NewContext(nil, 0)}
	cq1, cq2 := &CQ{q: &rxe.CQ{}}, &CQ{q: &rxe.CQ{}}
	newQP := func(num uint32, send, recv *CQ) *QP {
		qp := &QP{num: num, sendCQ: send, recvCQ: recv}
		qp.pv.Num, qp.pv.SendCQ, qp.pv.RecvCQ = num, send.q, recv.q
		return qp
	}
	qp1, qp2, qp3 := newQP(1, cq1, cq1), newQP(2, cq1, cq2), newQP(3, cq1, cq1)
	reset := func() {
		for _, qp := range []*QP{qp1, qp2, qp3} {
			qp.pv.State.Store(uint32(QPStateRTS))
			c.pc.AddQP(&qp.pv)
		}
	}
	marked := func() (m []uint32) {
		for _, qp := range []*QP{qp1, qp2, qp3} {
			if qp.pv.State.Load()&provider.ErrSeen != 0 {
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
