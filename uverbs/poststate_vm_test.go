package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// Regression tests of defects found by outside testing (docs/reliability.md,
// "Defects fixed"): each failed before its fix.

// stepTo makes one transition of e's RC QP, to next, towards QP qpn at
// gid, with the attributes connectTo uses.
func stepTo(t *testing.T, e *end, next uverbs.QPState, qpn uint32, gid uverbs.GID) {
	t.Helper()
	var attr *uverbs.QPAttr
	mask := uverbs.QPAttrState
	switch next {
	case uverbs.QPStateInit:
		attr = &uverbs.QPAttr{State: next, PortNum: 1, AccessFlags: allAccess}
		mask |= uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags
	case uverbs.QPStateRTR:
		attr = &uverbs.QPAttr{State: next, PathMTU: 3, DestQPNum: qpn, RQPSN: 7, MaxDestRdAtomic: 4, MinRNRTimer: 1,
			AHAttr: uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: e.gidx, HopLimit: 64}}}
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	case uverbs.QPStateRTS:
		attr = &uverbs.QPAttr{State: next, SQPSN: 7, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4}
		mask |= uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
	default:
		t.Fatalf("stepTo %v", next)
	}
	if err := e.qp.Modify(attr, mask); err != nil {
		t.Fatalf("%v: %v", next, err)
	}
}

// fetchAdd is a signaled FETCH_AND_ADD of 1 to the counter at b.buf[4096:].
func fetchAdd(a, b *end, wrid uint64) *uverbs.SendWR {
	return &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(4096, 8)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey(), CompareAdd: 1}
}

func counter(b *end) uint64 { return binary.NativeEndian.Uint64(b.buf[4096:]) }

// TestPostSendRefusedBeforeRTS: a send posted in RESET, INIT or RTR is
// refused before it reaches the send queue, with an error naming the
// state, and does not run when the QP later reaches RTS. (It used to be
// written to the queue, only the doorbell failing, and ran at RTS.)
func TestPostSendRefusedBeforeRTS(t *testing.T) {
	a, b := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC}), newEnd(t, 1, pairOpts{typ: uverbs.QPTypeRC})
	if iwarp() {
		postRefusedBeforeRTSIWARP(t, a, b)
		return
	}
	connect(t, b, a)
	for _, st := range []uverbs.QPState{uverbs.QPStateReset, uverbs.QPStateInit, uverbs.QPStateRTR} {
		if st != uverbs.QPStateReset {
			stepTo(t, a, st, b.qp.Num(), b.gid)
		}
		err := a.qp.PostSend(fetchAdd(a, b, uint64(st)))
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), st.String()) {
			t.Errorf("PostSend in %v = %v, want EINVAL naming the state", st, err)
		}
		var pe *uverbs.PostError
		if errors.As(err, &pe) {
			t.Errorf("PostSend in %v: a PostError says something was posted: %v", st, err)
		}
	}
	stepTo(t, a, uverbs.QPStateRTS, b.qp.Num(), b.gid)
	mustPostSend(t, a, fetchAdd(a, b, 100))
	checkWCs(t, "first send in RTS", []uverbs.WorkCompletion{sendWC(a.qp, 100, uverbs.WCFetchAdd, 8)}, pollWCs(t, a.cq, 1))
	noMoreWCs(t, a.cq, "sends refused before RTS")
	if n := counter(b); n != 1 {
		t.Errorf("the counter was added to %d times, want once (refused sends ran later)", n)
	}
}

// postRefusedBeforeRTSIWARP is TestPostSendRefusedBeforeRTS on iWARP,
// where a QP reaches RTS only through the rdma_cm: RESET is a QP no ID
// owns, INIT the connecting side's QP, which its ID created and moved
// to INIT, before the connect. iWARP has no atomics: RDMA WRITEs of a
// pattern stand for the fetch-and-add, and the peer's memory shows
// whether a refused one ran later.
func postRefusedBeforeRTSIWARP(t *testing.T, a, b *end) {
	write := func(off int, wrid uint64) *uverbs.SendWR {
		fillPattern(b.buf[off:off+16], byte(wrid))
		return &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{b.sge(off, 16)}, RemoteAddr: a.mr.Addr() + uint64(off), RKey: a.mr.RKey()}
	}
	refused := func(qp *uverbs.QP, st uverbs.QPState, wr *uverbs.SendWR) {
		t.Helper()
		if got := qp.State(); got != st {
			t.Fatalf("QP in %v, want %v", got, st)
		}
		err := qp.PostSend(wr)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), st.String()) {
			t.Errorf("PostSend in %v = %v, want EINVAL naming the state", st, err)
		}
		var pe *uverbs.PostError
		if errors.As(err, &pe) {
			t.Errorf("PostSend in %v: a PostError says something was posted: %v", st, err)
		}
	}
	lone := &end{ctx: b.ctx, pd: b.pd, cq: b.cq, buf: b.buf, mr: b.mr, qcfg: b.qcfg}
	standalone(t, lone)
	refused(lone.qp, uverbs.QPStateReset, write(0, 1))
	cp, cli := cmDial(t, a, b, nil)
	if cli != b {
		t.Fatalf("the connecting end is on %s, want %s", cli.ctx.Device().Name, b.ctx.Device().Name)
	}
	refused(b.qp, uverbs.QPStateInit, write(512, 2))
	cp.finish(t)
	mustPostSend(t, b, write(1024, 100))
	checkWCs(t, "first send in RTS", []uverbs.WorkCompletion{sendWC(b.qp, 100, uverbs.WCRDMAWrite, 16)}, pollWCs(t, b.cq, 1))
	wantWritten(t, "the write in RTS", b.buf[1024:1040], a.buf[1024:1040])
	noMoreWCs(t, b.cq, "sends refused before RTS")
	wantBytes(t, "targets of the refused writes", make([]byte, 32), append(append([]byte(nil), a.buf[0:16]...), a.buf[512:528]...))
}

