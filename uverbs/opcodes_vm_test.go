package uverbs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// These tests drive every send opcode through the Go rxe provider between
// rxe0 and rxe1 and check the data and each completion field for field,
// as rxe fills them:
//
//   - send completions: WRID, Status, Opcode, ByteLen (the request's
//     length; 0 for BIND_MW and LOCAL_INV, 8 for atomics), QPNum, and
//     WITH_IMM for the *_WITH_IMM requests;
//   - receive completions: also Flags (rxe sets GRH on every receive of a
//     user QP, WITH_IMM or WITH_INV as the message carried), Imm (the
//     immediate data or the invalidated rkey), SrcQP (UD only) and PortNum; PKeyIndex, SLID, SL
//     and DLIDPathBits stay 0.

// onKernel612 reports whether the VM runs Linux 6.12, whose rxe has FLUSH
// and ATOMIC_WRITE (6.1's has neither).
func onKernel612() bool { return strings.HasPrefix(os.Getenv("PURERDMA_VM"), "6.12") }

// allAccess is what the test MRs and QPs allow.
const allAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

// pollWCs polls cq until n completions arrived, whatever their status
// (5 s at most).
func pollWCs(t *testing.T, cq *uverbs.CQ, n int) []uverbs.WorkCompletion {
	t.Helper()
	got := make([]uverbs.WorkCompletion, n)
	k := 0
	deadline := time.Now().Add(5 * time.Second)
	for k < n {
		m, err := cq.Poll(got[k:])
		if err != nil {
			t.Fatal(err)
		}
		k += m
		if k < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions within 5s: %+v", k, n, got[:k])
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return got
}

// noMoreWCs checks that cq stays empty for a while.
func noMoreWCs(t *testing.T, cq *uverbs.CQ, what string) {
	t.Helper()
	var wc [4]uverbs.WorkCompletion
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("%s: unexpected completions %+v", what, wc[:n])
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// checkWCs compares completions in full.
func checkWCs(t *testing.T, what string, want, got []uverbs.WorkCompletion) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s completions (-want +got):\n%s", what, diff)
	}
}

// sendWC is the completion rxe writes for a successful send work request.
func sendWC(qp *uverbs.QP, wrid uint64, op uverbs.WCOpcode, n int) uverbs.WorkCompletion {
	return uverbs.WorkCompletion{WRID: wrid, Status: uverbs.WCSuccess, Opcode: op, ByteLen: uint32(n), QPNum: qp.Num()}
}

// recvWC is the completion rxe writes for a successful receive on an
// RC or UC QP; siw's (iWARP) has neither the GRH flag nor the port.
func recvWC(qp *uverbs.QP, wrid uint64, op uverbs.WCOpcode, n int) uverbs.WorkCompletion {
	if iwarp() {
		return uverbs.WorkCompletion{WRID: wrid, Status: uverbs.WCSuccess, Opcode: op, ByteLen: uint32(n), QPNum: qp.Num()}
	}
	return uverbs.WorkCompletion{WRID: wrid, Status: uverbs.WCSuccess, Opcode: op, ByteLen: uint32(n),
		QPNum: qp.Num(), Flags: uverbs.WCWithGRH, PortNum: 1}
}

func withImm(wc uverbs.WorkCompletion, imm uint32) uverbs.WorkCompletion {
	wc.Flags |= uverbs.WCWithImm
	wc.Imm = imm
	return wc
}

// errWC is the completion of a request that failed or was flushed: rxe
// (6.1 and 6.12) fills only WRID, Status and QPNum; Opcode and ByteLen
// are 0, as the verbs allow for completions in error.
func errWC(qp *uverbs.QP, wrid uint64, st uverbs.WCStatus) uverbs.WorkCompletion {
	return uverbs.WorkCompletion{WRID: wrid, Status: st, QPNum: qp.Num()}
}

// recvErrWC is errWC for a receive: siw (iWARP) also reports the
// receive's opcode, WCRecv, in a completion in error.
func recvErrWC(qp *uverbs.QP, wrid uint64, st uverbs.WCStatus) uverbs.WorkCompletion {
	wc := errWC(qp, wrid, st)
	if iwarp() {
		wc.Opcode = uverbs.WCRecv
	}
	return wc
}

// sendErrWC is errWC for a send request whose completion has opcode op:
// siw (iWARP) also reports a send request's opcode in a completion in
// error.
func sendErrWC(qp *uverbs.QP, wrid uint64, st uverbs.WCStatus, op uverbs.WCOpcode) uverbs.WorkCompletion {
	wc := errWC(qp, wrid, st)
	if iwarp() {
		wc.Opcode = op
	}
	return wc
}

// fill writes a recognisable pattern.
func fillPattern(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*13)
	}
	return b
}

func mustPostRecv(t *testing.T, e *end, wrid uint64, sgl ...uverbs.SGE) {
	t.Helper()
	if err := e.qp.PostRecv(&uverbs.RecvWR{WRID: wrid, SGL: sgl}); err != nil {
		t.Fatalf("PostRecv(%d): %v", wrid, err)
	}
}

func mustPostSend(t *testing.T, e *end, wr *uverbs.SendWR) {
	t.Helper()
	if err := e.qp.PostSend(wr); err != nil {
		t.Fatalf("PostSend(%v, wr_id %d): %v", wr.Opcode, wr.WRID, err)
	}
}

