package uverbs_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// Fault tests: what the device and the library do when a transfer
// fails, observed on rxe under Linux 6.1 and 6.12 and asserted as seen
// (docs/reliability.md, "Faults"). Every wait is bounded, so a fault
// that hangs fails the test instead.

// retrySet is an RC QP's retry settings: its ACK timeout, retry count
// and RNR retry count (RTS), and the RNR timer its responder asks for
// in an RNR NAK (RTR).
type retrySet struct{ timeout, retry, rnrRetry, minRNRTimer uint8 }

// defaultRetry is what connect uses.
var defaultRetry = retrySet{timeout: 14, retry: 7, rnrRetry: 7, minRNRTimer: 1}

// connectRetry moves e's RC QP to RTS towards QP qpn at gid with the
// retry settings rs.
func connectRetry(t *testing.T, e *end, qpn uint32, gid uverbs.GID, rs retrySet) {
	t.Helper()
	notIWARPConnect(t)
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: allAccess},
			uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPNum: qpn, RQPSN: 7, MaxDestRdAtomic: 4, MinRNRTimer: rs.minRNRTimer,
			AHAttr: uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: e.gidx, HopLimit: 64}}},
			uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 7, Timeout: rs.timeout, RetryCnt: rs.retry, RNRRetry: rs.rnrRetry, MaxRdAtomic: 4},
			uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := e.qp.Modify(&s.attr, s.mask|uverbs.QPAttrState); err != nil {
			t.Fatalf("%v: %v", s.attr.State, err)
		}
	}
}

// newPairRetry is newPair with a's retry settings chosen by the test
// (b's are connect's).
func newPairRetry(t *testing.T, o pairOpts, rs retrySet) (a, b *end) {
	a, b = newEnd(t, 0, o), newEnd(t, 1, o)
	connectRetry(t, a, b.qp.Num(), b.gid, rs)
	connectRetry(t, b, a.qp.Num(), a.gid, defaultRetry)
	return a, b
}

// qpState asks the kernel for qp's state.
func qpState(t *testing.T, qp *uverbs.QP) uverbs.QPState {
	t.Helper()
	a, err := qp.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatalf("QP.Query: %v", err)
	}
	return a.State
}

// drainWCs polls cq until it stayed empty for quiet, 10 s at most, and
// returns what came, whatever the status.
func drainWCs(t *testing.T, cq *uverbs.CQ, quiet time.Duration) []uverbs.WorkCompletion {
	t.Helper()
	var got []uverbs.WorkCompletion
	var wc [16]uverbs.WorkCompletion
	last, end := time.Now(), time.Now().Add(10*time.Second)
	for time.Since(last) < quiet {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			got = append(got, wc[:n]...)
			last = time.Now()
		}
		if time.Now().After(end) {
			t.Fatalf("completions still coming after 10s: %d so far", len(got))
		}
		time.Sleep(100 * time.Microsecond)
	}
	return got
}

// collectEvents returns the async events of c that concern one of the
// objects in want (a *uverbs.QP, *uverbs.CQ or *uverbs.SRQ) arriving
// within d; the others (GID changes after an earlier test's link went
// down and up) are logged.
func collectEvents(t *testing.T, c *uverbs.Context, d time.Duration, want ...any) []uverbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []uverbs.AsyncEvent
	for {
		ev, err := c.AsyncEvent(ctx)
		if err != nil {
			return got
		}
		mine := false
		for _, w := range want {
			switch o := w.(type) {
			case *uverbs.QP:
				mine = mine || ev.QP == o
			case *uverbs.CQ:
				mine = mine || ev.CQ == o
			case *uverbs.SRQ:
				mine = mine || ev.SRQ == o
			}
		}
		if mine {
			got = append(got, ev)
		} else {
			t.Logf("other event: %v", ev)
		}
	}
}

// wcSummary is a short form of completions for the test logs: wr_id
// and status.
func wcSummary(wcs []uverbs.WorkCompletion) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, wc := range wcs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: %s", wc.WRID, wc.Status.String())
	}
	b.WriteByte(']')
	return b.String()
}