// TestDoorbellFailureFlushes: when the doorbell fails after work requests
// were written to the send queue, they cannot be taken back; the QP is
// moved to ERR so that they complete with WCWRFlushErr instead of running
// at the next doorbell. On rxe the requests are fetch-and-adds and the
// peer's counter shows whether one ran; iWARP has no atomics, so on siw
// they are RDMA WRITEs of a pattern and the peer's memory shows it.
func TestDoorbellFailureFlushes(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	wr, ran := func(wrid uint64) *uverbs.SendWR { return fetchAdd(a, b, wrid) }, func() bool { return counter(b) != 0 }
	wcOp := uverbs.WCFetchAdd
	if iwarp() {
		wcOp = uverbs.WCRDMAWrite
		wr = func(wrid uint64) *uverbs.SendWR {
			off := 1024 * int(wrid)
			fillPattern(a.buf[off:off+16], byte(wrid))
			return &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(off, 16)}, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}
		}
		ran = func() bool {
			return !bytes.Equal(b.buf[1024:1024+16], make([]byte, 16)) || !bytes.Equal(b.buf[2048:2048+16], make([]byte, 16))
		}
	}
	restore := uverbs.BreakDoorbell(a.qp)
	err := a.qp.PostSend(wr(1))
	restore()
	// The kernel's errno for an unknown handle: ENOENT on 6.1.
	if err == nil || !strings.Contains(err.Error(), "WCWRFlushErr") {
		t.Fatalf("PostSend with a failing doorbell = %v, want an error saying the request is flushed", err)
	}
	t.Logf("PostSend: %v", err)
	checkWCs(t, "request behind the failed doorbell", []uverbs.WorkCompletion{sendErrWC(a.qp, 1, uverbs.WCWRFlushErr, wcOp)}, pollWCs(t, a.cq, 1))
	if st := a.qp.State(); st != uverbs.QPStateErr {
		t.Errorf("QP state after the failed doorbell: %v, want ERR", st)
	}
	if iwarp() {
		// siw flushes nothing posted after the QP entered ERR, so the
		// provider refuses the post (docs/providers.md, siw).
		refusedInERR(t, "the next post", a.qp.PostSend(wr(2)))
		noMoreWCs(t, a.cq, "post refused in ERR")
	} else {
		mustPostSend(t, a, wr(2))
		checkWCs(t, "next post", []uverbs.WorkCompletion{errWC(a.qp, 2, uverbs.WCWRFlushErr)}, pollWCs(t, a.cq, 1))
	}
	if ran() {
		t.Error("a request behind the failed doorbell, or posted after it, ran at the peer")
	}
}