// newEndWith is newEnd with the QP's capabilities and SignalAll chosen
// by the test.
func newEndWith(t *testing.T, dev int, typ uverbs.QPType, cp uverbs.QPCap, sigAll bool) *end {
	t.Helper()
	notIWARPType(t, typ)
	e := &end{ctx: openContextOn(t, dev)}
	e.pd = newPD(t, e.ctx)
	e.cq = newCQ(t, e.ctx, uverbs.CQConfig{Size: 64})
	setQP(t, e, uverbs.QPConfig{Type: typ, SendCQ: e.cq, RecvCQ: e.cq, Cap: cp, SignalAll: sigAll})
	e.buf = make([]byte, 8192)
	mr, err := e.pd.RegMR(e.buf, allAccess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	e.mr = mr
	if !testenv.CurrentFabric().IWARP {
		e.gidx, e.gid = roceV2GID(t, e.ctx.Device().Name) // iWARP has no GIDs to address
	}
	return e
}

func newPairWith(t *testing.T, typ uverbs.QPType, cp uverbs.QPCap, sigAll bool) (a, b *end) {
	a, b = newEndWith(t, 0, typ, cp, sigAll), newEndWith(t, 1, typ, cp, sigAll)
	connectPair(t, a, b)
	return a, b
}

// TestOpcodesRC runs each RC operation that needs no extra objects from
// rxe0 to rxe1 and checks data and completions on both sides.
func TestOpcodesRC(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	raddr := func(off int) uint64 { return b.mr.Addr() + uint64(off) }
	for _, tt := range []struct {
		name    string
		prepare func()
		wr      *uverbs.SendWR
		recv    bool // b posts a receive first (wr_id 100, 256 bytes at 4096)
		send    uverbs.WorkCompletion
		rcv     *uverbs.WorkCompletion
		check   func(t *testing.T)
	}{
		{
			name:    "SEND",
			prepare: func() { fillPattern(a.buf[:100], 1) },
			wr:      &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 100)}},
			recv:    true,
			send:    sendWC(a.qp, 1, uverbs.WCSend, 100),
			rcv:     wcRef(recvWC(b.qp, 100, uverbs.WCRecv, 100)),
			check:   func(t *testing.T) { wantBytes(t, "received", a.buf[:100], b.buf[4096:4196]) },
		},
		{
			name:    "SEND_WITH_IMM",
			prepare: func() { fillPattern(a.buf[:33], 2) },
			wr: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0x01020304,
				SGL: []uverbs.SGE{a.sge(0, 33)}},
			recv:  true,
			send:  withImm(sendWC(a.qp, 2, uverbs.WCSend, 33), 0),
			rcv:   wcRef(withImm(recvWC(b.qp, 100, uverbs.WCRecv, 33), 0x01020304)),
			check: func(t *testing.T) { wantBytes(t, "received", a.buf[:33], b.buf[4096:4129]) },
		},
		{
			name:    "SEND zero bytes",
			prepare: func() {},
			wr:      &uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled},
			recv:    true,
			send:    sendWC(a.qp, 3, uverbs.WCSend, 0),
			rcv:     wcRef(recvWC(b.qp, 100, uverbs.WCRecv, 0)),
		},
		{
			name:    "RDMA_WRITE",
			prepare: func() { fillPattern(a.buf[:300], 3) },
			wr: &uverbs.SendWR{WRID: 4, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(0, 300)}, RemoteAddr: raddr(500), RKey: b.mr.RKey()},
			send:  sendWC(a.qp, 4, uverbs.WCRDMAWrite, 300),
			check: func(t *testing.T) { wantWritten(t, "remote memory", a.buf[:300], b.buf[500:800]) },
		},
		{
			name:    "RDMA_WRITE multi-packet",
			prepare: func() { fillPattern(a.buf[:5000], 4) }, // path MTU 1024: five packets
			wr: &uverbs.SendWR{WRID: 5, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(0, 5000)}, RemoteAddr: raddr(1000), RKey: b.mr.RKey()},
			send:  sendWC(a.qp, 5, uverbs.WCRDMAWrite, 5000),
			check: func(t *testing.T) { wantWritten(t, "remote memory", a.buf[:5000], b.buf[1000:6000]) },
		},
		{
			name:    "RDMA_WRITE_WITH_IMM",
			prepare: func() { fillPattern(a.buf[:64], 5) },
			wr: &uverbs.SendWR{WRID: 6, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0xcafef00d,
				SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: raddr(200), RKey: b.mr.RKey()},
			recv:  true,
			send:  withImm(sendWC(a.qp, 6, uverbs.WCRDMAWrite, 64), 0),
			rcv:   wcRef(withImm(recvWC(b.qp, 100, uverbs.WCRecvRDMAWithImm, 64), 0xcafef00d)),
			check: func(t *testing.T) { wantBytes(t, "remote memory", a.buf[:64], b.buf[200:264]) },
		},
		{
			name:    "RDMA_READ",
			prepare: func() { fillPattern(b.buf[2000:2777], 6); clear(a.buf[:777]) },
			wr: &uverbs.SendWR{WRID: 7, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(0, 777)}, RemoteAddr: raddr(2000), RKey: b.mr.RKey()},
			send:  sendWC(a.qp, 7, uverbs.WCRDMARead, 777),
			check: func(t *testing.T) { wantBytes(t, "read", b.buf[2000:2777], a.buf[:777]) },
		},
		{
			name: "ATOMIC_CMP_AND_SWP",
			prepare: func() {
				binary.NativeEndian.PutUint64(b.buf[8000:], 0x1111)
				binary.NativeEndian.PutUint64(a.buf[8:], 0)
			},
			wr: &uverbs.SendWR{WRID: 8, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(8, 8)}, RemoteAddr: raddr(8000), RKey: b.mr.RKey(), CompareAdd: 0x1111, Swap: 0x2222},
			send: sendWC(a.qp, 8, uverbs.WCCompSwap, 8),
			check: func(t *testing.T) {
				wantU64(t, "original value", 0x1111, a.buf[8:])
				wantU64(t, "remote value", 0x2222, b.buf[8000:])
			},
		},
		{
			name:    "ATOMIC_CMP_AND_SWP mismatch",
			prepare: func() { binary.NativeEndian.PutUint64(b.buf[8000:], 0x3333) },
			wr: &uverbs.SendWR{WRID: 9, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(8, 8)}, RemoteAddr: raddr(8000), RKey: b.mr.RKey(), CompareAdd: 0x1111, Swap: 0x2222},
			send: sendWC(a.qp, 9, uverbs.WCCompSwap, 8),
			check: func(t *testing.T) {
				wantU64(t, "original value", 0x3333, a.buf[8:])
				wantU64(t, "remote value (unswapped)", 0x3333, b.buf[8000:])
			},
		},
		{
			name:    "ATOMIC_FETCH_AND_ADD",
			prepare: func() { binary.NativeEndian.PutUint64(b.buf[8008:], 1<<40) },
			wr: &uverbs.SendWR{WRID: 10, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(16, 8)}, RemoteAddr: raddr(8008), RKey: b.mr.RKey(), CompareAdd: 5},
			send: sendWC(a.qp, 10, uverbs.WCFetchAdd, 8),
			check: func(t *testing.T) {
				wantU64(t, "original value", 1<<40, a.buf[16:])
				wantU64(t, "remote value", 1<<40+5, b.buf[8008:])
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare()
			if iwarpLacks(tt.wr.Opcode) {
				wantNotSupported(t, a.qp.PostSend(tt.wr))
				noMoreWCs(t, a.cq, "sender")
				return
			}
			if tt.recv {
				mustPostRecv(t, b, 100, b.sge(4096, 256))
			}
			mustPostSend(t, a, tt.wr)
			checkWCs(t, "send", []uverbs.WorkCompletion{tt.send}, pollWCs(t, a.cq, 1))
			if tt.rcv != nil {
				checkWCs(t, "receive", []uverbs.WorkCompletion{*tt.rcv}, pollWCs(t, b.cq, 1))
			}
			if tt.check != nil {
				tt.check(t)
			}
			noMoreWCs(t, a.cq, "sender")
			noMoreWCs(t, b.cq, "receiver")
		})
	}
}

func wcRef[T any](v T) *T { return &v }

// iwarpLacks reports whether the fabric is iWARP and op one of what it
// has not (immediate data, atomics), which the siw provider refuses at
// post with ErrNotSupported.
func iwarpLacks(op uverbs.WROpcode) bool {
	if !iwarp() {
		return false
	}
	switch op {
	case uverbs.WRSendWithImm, uverbs.WRRDMAWriteWithImm, uverbs.WRAtomicCmpAndSwp, uverbs.WRAtomicFetchAndAdd:
		return true
	}
	return false
}

func wantBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Errorf("%s: got % x..., want % x...", what, got[:min(len(got), 16)], want[:min(len(want), 16)])
	}
}

func wantU64(t *testing.T, what string, want uint64, b []byte) {
	t.Helper()
	if got := binary.NativeEndian.Uint64(b); got != want {
		t.Errorf("%s = %#x, want %#x", what, got, want)
	}
}

// mwSetup is b's side of the memory window tests: an MR that allows
// binding and a type 2 window on it, bound by b's QP (the one a talks
// to: rxe ties a type 2 window to the QP that bound it).
type mwSetup struct {
	mem []byte
	mr  *uverbs.MR
	mw  *uverbs.MW
}

func newMWSetup(t *testing.T, b *end) *mwSetup {
	t.Helper()
	s := &mwSetup{mem: make([]byte, 4096)}
	mr, err := b.pd.RegMR(s.mem, allAccess|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	s.mr = mr
	mw, err := b.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Close() })
	s.mw = mw
	return s
}

// nextRKey is ibv_inc_rkey: the same index, the next key byte.
func nextRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// bind binds the window over mem[1024:3072] with the next rkey, checks
// the completion and returns the new rkey.
func (s *mwSetup) bind(t *testing.T, b *end, wrid uint64) uint32 {
	t.Helper()
	old := s.mw.RKey()
	rkey := nextRKey(old)
	mustPostSend(t, b, &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
		Bind: &uverbs.MWBind{MW: s.mw, RKey: rkey, MR: s.mr, Addr: s.mr.Addr() + 1024, Length: 2048,
			Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}})
	checkWCs(t, "bind", []uverbs.WorkCompletion{sendWC(b.qp, wrid, uverbs.WCBindMW, 0)}, pollWCs(t, b.cq, 1))
	if got := s.mw.RKey(); got != rkey {
		t.Errorf("after binding with rkey %#x, MW.RKey() = %#x (was %#x)", rkey, got, old)
	}
	return rkey
}