// flushedAll is the completions of a list of requests flushed in order.
func flushedAll(qp *uverbs.QP, wrids ...uint64) []uverbs.WorkCompletion {
	var wcs []uverbs.WorkCompletion
	for _, id := range wrids {
		wcs = append(wcs, errWC(qp, id, uverbs.WCWRFlushErr))
	}
	return wcs
}

// flushedRecvs is flushedAll for receives (recvErrWC).
func flushedRecvs(qp *uverbs.QP, wrids ...uint64) []uverbs.WorkCompletion {
	var wcs []uverbs.WorkCompletion
	for _, id := range wrids {
		wcs = append(wcs, recvErrWC(qp, id, uverbs.WCWRFlushErr))
	}
	return wcs
}

// TestFaultFlushInOrder moves a QP with work requests outstanding to
// ERR: every request completes with WCWRFlushErr, in the order posted,
// sends and receives alike, signaled or not. The sends wait behind a
// SEND that the peer answers with RNR NAKs (no receive posted, RNR
// retry 7: for ever), so none of them ran. Receives posted to an SRQ
// belong to the SRQ and stay there; 6.12 reports QP_LAST_WQE_REACHED.
func TestFaultFlushInOrder(t *testing.T) {
	t.Run("sends", func(t *testing.T) {
		testenv.NotIWARP(t, "the sends wait behind a SEND the peer answers with RNR NAKs; on iWARP a send that finds no receive ends the connection, and the list has an atomic and immediate data")
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		raddr, rkey := b.mr.Addr(), b.mr.RKey()
		sig := uverbs.SendSignaled
		wrs := []uverbs.SendWR{
			{WRID: 1, Opcode: uverbs.WRSend, Flags: sig, SGL: []uverbs.SGE{a.sge(0, 8)}},
			{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: sig, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: raddr + 1024, RKey: rkey},
			{WRID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: raddr + 1088, RKey: rkey},
			{WRID: 4, Opcode: uverbs.WRRDMARead, Flags: sig, SGL: []uverbs.SGE{a.sge(2048, 64)}, RemoteAddr: raddr + 2048, RKey: rkey},
			{WRID: 5, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: sig, SGL: []uverbs.SGE{a.sge(4096, 8)}, RemoteAddr: raddr + 4096, RKey: rkey, CompareAdd: 1},
			{WRID: 6, Opcode: uverbs.WRSendWithImm, Flags: sig, SGL: []uverbs.SGE{a.sge(0, 8)}, Imm: 6},
			{WRID: 7, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 8)}},
			{WRID: 8, Opcode: uverbs.WRSend, Flags: sig | uverbs.SendInline, SGL: []uverbs.SGE{a.sge(0, 8)}},
		}
		fillPattern(a.buf[:64], 1)
		fillPattern(b.buf[2048:2112], 2)
		for i := range wrs {
			mustPostSend(t, a, &wrs[i])
		}
		time.Sleep(100 * time.Millisecond) // the first SEND meets RNR NAKs
		if got := drainWCs(t, a.cq, 50*time.Millisecond); len(got) != 0 {
			t.Fatalf("completions before the QP went to ERR: %+v", got)
		}
		if err := a.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
		got := drainWCs(t, a.cq, 200*time.Millisecond)
		t.Logf("%s: %d completions after ERR: %s", os.Getenv("PURERDMA_VM"), len(got), wcSummary(got))
		checkWCs(t, "sends flushed", flushedAll(a.qp, 1, 2, 3, 4, 5, 6, 7, 8), got)
		wantBytes(t, "peer's write targets", make([]byte, 128), b.buf[1024:1152])
		wantBytes(t, "peer's counter", make([]byte, 8), b.buf[4096:4104])
		wantBytes(t, "read target", make([]byte, 64), a.buf[2048:2112])
		if got := drainWCs(t, b.cq, 50*time.Millisecond); len(got) != 0 {
			t.Errorf("peer's completions: %+v", got)
		}
	})
	t.Run("receives", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		for i := range 8 {
			mustPostRecv(t, b, uint64(100+i), b.sge(i*64, 64))
		}
		for i := range 3 {
			mustPostSend(t, a, &uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}})
		}
		checkWCs(t, "sends", []uverbs.WorkCompletion{sendWC(a.qp, 0, uverbs.WCSend, 8), sendWC(a.qp, 1, uverbs.WCSend, 8), sendWC(a.qp, 2, uverbs.WCSend, 8)},
			pollWCs(t, a.cq, 3))
		checkWCs(t, "receives", []uverbs.WorkCompletion{recvWC(b.qp, 100, uverbs.WCRecv, 8), recvWC(b.qp, 101, uverbs.WCRecv, 8), recvWC(b.qp, 102, uverbs.WCRecv, 8)},
			pollWCs(t, b.cq, 3))
		if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
		got := drainWCs(t, b.cq, 200*time.Millisecond)
		checkWCs(t, "receives flushed", flushedRecvs(b.qp, 103, 104, 105, 106, 107), got)
	})
	t.Run("SRQ receives", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC, srq: true})
		for i := range 4 {
			if err := b.srq.PostRecv(&uverbs.RecvWR{WRID: uint64(200 + i), SGL: []uverbs.SGE{b.sge(i*64, 64)}}); err != nil {
				t.Fatal(err)
			}
		}
		mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}})
		pollWCs(t, a.cq, 1)
		checkWCs(t, "SRQ receive", []uverbs.WorkCompletion{recvWC(b.qp, 200, uverbs.WCRecv, 8)}, pollWCs(t, b.cq, 1))
		if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
		got := drainWCs(t, b.cq, 200*time.Millisecond)
		evs := collectEvents(t, b.ctx, 200*time.Millisecond, b.qp, b.srq, b.cq)
		t.Logf("%s: after ERR with an SRQ: completions %s, events %v", os.Getenv("PURERDMA_VM"), wcSummary(got), evs)
		if len(got) != 0 {
			t.Errorf("completions after the QP went to ERR: %+v, want none (the receives are the SRQ's)", got)
		}
		// 6.12's rxe reports the QP's last WQE (a consumer waits for
		// it before destroying a QP on an SRQ); 6.1's reports nothing.
		var wantEv []uverbs.AsyncEvent
		if onKernel612() && !iwarp() { // siw reports none
			wantEv = []uverbs.AsyncEvent{{Type: uverbs.EventQPLastWQEReached, QP: b.qp}}
		}
		if len(evs) != len(wantEv) || (len(evs) == 1 && (evs[0].Type != wantEv[0].Type || evs[0].QP != b.qp)) {
			t.Errorf("events after ERR: %v, want %v", evs, wantEv)
		}
		// The three receives left are still the SRQ's: a second QP
		// on it takes them, in order.
		c := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC})
		b2 := &end{ctx: b.ctx, pd: b.pd, cq: b.cq, buf: b.buf, mr: b.mr, gidx: b.gidx, gid: b.gid}
		setQP(t, b2, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: b.srq,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
		connectPair(t, c, b2)
		qp2 := b2.qp
		for i := range 3 {
			mustPostSend(t, c, &uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{c.sge(0, 8)}})
		}
		pollWCs(t, c.cq, 3)
		checkWCs(t, "SRQ receives on a second QP", []uverbs.WorkCompletion{
			recvWC(qp2, 201, uverbs.WCRecv, 8), recvWC(qp2, 202, uverbs.WCRecv, 8), recvWC(qp2, 203, uverbs.WCRecv, 8)}, pollWCs(t, b.cq, 3))
	})
}