// TestRecvFlushedAfterDeviceError: once the device moved a QP to ERR, a
// receive posted later completes with WCWRFlushErr, although the QP's
// cached state still said RTS. The library learns of the error from the
// completions in error that Poll returns.
//
// On iWARP (siw) a responder's access error ends the connection with a
// TERMINATE: the bad RDMA WRITE itself completes with success once sent
// (TestBadRKey), and both QPs' posted receives are flushed when the
// kernel stops them. Such a flush is the completion in error the library
// learns from; siw flushes nothing posted after that, so the receive
// posted later is refused at post (EINVAL naming ERR) instead of
// flushed.
func TestRecvFlushedAfterDeviceError(t *testing.T) {
	badWrite := func(a, b *end) *uverbs.SendWR {
		return &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x5a}
	}
	t.Run("own QP", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		if iwarp() {
			mustPostRecv(t, a, 6, a.sge(0, 64))
			mustPostSend(t, a, badWrite(a, b))
			checkWCs(t, "bad rkey", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCRDMAWrite, 8), recvErrWC(a.qp, 6, uverbs.WCWRFlushErr)}, pollWCs(t, a.cq, 2))
			refusedInERR(t, "PostRecv after the error", a.qp.PostRecv(&uverbs.RecvWR{WRID: 7, SGL: []uverbs.SGE{a.sge(0, 64)}}))
			noMoreWCs(t, a.cq, "receive refused after the error")
			return
		}
		mustPostSend(t, a, badWrite(a, b))
		checkWCs(t, "bad rkey", []uverbs.WorkCompletion{errWC(a.qp, 1, uverbs.WCRemAccessErr)}, pollWCs(t, a.cq, 1))
		mustPostRecv(t, a, 7, a.sge(0, 64))
		checkWCs(t, "receive posted after the error", []uverbs.WorkCompletion{errWC(a.qp, 7, uverbs.WCWRFlushErr)}, pollWCs(t, a.cq, 1))
		if st := a.qp.State(); st != uverbs.QPStateErr {
			t.Errorf("State after the flush: %v, want ERR", st)
		}
	})
	t.Run("remote QP", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		mustPostRecv(t, b, 5, b.sge(0, 64))
		mustPostSend(t, a, badWrite(a, b))
		if iwarp() {
			checkWCs(t, "bad rkey", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCRDMAWrite, 8)}, pollWCs(t, a.cq, 1))
		} else {
			checkWCs(t, "bad rkey", []uverbs.WorkCompletion{errWC(a.qp, 1, uverbs.WCRemAccessErr)}, pollWCs(t, a.cq, 1))
		}
		// The responder's access error moved b to ERR, which flushed
		// its posted receive.
		checkWCs(t, "receiver's posted receive", []uverbs.WorkCompletion{recvErrWC(b.qp, 5, uverbs.WCWRFlushErr)}, pollWCs(t, b.cq, 1))
		if iwarp() {
			refusedInERR(t, "PostRecv after the error", b.qp.PostRecv(&uverbs.RecvWR{WRID: 6, SGL: []uverbs.SGE{b.sge(0, 64)}}))
			noMoreWCs(t, b.cq, "receive refused after the error")
			return
		}
		mustPostRecv(t, b, 6, b.sge(0, 64))
		checkWCs(t, "receive posted after the error", []uverbs.WorkCompletion{errWC(b.qp, 6, uverbs.WCWRFlushErr)}, pollWCs(t, b.cq, 1))
	})
	t.Run("stale error", func(t *testing.T) {
		testenv.NotIWARP(t, "the case connects a reset QP again by QP modify; an iWARP QP reaches RTS only through the iWARP CM")
		// An error completion polled after the QP was reset and
		// connected again must not break the healthy QP.
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		// A bad local key fails in a's requester: b stays healthy.
		bad := badWrite(a, b)
		bad.RKey, bad.SGL[0].LKey = b.mr.RKey(), a.mr.LKey()^0x5a
		mustPostSend(t, a, bad)
		var wc [1]uverbs.WorkCompletion
		deadline := time.Now().Add(5 * time.Second)
		for { // wait for the error without polling its completion
			st, err := a.qp.Query(uverbs.QPAttrState)
			if err != nil {
				t.Fatal(err)
			}
			if st.State == uverbs.QPStateErr {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("QP still %v 5s after a bad rkey", st.State)
			}
			time.Sleep(time.Millisecond)
		}
		if err := a.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
		for _, st := range []uverbs.QPState{uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS} {
			stepTo(t, a, st, b.qp.Num(), b.gid)
		}
		for {
			n, err := a.cq.Poll(wc[:])
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			t.Logf("completion from before the reset: %+v", wc[0])
		}
		mustPostRecv(t, b, 9, b.sge(0, 64))
		mustPostRecv(t, a, 10, a.sge(0, 64))
		copy(a.buf, "after reset")
		mustPostSend(t, a, &uverbs.SendWR{WRID: 11, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 11)}})
		checkWCs(t, "send after reset", []uverbs.WorkCompletion{sendWC(a.qp, 11, uverbs.WCSend, 11)}, pollWCs(t, a.cq, 1))
		checkWCs(t, "receive after reset", []uverbs.WorkCompletion{recvWC(b.qp, 9, uverbs.WCRecv, 11)}, pollWCs(t, b.cq, 1))
		if st := a.qp.State(); st != uverbs.QPStateRTS {
			t.Errorf("State = %v, want RTS", st)
		}
	})
}

// refusedInERR checks the error of a post to a QP in ERR on iWARP: siw
// flushes nothing posted after the QP stopped, so the provider refuses
// the post (EINVAL naming ERR) and posts nothing (docs/providers.md, siw).
func refusedInERR(t *testing.T, what string, err error) {
	t.Helper()
	var pe *uverbs.PostError
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "ERR") || errors.As(err, &pe) {
		t.Errorf("%s = %v, want EINVAL naming ERR, nothing posted", what, err)
	}
}