// writeThrough RDMA-writes 16 bytes from a to the window at offset off
// and returns a's completion.
func (s *mwSetup) writeThrough(t *testing.T, a *end, rkey uint32, off int, wrid uint64) uverbs.WorkCompletion {
	t.Helper()
	fillPattern(a.buf[:16], byte(wrid))
	mustPostSend(t, a, &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 16)}, RemoteAddr: s.mr.Addr() + uint64(off), RKey: rkey})
	return pollWCs(t, a.cq, 1)[0]
}

// TestMemoryWindowType2 binds a type 2 window with BIND_MW and
// invalidates it with LOCAL_INV and SEND_WITH_INV; remote writes through
// the window's rkey work while it is bound and fail with a remote access
// error otherwise.
func TestMemoryWindowType2(t *testing.T) {
	testenv.NotIWARP(t, "memory windows: siw has none (ALLOC_MW is refused, TestMWAllocClose checks it)")
	t.Run("BIND_MW then write", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		rkey := s.bind(t, b, 1)
		checkWCs(t, "write through the window", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCRDMAWrite, 16)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, rkey, 1500, 2)})
		wantBytes(t, "window memory", a.buf[:16], s.mem[1500:1516])
	})
	t.Run("write with the old rkey", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		old := s.mw.RKey()
		s.bind(t, b, 1)
		checkWCs(t, "write with the pre-bind rkey", []uverbs.WorkCompletion{errWC(a.qp, 2, uverbs.WCRemAccessErr)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, old, 1500, 2)})
		if !bytes.Equal(s.mem[1500:1516], make([]byte, 16)) {
			t.Errorf("the failed write changed memory")
		}
	})
	t.Run("write through an unbound window", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		checkWCs(t, "write through an unbound window", []uverbs.WorkCompletion{errWC(a.qp, 2, uverbs.WCRemAccessErr)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, s.mw.RKey(), 1500, 2)})
	})
	t.Run("LOCAL_INV", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		rkey := s.bind(t, b, 1)
		mustPostSend(t, b, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: rkey})
		checkWCs(t, "local invalidate", []uverbs.WorkCompletion{sendWC(b.qp, 2, uverbs.WCLocalInv, 0)}, pollWCs(t, b.cq, 1))
		// The window is free again: bind it anew (its rkey now is the
		// bound one, which the next bind must name) and write through it.
		rkey2 := s.bind(t, b, 3)
		if rkey2 != nextRKey(rkey) {
			t.Errorf("second bind rkey %#x, want %#x", rkey2, nextRKey(rkey))
		}
		checkWCs(t, "write after rebinding", []uverbs.WorkCompletion{sendWC(a.qp, 4, uverbs.WCRDMAWrite, 16)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, rkey2, 2000, 4)})
		wantBytes(t, "window memory", a.buf[:16], s.mem[2000:2016])
		// Invalidate again; the old binding's rkey no longer works.
		mustPostSend(t, b, &uverbs.SendWR{WRID: 5, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, InvalidateRKey: rkey2})
		checkWCs(t, "local invalidate", []uverbs.WorkCompletion{sendWC(b.qp, 5, uverbs.WCLocalInv, 0)}, pollWCs(t, b.cq, 1))
		checkWCs(t, "write after LOCAL_INV", []uverbs.WorkCompletion{errWC(a.qp, 6, uverbs.WCRemAccessErr)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, rkey2, 2000, 6)})
	})
	t.Run("SEND_WITH_INV", func(t *testing.T) {
		a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		rkey := s.bind(t, b, 1)
		mustPostRecv(t, b, 50, b.sge(0, 64))
		fillPattern(a.buf[100:120], 9)
		mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(100, 20)}, InvalidateRKey: rkey})
		checkWCs(t, "send with invalidate", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCSend, 20)}, pollWCs(t, a.cq, 1))
		want := recvWC(b.qp, 50, uverbs.WCRecv, 20)
		want.Flags |= uverbs.WCWithInv
		want.Imm = rkey // the union: the invalidated rkey
		got := pollWCs(t, b.cq, 1)
		checkWCs(t, "receive", []uverbs.WorkCompletion{want}, got)
		if r := got[0].InvalidatedRKey(); r != rkey {
			t.Errorf("InvalidatedRKey() = %#x, want %#x", r, rkey)
		}
		wantBytes(t, "received", a.buf[100:120], b.buf[:20])
		checkWCs(t, "write after remote invalidation", []uverbs.WorkCompletion{errWC(a.qp, 3, uverbs.WCRemAccessErr)},
			[]uverbs.WorkCompletion{s.writeThrough(t, a, rkey, 1500, 3)})
	})
	t.Run("bind validation", func(t *testing.T) {
		_, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
		s := newMWSetup(t, b)
		// The rkey of a bind may change only its low 8 bits.
		err := b.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
			Bind: &uverbs.MWBind{MW: s.mw, RKey: s.mw.RKey() ^ 0x100, MR: s.mr, Addr: s.mr.Addr(), Length: 64,
				Access: uverbs.AccessRemoteWrite}})
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("bind with a new rkey index = %v, want EINVAL", err)
		}
		noMoreWCs(t, b.cq, "refused bind")
	})
}

// writeThenFlush writes n bytes of a pattern from a to mr at off and, in
// the same post, flushes them with typ and level: the flush completes
// after the write is placed. It checks the flush's completion and
// returns the bytes written.
func writeThenFlush(t *testing.T, a *end, mr *uverbs.MR, off, n int, seed byte, typ uverbs.FlushType, level uverbs.FlushLevel) []byte {
	t.Helper()
	fillPattern(a.buf[:n], seed)
	remote := mr.Addr() + uint64(off)
	mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, n)},
		RemoteAddr: remote, RKey: mr.RKey(),
		Next: &uverbs.SendWR{WRID: 3, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled, FlushType: typ,
			FlushLevel: level, FlushLength: uint64(n), RemoteAddr: remote, RKey: mr.RKey()}})
	checkWCs(t, "flush", []uverbs.WorkCompletion{sendWC(a.qp, 3, uverbs.WCFlush, n)}, pollWCs(t, a.cq, 1))
	return a.buf[:n]
}