// TestFaultRNRRetryExceeded: a peer with no receive posted answers a
// SEND with RNR NAKs; after RNRRetry of them the send completes with
// WCRNRRetryExcErr, the QP goes to ERR and flushes the rest. The peer
// sees nothing and stays in RTS.
func TestFaultRNRRetryExceeded(t *testing.T) {
	testenv.NotIWARP(t, "RNR retries are InfiniBand's: an iWARP send that finds no receive ends the connection")
	for _, n := range []uint8{0, 1, 3} {
		t.Run("retry "+itoa(int(n)), func(t *testing.T) {
			a, b := newPairRetry(t, pairOpts{typ: uverbs.QPTypeRC}, retrySet{timeout: 14, retry: 7, rnrRetry: n, minRNRTimer: 1})
			start := time.Now()
			mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)},
				Next: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)},
					RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}})
			got := pollWCs(t, a.cq, 2)
			t.Logf("%s: RNR retry %d: %s after %v", os.Getenv("PURERDMA_VM"), n, wcSummary(got), time.Since(start).Round(time.Millisecond))
			checkWCs(t, "sender", []uverbs.WorkCompletion{errWC(a.qp, 1, uverbs.WCRNRRetryExcErr), errWC(a.qp, 2, uverbs.WCWRFlushErr)}, got)
			if st := qpState(t, a.qp); st != uverbs.QPStateErr {
				t.Errorf("sender QP %v, want ERR", st)
			}
			if st := qpState(t, b.qp); st != uverbs.QPStateRTS {
				t.Errorf("receiver QP %v, want RTS", st)
			}
			if got := drainWCs(t, b.cq, 50*time.Millisecond); len(got) != 0 {
				t.Errorf("receiver's completions: %+v", got)
			}
		})
	}
}