// TestFlushAndAtomicWrite: on 6.12 FLUSH and ATOMIC_WRITE complete and do
// what they say; on 6.1 PostSend refuses them with ErrNotSupported
// before anything is posted.
func TestFlushAndAtomicWrite(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	attr, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	global, persistent := attr.SupportsFlush()
	t.Logf("%s: FLUSH global %v persistent %v, ATOMIC_WRITE %v", os.Getenv("PURERDMA_VM"), global, persistent, attr.SupportsAtomicWrite())
	if iwarp() { // siw has neither, on any kernel: refused at post
		if global || persistent || attr.SupportsAtomicWrite() {
			t.Errorf("siw reports FLUSH or ATOMIC_WRITE support")
		}
		wantNotSupported(t, a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled, FlushType: uverbs.FlushGlobal,
			FlushLevel: uverbs.FlushRange, FlushLength: 64, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		wantNotSupported(t, a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRAtomicWrite, Flags: uverbs.SendSignaled,
			AtomicWrite: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		noMoreWCs(t, a.cq, "refused requests")
		return
	}
	if !onKernel612() {
		if global || persistent || attr.SupportsAtomicWrite() {
			t.Errorf("6.1 rxe reports FLUSH or ATOMIC_WRITE support")
		}
		for _, wr := range []*uverbs.SendWR{
			{WRID: 1, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled, FlushType: uverbs.FlushGlobal,
				FlushLevel: uverbs.FlushRange, FlushLength: 64, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
			{WRID: 2, Opcode: uverbs.WRAtomicWrite, Flags: uverbs.SendSignaled, AtomicWrite: [8]byte{1, 2, 3, 4, 5, 6, 7, 8},
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		} {
			err := a.qp.PostSend(wr)
			var pe *uverbs.PostError
			if !errors.Is(err, uverbs.ErrNotSupported) || errors.As(err, &pe) || !strings.Contains(err.Error(), "6.2") {
				t.Errorf("6.1: PostSend(%v) = %v, want ErrNotSupported naming Linux 6.2, nothing posted", wr.Opcode, err)
			}
		}
		// A list whose second request is unsupported posts the first.
		fillPattern(a.buf[:8], 1)
		err := a.qp.PostSend(&uverbs.SendWR{WRID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(),
			Next: &uverbs.SendWR{WRID: 4, Opcode: uverbs.WRAtomicWrite, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}})
		var pe *uverbs.PostError
		if !errors.As(err, &pe) || pe.Index != 1 || pe.WRID != 4 || !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("6.1: [RDMA_WRITE, ATOMIC_WRITE] = %v, want a PostError at index 1 matching ErrNotSupported", err)
		}
		checkWCs(t, "the write before the refused request", []uverbs.WorkCompletion{sendWC(a.qp, 3, uverbs.WCRDMAWrite, 8)}, pollWCs(t, a.cq, 1))
		noMoreWCs(t, a.cq, "refused requests")
		return
	}
	if !global || !persistent || !attr.SupportsAtomicWrite() {
		t.Fatalf("6.12 rxe does not report FLUSH_GLOBAL, FLUSH_PERSISTENT and ATOMIC_WRITE")
	}
	// The target of FLUSH needs flush access. rxe grants FLUSH_PERSISTENT
	// only on persistent memory (see TestMRFlushAccess), so this region
	// allows global flushes; "FLUSH persistent" uses the VM's NVDIMM.
	mem := make([]byte, 4096)
	fmr, err := b.pd.RegMR(mem, allAccess|uverbs.AccessFlushGlobal)
	if err != nil {
		t.Fatal(err)
	}
	defer fmr.Close()
	// The responder QP must allow flushes too (rxe answers a FLUSH to a
	// QP without flush access with "invalid request").
	if err := b.qp.Modify(&uverbs.QPAttr{AccessFlags: allAccess | uverbs.AccessFlushGlobal}, uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}

	t.Run("ATOMIC_WRITE", func(t *testing.T) {
		val := [8]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
		mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRAtomicWrite, Flags: uverbs.SendSignaled,
			AtomicWrite: val, RemoteAddr: fmr.Addr() + 64, RKey: fmr.RKey()})
		checkWCs(t, "atomic write", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCAtomicWrite, 8)}, pollWCs(t, a.cq, 1))
		wantBytes(t, "remote memory", val[:], mem[64:72])
		if !bytes.Equal(mem[56:64], make([]byte, 8)) || !bytes.Equal(mem[72:80], make([]byte, 8)) {
			t.Errorf("ATOMIC_WRITE touched bytes around its target")
		}
		err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: fmr.Addr() + 4, RKey: fmr.RKey()})
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("misaligned ATOMIC_WRITE = %v, want EINVAL", err)
		}
	})
	for _, tt := range []struct {
		name  string
		level uverbs.FlushLevel
	}{{"FLUSH range", uverbs.FlushRange}, {"FLUSH region", uverbs.FlushMR}} {
		t.Run(tt.name, func(t *testing.T) {
			sent := writeThenFlush(t, a, fmr, 1024, 256, 7, uverbs.FlushGlobal, tt.level)
			wantBytes(t, "flushed memory", sent, mem[1024:1280])
		})
	}
	t.Run("FLUSH persistent", func(t *testing.T) {
		// Persistence needs persistent memory (the VM's NVDIMM, device
		// DAX) under the target region, and flush access on its QP.
		pb := pmemBuffer(t, 1<<20)
		again := pmemBuffer(t, 1<<20) // a second mapping of the same memory
		both := allAccess | uverbs.AccessFlushGlobal | uverbs.AccessFlushPersistent
		pmr, err := b.pd.RegBuffer(pb, both)
		if err != nil {
			t.Fatal(err)
		}
		defer pmr.Close()
		if err := b.qp.Modify(&uverbs.QPAttr{AccessFlags: both}, uverbs.QPAttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		for i, level := range []uverbs.FlushLevel{uverbs.FlushRange, uverbs.FlushMR} {
			off := 4096 * (i + 1)
			sent := writeThenFlush(t, a, pmr, off, 512, byte(20+i), uverbs.FlushPersistent, level)
			wantBytes(t, "persistent memory", sent, pb.Bytes()[off:off+512])
			wantBytes(t, "the device through another mapping", sent, again.Bytes()[off:off+512])
		}
	})
	t.Run("bad FLUSH type", func(t *testing.T) {
		for _, typ := range []uverbs.FlushType{0, 4} {
			err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRFlush, FlushType: typ, RemoteAddr: fmr.Addr(), RKey: fmr.RKey()})
			if !errors.Is(err, syscall.EINVAL) {
				t.Errorf("FLUSH type %d = %v, want EINVAL", typ, err)
			}
		}
	})
	t.Run("FLUSH without flush access", func(t *testing.T) {
		// b.mr was registered without flush access: a remote access error.
		mustPostSend(t, a, &uverbs.SendWR{WRID: 4, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled, FlushType: uverbs.FlushGlobal,
			FlushLevel: uverbs.FlushRange, FlushLength: 64, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		checkWCs(t, "flush", []uverbs.WorkCompletion{errWC(a.qp, 4, uverbs.WCRemAccessErr)}, pollWCs(t, a.cq, 1))
	})
}

// threadWrites is the number of write(2) calls the calling thread made
// (/proc/thread-self/io syscw).
func threadWrites(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscw in /proc/thread-self/io")
	return 0
}

// TestPostListOneDoorbell posts a chain of 8 mixed work requests with one
// PostSend: they run in order, and the thread made one write(2), the
// doorbell, where 8 single posts make 8.
func TestPostListOneDoorbell(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	if iwarp() {
		postListIWARP(t, a, b)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	build := func() *uverbs.SendWR {
		fillPattern(a.buf[:1024], 3)
		fillPattern(b.buf[6000:6100], 4)
		binary.NativeEndian.PutUint64(b.buf[7000:], 10)
		wrs := []uverbs.SendWR{
			{WRID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 10)}},
			{WRID: 2, Opcode: uverbs.WRSendWithImm, Imm: 77, SGL: []uverbs.SGE{a.sge(10, 10)}},
			{WRID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(100, 100)}, RemoteAddr: b.mr.Addr() + 3000, RKey: b.mr.RKey()},
			{WRID: 4, Opcode: uverbs.WRRDMAWriteWithImm, Imm: 78, SGL: []uverbs.SGE{a.sge(200, 50)}, RemoteAddr: b.mr.Addr() + 3100, RKey: b.mr.RKey()},
			{WRID: 5, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(2000, 100)}, RemoteAddr: b.mr.Addr() + 6000, RKey: b.mr.RKey()},
			{WRID: 6, Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{a.sge(2200, 8)}, RemoteAddr: b.mr.Addr() + 7000, RKey: b.mr.RKey(), CompareAdd: 1},
			{WRID: 7, Opcode: uverbs.WRAtomicCmpAndSwp, SGL: []uverbs.SGE{a.sge(2208, 8)}, RemoteAddr: b.mr.Addr() + 7000, RKey: b.mr.RKey(), CompareAdd: 11, Swap: 100},
			{WRID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{a.sge(300, 20)}},
		}
		for i := range wrs {
			wrs[i].Flags |= uverbs.SendSignaled
			if i+1 < len(wrs) {
				wrs[i].Next = &wrs[i+1]
			}
		}
		for i := range 4 {
			mustPostRecv(t, b, uint64(100+i), b.sge(i*256, 256))
		}
		return &wrs[0]
	}
	check := func(t *testing.T) {
		t.Helper()
		checkWCs(t, "sender", []uverbs.WorkCompletion{
			sendWC(a.qp, 1, uverbs.WCSend, 10), withImm(sendWC(a.qp, 2, uverbs.WCSend, 10), 0),
			sendWC(a.qp, 3, uverbs.WCRDMAWrite, 100), withImm(sendWC(a.qp, 4, uverbs.WCRDMAWrite, 50), 0),
			sendWC(a.qp, 5, uverbs.WCRDMARead, 100), sendWC(a.qp, 6, uverbs.WCFetchAdd, 8),
			sendWC(a.qp, 7, uverbs.WCCompSwap, 8), sendWC(a.qp, 8, uverbs.WCSend, 20),
		}, pollWCs(t, a.cq, 8))
		checkWCs(t, "receiver", []uverbs.WorkCompletion{
			recvWC(b.qp, 100, uverbs.WCRecv, 10), withImm(recvWC(b.qp, 101, uverbs.WCRecv, 10), 77),
			withImm(recvWC(b.qp, 102, uverbs.WCRecvRDMAWithImm, 50), 78), recvWC(b.qp, 103, uverbs.WCRecv, 20),
		}, pollWCs(t, b.cq, 4))
		wantBytes(t, "send", a.buf[0:10], b.buf[0:10])
		wantBytes(t, "send with imm", a.buf[10:20], b.buf[256:266])
		wantBytes(t, "write", a.buf[100:250], b.buf[3000:3150])
		wantBytes(t, "read", b.buf[6000:6100], a.buf[2000:2100])
		wantU64(t, "fetch-add original", 10, a.buf[2200:])
		wantU64(t, "cmp-swap original (after the add)", 11, a.buf[2208:])
		wantU64(t, "remote atomic", 100, b.buf[7000:])
		wantBytes(t, "inline send", a.buf[300:320], b.buf[768:788])
	}

	wr := build()
	before := threadWrites(t)
	if err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	chained := threadWrites(t) - before
	check(t)

	wr = build()
	before = threadWrites(t)
	for w := wr; w != nil; {
		next := w.Next
		w.Next = nil
		if err := a.qp.PostSend(w); err != nil {
			t.Fatal(err)
		}
		w = next
	}
	single := threadWrites(t) - before
	check(t)
	t.Logf("write(2) calls: %d for a list of 8, %d for 8 single posts", chained, single)
	if chained != 1 || single != 8 {
		t.Errorf("doorbells: %d for a list of 8 (want 1), %d for 8 single posts (want 8)", chained, single)
	}
}

// postListIWARP is TestPostListOneDoorbell on iWARP, which has neither
// immediate data nor atomics: a chain of 8 sends, writes and reads runs
// with one doorbell. siw rings the doorbell of a single post only when
// the send queue may be idle (docs/providers.md), so 8 single posts make
// between 1 and 8 write(2) calls, logged.
func postListIWARP(t *testing.T, a, b *end) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	build := func() *uverbs.SendWR {
		fillPattern(a.buf[:1024], 3)
		fillPattern(b.buf[6000:6100], 4)
		binary.NativeEndian.PutUint64(b.buf[7000:], 10)
		clear(a.buf[2000:2216])
		wrs := []uverbs.SendWR{
			{WRID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(0, 10)}},
			{WRID: 2, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(10, 10)}},
			{WRID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(100, 100)}, RemoteAddr: b.mr.Addr() + 3000, RKey: b.mr.RKey()},
			{WRID: 4, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(200, 50)}, RemoteAddr: b.mr.Addr() + 3100, RKey: b.mr.RKey()},
			{WRID: 5, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(2000, 100)}, RemoteAddr: b.mr.Addr() + 6000, RKey: b.mr.RKey()},
			{WRID: 6, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(2200, 8)}, RemoteAddr: b.mr.Addr() + 7000, RKey: b.mr.RKey()},
			{WRID: 7, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(2208, 8)}, RemoteAddr: b.mr.Addr() + 7000, RKey: b.mr.RKey()},
			{WRID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{a.sge(300, 20)}},
		}
		for i := range wrs {
			wrs[i].Flags |= uverbs.SendSignaled
			if i+1 < len(wrs) {
				wrs[i].Next = &wrs[i+1]
			}
		}
		for i := range 3 {
			mustPostRecv(t, b, uint64(100+i), b.sge(i*256, 256))
		}
		return &wrs[0]
	}
	check := func(t *testing.T) {
		t.Helper()
		// siw completes a SEND or WRITE once sent, and a READ when its
		// response arrived: the SEND behind the reads may complete
		// before them (seen on 6.12). Each request completes once.
		got := pollWCs(t, a.cq, 8)
		slices.SortFunc(got, func(x, y uverbs.WorkCompletion) int { return int(x.WRID) - int(y.WRID) })
		checkWCs(t, "sender", []uverbs.WorkCompletion{
			sendWC(a.qp, 1, uverbs.WCSend, 10), sendWC(a.qp, 2, uverbs.WCSend, 10),
			sendWC(a.qp, 3, uverbs.WCRDMAWrite, 100), sendWC(a.qp, 4, uverbs.WCRDMAWrite, 50),
			sendWC(a.qp, 5, uverbs.WCRDMARead, 100), sendWC(a.qp, 6, uverbs.WCRDMARead, 8),
			sendWC(a.qp, 7, uverbs.WCRDMARead, 8), sendWC(a.qp, 8, uverbs.WCSend, 20),
		}, got)
		checkWCs(t, "receiver", []uverbs.WorkCompletion{
			recvWC(b.qp, 100, uverbs.WCRecv, 10), recvWC(b.qp, 101, uverbs.WCRecv, 10), recvWC(b.qp, 102, uverbs.WCRecv, 20),
		}, pollWCs(t, b.cq, 3))
		wantBytes(t, "send", a.buf[0:10], b.buf[0:10])
		wantBytes(t, "second send", a.buf[10:20], b.buf[256:266])
		wantBytes(t, "write", a.buf[100:250], b.buf[3000:3150]) // placed before the reads behind it
		wantBytes(t, "read", b.buf[6000:6100], a.buf[2000:2100])
		wantU64(t, "first 8-byte read", 10, a.buf[2200:])
		wantU64(t, "second 8-byte read", 10, a.buf[2208:])
		wantBytes(t, "inline send", a.buf[300:320], b.buf[512:532])
	}

	wr := build()
	before := threadWrites(t)
	if err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	chained := threadWrites(t) - before
	check(t)

	wr = build()
	before = threadWrites(t)
	for w := wr; w != nil; {
		next := w.Next
		w.Next = nil
		if err := a.qp.PostSend(w); err != nil {
			t.Fatal(err)
		}
		w = next
	}
	single := threadWrites(t) - before
	check(t)
	t.Logf("write(2) calls: %d for a list of 8, %d for 8 single posts", chained, single)
	if chained != 1 || single < 1 || single > 8 {
		t.Errorf("doorbells: %d for a list of 8 (want 1), %d for 8 single posts (want 1 to 8)", chained, single)
	}
}

// TestUnsignaledSends: with SignalAll false only the requests with
// SendSignaled complete; the unsignaled ones before them free their
// slots all the same.
func TestUnsignaledSends(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	const rounds, per = 8, 4 // 32 sends through a 16-entry send queue
	for r := range rounds {
		var wrs [per]uverbs.SendWR
		for i := range wrs {
			n := r*per + i
			a.buf[n] = byte(n)
			wrs[i] = uverbs.SendWR{WRID: uint64(n), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(n, 1)}}
			if i == per-1 {
				wrs[i].Flags = uverbs.SendSignaled
			} else {
				wrs[i].Next = &wrs[i+1]
			}
			mustPostRecv(t, b, uint64(1000+n), b.sge(n*8, 8))
		}
		mustPostSend(t, a, &wrs[0])
		checkWCs(t, fmt.Sprintf("round %d sender", r), []uverbs.WorkCompletion{sendWC(a.qp, uint64(r*per+per-1), uverbs.WCSend, 1)}, pollWCs(t, a.cq, 1))
		got := pollWCs(t, b.cq, per)
		for i, wc := range got {
			n := r*per + i
			checkWCs(t, fmt.Sprintf("receive %d", n), []uverbs.WorkCompletion{recvWC(b.qp, uint64(1000+n), uverbs.WCRecv, 1)}, []uverbs.WorkCompletion{wc})
			if b.buf[n*8] != byte(n) {
				t.Errorf("message %d: got %d", n, b.buf[n*8])
			}
		}
	}
	noMoreWCs(t, a.cq, "unsignaled sends")
}