// TestFaultTransportRetryExceeded: a peer QP that does not answer
// (destroyed, or in ERR, whose responder drops requests) makes a send
// time out RetryCnt+1 times; it then completes with WCRetryExcErr, the
// QP goes to ERR and flushes the rest.
func TestFaultTransportRetryExceeded(t *testing.T) {
	testenv.NotIWARP(t, "transport retry counts and ACK timeouts are InfiniBand's; iWARP rides on TCP")
	for _, peer := range []string{"destroyed", "ERR"} {
		t.Run("peer "+peer, func(t *testing.T) {
			rs := retrySet{timeout: 10, retry: 2, rnrRetry: 7, minRNRTimer: 1} // 4.2 ms, 3 tries
			a, b := newPairRetry(t, pairOpts{typ: uverbs.QPTypeRC}, rs)
			if peer == "destroyed" {
				if err := b.qp.Close(); err != nil {
					t.Fatal(err)
				}
			} else if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(),
				Next: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}})
			got := pollWCs(t, a.cq, 2)
			t.Logf("%s: peer %s: %s after %v", os.Getenv("PURERDMA_VM"), peer, wcSummary(got), time.Since(start).Round(time.Millisecond))
			checkWCs(t, "sender", []uverbs.WorkCompletion{errWC(a.qp, 1, uverbs.WCRetryExcErr), errWC(a.qp, 2, uverbs.WCWRFlushErr)}, got)
			if st := qpState(t, a.qp); st != uverbs.QPStateErr {
				t.Errorf("sender QP %v, want ERR", st)
			}
			wantBytes(t, "peer memory", make([]byte, 8), b.buf[:8])
		})
	}
}