// TestSignalAll: a QP created with SignalAll completes every request,
// signaled or not, and Query reports it.
func TestSignalAll(t *testing.T) {
	cp := uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	a, b := newPairWith(t, uverbs.QPTypeRC, cp, true)
	attr, err := a.qp.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if !attr.SQSigAll {
		t.Errorf("Query: SQSigAll false on a SignalAll QP")
	}
	var want []uverbs.WorkCompletion
	for i := range 3 {
		mustPostRecv(t, b, uint64(i), b.sge(i*16, 16))
		mustPostSend(t, a, &uverbs.SendWR{WRID: uint64(10 + i), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(i, 1)}})
		want = append(want, sendWC(a.qp, uint64(10+i), uverbs.WCSend, 1))
	}
	mustPostSend(t, a, &uverbs.SendWR{WRID: 13, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 4)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	want = append(want, sendWC(a.qp, 13, uverbs.WCRDMAWrite, 4))
	checkWCs(t, "SignalAll sender", want, pollWCs(t, a.cq, 4))
	pollWCs(t, b.cq, 3)
	noMoreWCs(t, a.cq, "SignalAll")
}

// TestSendFence: a SEND with SendFence waits for the RDMA READ before it
// to complete, so it carries the data the read brought in.
func TestSendFence(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	for round := range 10 {
		src := fillPattern(b.buf[5000:5000+512], byte(round+1))
		for i := range 512 {
			a.buf[1024+i] = 0xee // stale until the read lands
		}
		mustPostRecv(t, b, uint64(round), b.sge(0, 512))
		err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{a.sge(1024, 512)},
			RemoteAddr: b.mr.Addr() + 5000, RKey: b.mr.RKey(),
			Next: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendFence,
				SGL: []uverbs.SGE{a.sge(1024, 512)}}})
		if err != nil {
			t.Fatal(err)
		}
		checkWCs(t, "fenced send", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCSend, 512)}, pollWCs(t, a.cq, 1))
		checkWCs(t, "receive", []uverbs.WorkCompletion{recvWC(b.qp, uint64(round), uverbs.WCRecv, 512)}, pollWCs(t, b.cq, 1))
		wantBytes(t, fmt.Sprintf("round %d: sent after the fence", round), src, b.buf[:512])
	}
}

// TestInlineLimit: MaxInlineData bytes go inline (copied at post time),
// one byte more is refused before anything is posted.
func TestInlineLimit(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	max := int(a.qp.Cap().MaxInlineData)
	t.Logf("MaxInlineData %d", max)
	if max < 64 {
		t.Fatalf("MaxInlineData %d, asked for 64", max)
	}
	msg := fillPattern(make([]byte, max), 5)
	copy(a.buf, msg)
	half := max / 2
	mustPostRecv(t, b, 1, b.sge(0, max+16))
	mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{a.sge(0, half), a.sge(half, max-half)}})
	clear(a.buf[:max]) // the data was copied when posted
	checkWCs(t, "inline send", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCSend, max)}, pollWCs(t, a.cq, 1))
	checkWCs(t, "receive", []uverbs.WorkCompletion{recvWC(b.qp, 1, uverbs.WCRecv, max)}, pollWCs(t, b.cq, 1))
	wantBytes(t, "received", msg, b.buf[:max])

	// Inline RDMA WRITE at the limit too.
	copy(a.buf, msg)
	mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{a.sge(0, max)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()})
	clear(a.buf[:max])
	checkWCs(t, "inline write", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCRDMAWrite, max)}, pollWCs(t, a.cq, 1))
	wantWritten(t, "written", msg, b.buf[4096:4096+max])

	for _, sgl := range [][]uverbs.SGE{{a.sge(0, max+1)}, {a.sge(0, half), a.sge(half, max-half+1)}} {
		err := a.qp.PostSend(&uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline, SGL: sgl})
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "inline") || !strings.Contains(err.Error(), strconv.Itoa(max)) {
			t.Errorf("%d bytes inline = %v, want EINVAL naming the inline limit %d", max+1, err, max)
		}
	}
	noMoreWCs(t, a.cq, "refused inline sends")
	noMoreWCs(t, b.cq, "refused inline sends")
}

// TestMultiSGE gathers sends and writes from several local buffers and
// scatters receives and reads into several.
func TestMultiSGE(t *testing.T) {
	cp := uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4}
	a, b := newPairWith(t, uverbs.QPTypeRC, cp, false)
	if a.qp.Cap().MaxSendSGE < 4 || b.qp.Cap().MaxRecvSGE < 4 {
		t.Fatalf("caps %+v, asked for 4 SGEs", a.qp.Cap())
	}
	fillPattern(a.buf[:4096], 1)
	gather := []uverbs.SGE{a.sge(0, 100), a.sge(1000, 1), a.sge(2000, 300), a.sge(3000, 99)}
	var sent []byte
	for _, s := range gather {
		off := int(s.Addr - a.mr.Addr())
		sent = append(sent, a.buf[off:off+int(s.Length)]...)
	}
	// Scatter 500 bytes into pieces of 7, 200, 93 and 300 bytes.
	scatter := []uverbs.SGE{b.sge(7000, 7), b.sge(100, 200), b.sge(5000, 93), b.sge(2000, 300)}
	mustPostRecv(t, b, 9, scatter...)
	mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: gather})
	checkWCs(t, "gathered send", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCSend, 500)}, pollWCs(t, a.cq, 1))
	checkWCs(t, "scattered receive", []uverbs.WorkCompletion{recvWC(b.qp, 9, uverbs.WCRecv, 500)}, pollWCs(t, b.cq, 1))
	var got []byte
	for _, s := range scatter {
		off := int(s.Addr - b.mr.Addr())
		got = append(got, b.buf[off:off+int(s.Length)]...)
	}
	wantBytes(t, "scattered data", sent, got[:len(sent)])

	// Gathered write, scattered read back.
	mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: gather,
		RemoteAddr: b.mr.Addr() + 3000, RKey: b.mr.RKey()})
	checkWCs(t, "gathered write", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCRDMAWrite, 500)}, pollWCs(t, a.cq, 1))
	wantWritten(t, "written", sent, b.buf[3000:3500])
	clear(a.buf[4096:])
	readInto := []uverbs.SGE{a.sge(8000, 100), a.sge(4096, 250), a.sge(6000, 150)}
	read := &uverbs.SendWR{WRID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGL: readInto,
		RemoteAddr: b.mr.Addr() + 3000, RKey: b.mr.RKey()}
	if iwarp() {
		// siw's kernel places a read's response into the first entry
		// only: the provider refuses more.
		wantNotSupported(t, a.qp.PostSend(read))
	} else {
		mustPostSend(t, a, read)
		checkWCs(t, "scattered read", []uverbs.WorkCompletion{sendWC(a.qp, 3, uverbs.WCRDMARead, 500)}, pollWCs(t, a.cq, 1))
		got = append(append(append([]byte(nil), a.buf[8000:8100]...), a.buf[4096:4346]...), a.buf[6000:6150]...)
		wantBytes(t, "read", sent, got)
	}

	max := int(a.qp.Cap().MaxSendSGE)
	too := make([]uverbs.SGE, max+1)
	for i := range too {
		too[i] = a.sge(i, 1)
	}
	if err := a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, SGL: too}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("send with %d SGEs (max %d) = %v, want EINVAL", max+1, max, err)
	}
	if err := b.qp.PostRecv(&uverbs.RecvWR{SGL: make([]uverbs.SGE, b.qp.Cap().MaxRecvSGE+1)}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("receive with too many SGEs = %v, want EINVAL", err)
	}
	noMoreWCs(t, a.cq, "refused requests")
}

// TestUCWrites: UC carries RDMA writes (with and without immediate data)
// and sends; reads and atomics are refused before posting.
func TestUCWrites(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeUC})
	fillPattern(a.buf[:2000], 3)
	mustPostSend(t, a, &uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 2000)}, RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
	checkWCs(t, "UC write", []uverbs.WorkCompletion{sendWC(a.qp, 1, uverbs.WCRDMAWrite, 2000)}, pollWCs(t, a.cq, 1))
	// UC has no acknowledgements: the send completes when it is sent, so
	// wait for the data.
	waitBytes(t, "UC write", a.buf[:2000], b.buf[100:2100])

	mustPostRecv(t, b, 7, b.sge(4096, 16))
	mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: 0x5a5a,
		SGL: []uverbs.SGE{a.sge(0, 40)}, RemoteAddr: b.mr.Addr() + 6000, RKey: b.mr.RKey()})
	checkWCs(t, "UC write with imm", []uverbs.WorkCompletion{withImm(sendWC(a.qp, 2, uverbs.WCRDMAWrite, 40), 0)}, pollWCs(t, a.cq, 1))
	checkWCs(t, "UC receive", []uverbs.WorkCompletion{withImm(recvWC(b.qp, 7, uverbs.WCRecvRDMAWithImm, 40), 0x5a5a)}, pollWCs(t, b.cq, 1))
	wantBytes(t, "UC write with imm", a.buf[:40], b.buf[6000:6040])

	mustPostRecv(t, b, 8, b.sge(4096, 64))
	mustPostSend(t, a, &uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 64)}})
	checkWCs(t, "UC send", []uverbs.WorkCompletion{sendWC(a.qp, 3, uverbs.WCSend, 64)}, pollWCs(t, a.cq, 1))
	checkWCs(t, "UC receive", []uverbs.WorkCompletion{recvWC(b.qp, 8, uverbs.WCRecv, 64)}, pollWCs(t, b.cq, 1))
	wantBytes(t, "UC send", a.buf[:64], b.buf[4096:4160])

	for _, op := range []uverbs.WROpcode{uverbs.WRRDMARead, uverbs.WRAtomicFetchAndAdd, uverbs.WRAtomicCmpAndSwp} {
		err := a.qp.PostSend(&uverbs.SendWR{Opcode: op, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "UC") {
			t.Errorf("%v on UC = %v, want EINVAL naming UC", op, err)
		}
	}
	noMoreWCs(t, a.cq, "refused UC requests")
}

// waitBytes waits until got equals want (5 s at most).
func waitBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(want, got) {
		if time.Now().After(deadline) {
			wantBytes(t, what, want, got)
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestUDSeveralAHs sends datagrams from one UD QP through three address
// handles: to a QP on rxe1, to a QP on rxe0 itself (loopback), and to a
// second QP on rxe1 through another AH with other attributes. Each
// receiver sees the sender's QPN and, in the 40-byte GRH area, the IPv4
// header of the datagram with the sender's and its own addresses.
func TestUDSeveralAHs(t *testing.T) {
	o := pairOpts{typ: uverbs.QPTypeUD}
	a := newEnd(t, 0, o)
	dsts := []*end{newEnd(t, 1, o), newEnd(t, 0, o), newEnd(t, 1, o)}
	for _, e := range append([]*end{a}, dsts...) {
		connect(t, e, e) // UD: INIT, RTR, RTS; the destination is in each send
	}
	attrs := []uverbs.AHAttr{
		{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: dsts[0].gid, SGIDIndex: a.gidx, HopLimit: 64}},
		{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: dsts[1].gid, SGIDIndex: a.gidx, HopLimit: 64}},
		{IsGlobal: true, PortNum: 1, SL: 1, GRH: uverbs.GlobalRoute{DGID: dsts[2].gid, SGIDIndex: a.gidx, HopLimit: 5, TrafficClass: 0x20}},
	}
	const grh = 40
	for i, d := range dsts {
		ah, err := a.pd.CreateAH(attrs[i])
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Close()
		mustPostRecv(t, d, uint64(50+i), d.sge(0, grh+256))
		msg := fillPattern(a.buf[i*256:i*256+100+i], byte(i+1))
		wr := &uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: uint32(0x100 + i), Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(i*256, len(msg))}, AH: ah, RemoteQPN: d.qp.Num(), RemoteQKey: qkey}
		mustPostSend(t, a, wr)
		checkWCs(t, "UD send", []uverbs.WorkCompletion{withImm(sendWC(a.qp, uint64(i), uverbs.WCSend, len(msg)), 0)}, pollWCs(t, a.cq, 1))
		want := withImm(recvWC(d.qp, uint64(50+i), uverbs.WCRecv, grh+len(msg)), uint32(0x100+i))
		want.SrcQP = a.qp.Num()
		checkWCs(t, fmt.Sprintf("UD receive %d", i), []uverbs.WorkCompletion{want}, pollWCs(t, d.cq, 1))
		wantBytes(t, "datagram", msg, d.buf[grh:grh+len(msg)])
		// RoCE v2 over IPv4: the IPv4 header fills the GRH area's last 20 bytes.
		ip := d.buf[20:40]
		if ip[0] != 0x45 || !bytes.Equal(ip[12:16], a.gid[12:]) || !bytes.Equal(ip[16:20], d.gid[12:]) {
			t.Errorf("datagram %d: IPv4 header % x, want 45 ... from %v to %v", i, ip, a.gid, d.gid)
		}
		// The traffic class is the AH's; the hop limit is not: for RoCE
		// the kernel replaces it with the route's when it resolves the
		// AH's destination MAC.
		if tos := []byte{0, 0, 0x20}[i]; ip[1] != tos {
			t.Errorf("datagram %d: TOS %#x, want %#x (the AH's traffic class)", i, ip[1], tos)
		}
	}
	// The wrong Q_Key is dropped silently.
	ah, err := a.pd.CreateAH(attrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	mustPostRecv(t, dsts[0], 60, dsts[0].sge(0, grh+64))
	mustPostSend(t, a, &uverbs.SendWR{WRID: 9, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 8)}, AH: ah, RemoteQPN: dsts[0].qp.Num(), RemoteQKey: qkey + 1})
	checkWCs(t, "UD send with a wrong Q_Key", []uverbs.WorkCompletion{sendWC(a.qp, 9, uverbs.WCSend, 8)}, pollWCs(t, a.cq, 1))
	noMoreWCs(t, dsts[0].cq, "datagram with a wrong Q_Key")
}

// TestRecvBufferTooSmall: a message longer than the posted receive fails
// on both sides and moves the receiver to the error state, flushing the
// next receive.
func TestRecvBufferTooSmall(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	mustPostRecv(t, b, 1, b.sge(0, 10))
	mustPostRecv(t, b, 2, b.sge(100, 10))
	mustPostSend(t, a, &uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 100)}})
	rwc := pollWCs(t, b.cq, 2)
	swc := pollWCs(t, a.cq, 1)
	t.Logf("%s: receiver %+v, sender %+v", os.Getenv("PURERDMA_VM"), rwc, swc)
	if iwarp() {
		// siw reports the local length error, then flushes; the sender's
		// SEND completed once sent, before the receiver saw it.
		checkWCs(t, "receiver", []uverbs.WorkCompletion{recvErrWC(b.qp, 1, uverbs.WCLocLenErr), recvErrWC(b.qp, 2, uverbs.WCWRFlushErr)}, rwc)
		checkWCs(t, "sender", []uverbs.WorkCompletion{sendWC(a.qp, 3, uverbs.WCSend, 100)}, swc)
		wantBytes(t, "receive buffer", make([]byte, 10), b.buf[:10])
		return
	}
	// rxe (6.1 and 6.12) does not report the local length error the
	// verbs describe: its copy into the receive buffer fails with EINVAL,
	// which the responder treats as a malformed request (a local QP
	// operation error, NAK "remote operational error" to the sender).
	checkWCs(t, "receiver", []uverbs.WorkCompletion{errWC(b.qp, 1, uverbs.WCLocQPOpErr), errWC(b.qp, 2, uverbs.WCWRFlushErr)}, rwc)
	checkWCs(t, "sender", []uverbs.WorkCompletion{errWC(a.qp, 3, uverbs.WCRemOpErr)}, swc)
	wantBytes(t, "receive buffer", make([]byte, 10), b.buf[:10])
}