// TestFaultRemoteAccess: RDMA operations the responder must refuse.
// The requester's work request completes in error and its QP goes to
// ERR, flushing the next request; the responder's QP goes to ERR as
// well (its posted receive is flushed), and its memory is untouched.
func TestFaultRemoteAccess(t *testing.T) {
	testenv.NotIWARP(t, "an iWARP RDMA WRITE completes once sent, and a responder's access error ends the connection with a TERMINATE, not a NAK the requester's work request completes with; RDMAP has no atomics")
	const (
		noWrite  = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
		noRead   = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic
		noAtomic = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	)
	type target struct {
		mr   *uverbs.MR
		addr uint64
		rkey uint32
	}
	for _, tc := range []struct {
		name   string
		op     uverbs.WROpcode
		access uverbs.Access // the target region's; 0: the end's own region
		qpAcc  uverbs.Access // the responder QP's access flags; 0: all
		aim    func(tg target) (uint64, uint32)
		want   uverbs.WCStatus
	}{
		{"bad rkey/write", uverbs.WRRDMAWrite, 0, 0, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey ^ 0x5a }, uverbs.WCRemAccessErr},
		{"bad rkey/read", uverbs.WRRDMARead, 0, 0, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey ^ 0x5a }, uverbs.WCRemAccessErr},
		{"past the end/write", uverbs.WRRDMAWrite, 0, 0, func(tg target) (uint64, uint32) { return tg.addr + uint64(tg.mr.Len()) - 4, tg.rkey }, uverbs.WCRemAccessErr},
		{"past the end/read", uverbs.WRRDMARead, 0, 0, func(tg target) (uint64, uint32) { return tg.addr + uint64(tg.mr.Len()) - 4, tg.rkey }, uverbs.WCRemAccessErr},
		{"before the start/write", uverbs.WRRDMAWrite, 0, 0, func(tg target) (uint64, uint32) { return tg.addr - 8, tg.rkey }, uverbs.WCRemAccessErr},
		{"past the end/atomic", uverbs.WRAtomicFetchAndAdd, 0, 0, func(tg target) (uint64, uint32) { return tg.addr + uint64(tg.mr.Len()), tg.rkey }, uverbs.WCRemAccessErr},
		{"region without remote write", uverbs.WRRDMAWrite, noWrite, 0, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey }, uverbs.WCRemAccessErr},
		{"region without remote read", uverbs.WRRDMARead, noRead, 0, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey }, uverbs.WCRemAccessErr},
		{"region without remote atomic", uverbs.WRAtomicFetchAndAdd, noAtomic, 0, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey }, uverbs.WCRemAccessErr},
		// The QP's own access flags are checked first: rxe answers
		// with NAK "invalid request", not "remote access error".
		{"QP without remote write", uverbs.WRRDMAWrite, 0, noWrite, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey }, uverbs.WCRemInvReqErr},
		{"QP without remote read", uverbs.WRRDMARead, 0, noRead, func(tg target) (uint64, uint32) { return tg.addr, tg.rkey }, uverbs.WCRemInvReqErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
			tg := target{mr: b.mr, addr: b.mr.Addr(), rkey: b.mr.RKey()}
			if tc.access != 0 {
				mem := make([]byte, 4096)
				mr, err := b.pd.RegMR(mem, tc.access)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { mr.Close() })
				tg = target{mr: mr, addr: mr.Addr(), rkey: mr.RKey()}
			}
			if tc.qpAcc != 0 {
				if err := b.qp.Modify(&uverbs.QPAttr{AccessFlags: tc.qpAcc}, uverbs.QPAttrAccessFlags); err != nil {
					t.Fatal(err)
				}
			}
			before := append([]byte(nil), tg.mr.Bytes()...)
			mustPostRecv(t, b, 50, b.sge(6000, 64))
			raddr, rkey := tc.aim(tg)
			n := 8
			wr := &uverbs.SendWR{WRID: 1, Opcode: tc.op, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(4096, n)},
				RemoteAddr: raddr, RKey: rkey, CompareAdd: 1,
				Next: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}}
			mustPostSend(t, a, wr)
			got := pollWCs(t, a.cq, 2)
			rgot := drainWCs(t, b.cq, 100*time.Millisecond)
			aSt, bSt := qpState(t, a.qp), qpState(t, b.qp)
			aEv := collectEvents(t, a.ctx, 100*time.Millisecond, a.qp, a.cq)
			bEv := collectEvents(t, b.ctx, 100*time.Millisecond, b.qp, b.cq)
			t.Logf("%s: requester %s (QP %v, events %v); responder %s (QP %v, events %v)",
				os.Getenv("PURERDMA_VM"), wcSummary(got), aSt, aEv, wcSummary(rgot), bSt, bEv)
			checkWCs(t, "requester", []uverbs.WorkCompletion{errWC(a.qp, 1, tc.want), errWC(a.qp, 2, uverbs.WCWRFlushErr)}, got)
			checkWCs(t, "responder", flushedAll(b.qp, 50), rgot)
			if aSt != uverbs.QPStateErr || bSt != uverbs.QPStateErr {
				t.Errorf("requester QP %v, responder QP %v; want both ERR", aSt, bSt)
			}
			if len(aEv) != 0 || len(bEv) != 0 {
				t.Errorf("async events: requester %v, responder %v; want none", aEv, bEv)
			}
			wantBytes(t, "target region", before, tg.mr.Bytes())
		})
	}
}