// TestBadRKey: an RDMA write or read with a wrong rkey completes with a
// remote access error; the QP is then in error and flushes the rest. On
// iWARP the responder answers with a TERMINATE instead (badRKeyIWARP).
func TestBadRKey(t *testing.T) {
	for _, op := range []uverbs.WROpcode{uverbs.WRRDMAWrite, uverbs.WRRDMARead, uverbs.WRAtomicFetchAndAdd} {
		t.Run(op.String(), func(t *testing.T) {
			a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
			bad := b.mr.RKey() ^ 0x5a
			if iwarp() {
				badRKeyIWARP(t, a, b, op, bad)
				return
			}
			err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: op, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: bad,
				Next: &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}})
			if err != nil {
				t.Fatal(err)
			}
			checkWCs(t, "bad rkey", []uverbs.WorkCompletion{
				errWC(a.qp, 1, uverbs.WCRemAccessErr), errWC(a.qp, 2, uverbs.WCWRFlushErr),
			}, pollWCs(t, a.cq, 2))
			attr, err := a.qp.Query(uverbs.QPAttrState)
			if err != nil {
				t.Fatal(err)
			}
			if attr.State != uverbs.QPStateErr {
				t.Errorf("after a remote access error the QP is %v, want ERR", attr.State)
			}
		})
	}
}

// badRKeyIWARP is TestBadRKey on iWARP, where a responder's access error
// ends the connection with a TERMINATE (RFC 5040), not a NAK that fails
// the requester's work request. What siw reports (Linux 6.1 and 6.12):
//
//   - RDMA WRITE: the write completes with success once sent, before the
//     responder saw the rkey. The responder finds the wrong key
//     (siw_proc_write), sends a TERMINATE and closes the connection,
//     which moves its QP to ERR and flushes its receives; the TERMINATE
//     ends the requester's connection too, which flushes the requester's
//     receives. Neither side gets an asynchronous event.
//   - RDMA READ: the responder checks the rkey when it sends the
//     response, fails with QP_REQ_ERR (an asynchronous event on its QP),
//     sends a TERMINATE and drops the connection, but leaves its QP in
//     RTS: its receives are flushed when user space moves it to ERR (as
//     rdmacm does when it processes the DISCONNECTED). The requester's
//     READ is flushed (WCWRFlushErr), with its receives.
//   - Atomics: refused at post (RDMAP has none).
//
// Each side learns of the error from a completion in error (and the
// READ's responder from its event); later posts are refused, as siw
// flushes nothing posted after the QP stopped.
func badRKeyIWARP(t *testing.T, a, b *end, op uverbs.WROpcode, bad uint32) {
	wr := &uverbs.SendWR{WRID: 1, Opcode: op, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: bad}
	if iwarpLacks(op) {
		wantNotSupported(t, a.qp.PostSend(wr))
		noMoreWCs(t, a.cq, "sender")
		return
	}
	wantA := append([]byte(nil), fillPattern(a.buf[:8], 1)...)
	wantB := append([]byte(nil), fillPattern(b.buf[:8], 2)...)
	mustPostRecv(t, a, 6, a.sge(100, 64))
	mustPostRecv(t, b, 5, b.sge(100, 64))
	mustPostSend(t, a, wr)
	first := sendWC(a.qp, 1, uverbs.WCRDMAWrite, 8)
	if op == uverbs.WRRDMARead {
		first = sendErrWC(a.qp, 1, uverbs.WCWRFlushErr, uverbs.WCRDMARead)
	}
	checkWCs(t, "requester", []uverbs.WorkCompletion{first, recvErrWC(a.qp, 6, uverbs.WCWRFlushErr)}, pollWCs(t, a.cq, 2))
	if op == uverbs.WRRDMARead {
		waitQPEvent(t, b, uverbs.EventQPReqErr)
		if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			t.Fatal(err)
		}
	}
	checkWCs(t, "responder", []uverbs.WorkCompletion{recvErrWC(b.qp, 5, uverbs.WCWRFlushErr)}, pollWCs(t, b.cq, 1))
	wantBytes(t, "requester's buffer", wantA, a.buf[:8])
	wantBytes(t, "responder's buffer", wantB, b.buf[:8])
	for _, e := range []*end{a, b} {
		refusedInERR(t, e.ctx.Device().Name+" PostSend after the error", e.qp.PostSend(&uverbs.SendWR{WRID: 10, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{e.sge(0, 8)}}))
		refusedInERR(t, e.ctx.Device().Name+" PostRecv after the error", e.qp.PostRecv(&uverbs.RecvWR{WRID: 11, SGL: []uverbs.SGE{e.sge(0, 64)}}))
		noMoreWCs(t, e.cq, e.ctx.Device().Name+" posts refused after the error")
	}
}

// waitQPEvent reads e's context's asynchronous events until one of type
// want for e's QP arrives, logging the others; its 30 s only end a hang.
func waitQPEvent(t *testing.T, e *end, want uverbs.AsyncEventType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := e.ctx.AsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v on %s's QP: %v", want, e.ctx.Device().Name, err)
		}
		if ev.Type == want && ev.QP == e.qp {
			return
		}
		t.Logf("other event: %v", ev)
	}
}

// TestPostToErrorQP: moving a QP to ERR flushes its posted receives;
// sends posted in ERR complete with WCWRFlushErr.
func TestPostToErrorQP(t *testing.T) {
	_, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	for i := range 3 {
		mustPostRecv(t, b, uint64(i), b.sge(i*64, 64))
	}
	if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	checkWCs(t, "flushed receives", []uverbs.WorkCompletion{
		recvErrWC(b.qp, 0, uverbs.WCWRFlushErr), recvErrWC(b.qp, 1, uverbs.WCWRFlushErr), recvErrWC(b.qp, 2, uverbs.WCWRFlushErr),
	}, pollWCs(t, b.cq, 3))
	if iwarp() {
		// siw flushes nothing posted after the QP entered ERR, so the
		// provider refuses such posts (docs/providers.md, siw).
		for _, err := range []error{
			b.qp.PostSend(&uverbs.SendWR{WRID: 10, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{b.sge(0, 8)}}),
			b.qp.PostRecv(&uverbs.RecvWR{WRID: 20, SGL: []uverbs.SGE{b.sge(0, 64)}}),
		} {
			var pe *uverbs.PostError
			if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "ERR") || errors.As(err, &pe) {
				t.Errorf("post in ERR = %v, want EINVAL naming ERR, nothing posted", err)
			}
		}
		noMoreWCs(t, b.cq, "posts refused in ERR")
		return
	}
	mustPostSend(t, b, &uverbs.SendWR{WRID: 10, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{b.sge(0, 8)},
		Next: &uverbs.SendWR{WRID: 11, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{b.sge(0, 8)}, RemoteAddr: 8, RKey: 1}})
	checkWCs(t, "sends posted in ERR", []uverbs.WorkCompletion{
		errWC(b.qp, 10, uverbs.WCWRFlushErr), errWC(b.qp, 11, uverbs.WCWRFlushErr),
	}, pollWCs(t, b.cq, 2))
	mustPostRecv(t, b, 20, b.sge(0, 64))
	checkWCs(t, "receive posted in ERR", []uverbs.WorkCompletion{errWC(b.qp, 20, uverbs.WCWRFlushErr)}, pollWCs(t, b.cq, 1))
}
