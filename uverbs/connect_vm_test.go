package uverbs_test

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// rcPeerOf is what e's side tells its peer: its QP, PSN, RoCE v2 GID
// (read from sysfs, apart from the code under test) and MTU.
func rcPeerOf(t *testing.T, e *end, psn uint32) uverbs.RCPeer {
	t.Helper()
	pa, err := e.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return uverbs.RCPeer{QPNum: e.qp.Num(), PSN: psn, GID: e.gid, LID: pa.LID, MTU: pa.ActiveMTU}
}

// TestConnectRC connects two RC QPs with ConnectRC's defaults, one
// side from RESET and the other from INIT with a receive posted first,
// and checks what the QPs got and that sends, RDMA writes and reads
// and atomics work over them.
func TestConnectRC(t *testing.T) {
	a, b := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC}), newEnd(t, 1, pairOpts{typ: uverbs.QPTypeRC})
	if testenv.CurrentFabric().IWARP {
		standalone(t, a)
		standalone(t, b)
		// Refused before the kernel, which would move the QP to RTS
		// with no connection under it; the QP stays as it was.
		err := a.qp.ConnectRC(uverbs.RCPeer{QPNum: b.qp.Num(), PSN: 1}, nil)
		if !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(err.Error(), "connection manager") || a.qp.State() != uverbs.QPStateReset {
			t.Errorf("iWARP ConnectRC = %v, state %v; want ErrNotSupported naming the connection manager, RESET", err, a.qp.State())
		}
		testenv.NotIWARP(t, "the rest connects by QP modify (ConnectRC); iWARP QPs reach RTS only through the iWARP CM (the data path over CM-connected QPs: TestRCSendRecv and the rest)")
	}
	// b: INIT by hand (remote writes only), a receive, then ConnectRC.
	if err := b.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{b.sge(0, 64)}}); err != nil {
		t.Fatal(err)
	}
	ap, bp := rcPeerOf(t, a, 0x123), rcPeerOf(t, b, 0xabcdef)
	ao := uverbs.DefaultRCOptions()
	ao.SQPSN = ap.PSN
	bo := uverbs.DefaultRCOptions()
	bo.SQPSN = bp.PSN
	if err := a.qp.ConnectRC(bp, ao); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.ConnectRC(ap, bo); err != nil {
		t.Fatal(err)
	}

	da, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	pa, err := a.ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		e            *end
		peer         uverbs.RCPeer
		sqpsn        uint32
		access       uverbs.Access
		rdAtomicSome bool
	}{
		{a, bp, ap.PSN, uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic, true},
		{b, ap, bp.PSN, uverbs.AccessRemoteWrite, true},
	} {
		got, err := x.e.qp.Query(0)
		if err != nil {
			t.Fatal(err)
		}
		g := got.AHAttr
		switch {
		case got.State != uverbs.QPStateRTS:
			t.Errorf("%s: state %v, want RTS", x.e.ctx.Device().Name, got.State)
		case got.DestQPNum != x.peer.QPNum || got.RQPSN != x.peer.PSN || got.SQPSN != x.sqpsn:
			t.Errorf("%s: dest QP %#x, RQ PSN %#x, SQ PSN %#x; want %#x, %#x, %#x", x.e.ctx.Device().Name,
				got.DestQPNum, got.RQPSN, got.SQPSN, x.peer.QPNum, x.peer.PSN, x.sqpsn)
		case !g.IsGlobal || g.GRH.DGID != x.peer.GID || g.GRH.SGIDIndex != x.e.gidx || g.GRH.HopLimit != uverbs.DefaultRCHopLimit:
			t.Errorf("%s: address %+v; want global from GID index %d to %v, hop limit %d", x.e.ctx.Device().Name,
				g, x.e.gidx, x.peer.GID, uverbs.DefaultRCHopLimit)
		case got.PathMTU != min(pa.ActiveMTU, x.peer.MTU):
			t.Errorf("%s: path MTU %v, want %v", x.e.ctx.Device().Name, got.PathMTU, min(pa.ActiveMTU, x.peer.MTU))
		case got.Timeout != uverbs.DefaultRCTimeout || got.RetryCnt != uverbs.DefaultRCRetryCount || got.RNRRetry != 7 ||
			got.MinRNRTimer != uverbs.DefaultRCMinRNRTimer:
			t.Errorf("%s: timeout %d, retry %d, RNR retry %d, min RNR timer %d; want the defaults", x.e.ctx.Device().Name,
				got.Timeout, got.RetryCnt, got.RNRRetry, got.MinRNRTimer)
		case got.AccessFlags != x.access:
			t.Errorf("%s: access %v, want %v", x.e.ctx.Device().Name, got.AccessFlags, x.access)
		case got.MaxRdAtomic == 0 || got.MaxDestRdAtomic == 0 || int(got.MaxRdAtomic) > da.MaxQPInitRdAtom || int(got.MaxDestRdAtomic) > da.MaxQPRdAtom:
			t.Errorf("%s: reads in flight %d out, %d in; want the device's %d, %d", x.e.ctx.Device().Name,
				got.MaxRdAtomic, got.MaxDestRdAtomic, da.MaxQPInitRdAtom, da.MaxQPRdAtom)
		}
	}

	// b's receive, posted in INIT, takes a's send.
	copy(a.buf, "over ConnectRC")
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 14)}}); err != nil {
		t.Fatal(err)
	}
	waitWC(t, a.cq)
	if wc := waitWC(t, b.cq); wc.WRID != 1 || string(b.buf[:wc.ByteLen]) != "over ConnectRC" {
		t.Fatalf("receive %+v %q", wc, b.buf[:wc.ByteLen])
	}
	// a allows reads and atomics: b reads a's memory and adds to it.
	copy(a.buf[1024:], "read me")
	err = b.qp.PostSend(&uverbs.SendWR{WRID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{b.sge(2048, 7)}, RemoteAddr: a.mr.Addr() + 1024, RKey: a.mr.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	waitWC(t, b.cq)
	if !bytes.Equal(b.buf[2048:2055], []byte("read me")) {
		t.Errorf("RDMA read got %q", b.buf[2048:2055])
	}
	err = b.qp.PostSend(&uverbs.SendWR{WRID: 4, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{b.sge(4096, 8)}, RemoteAddr: a.mr.Addr() + 4096, RKey: a.mr.RKey(), CompareAdd: 5})
	if err != nil {
		t.Fatal(err)
	}
	waitWC(t, b.cq)
	if a.buf[4096] != 5 {
		t.Errorf("fetch and add left %d, want 5", a.buf[4096])
	}
	// b allows writes only: a's read fails at b, remotely.
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 5, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	if err != nil {
		t.Fatal(err)
	}
	var wc [1]uverbs.WorkCompletion
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		n, err := a.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion of the read within 10s")
		}
	}
	if wc[0].WRID != 5 || wc[0].Status == uverbs.WCSuccess {
		t.Errorf("RDMA read of a QP connected from INIT with remote writes only: %+v; want it refused, ConnectRC keeps the INIT access", wc[0])
	}
}

// TestConnectRCErrors: bad input and QPs ConnectRC cannot start from
// fail before any transition; a transition the kernel refuses is a
// *ConnectError naming it, and the QP stays where the error says.
func TestConnectRCErrors(t *testing.T) {
	testenv.NotIWARP(t, "ConnectRC's checks and transitions by QP modify; on iWARP ConnectRC is refused at once (TestConnectRC checks that)")
	a, b := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC}), newEnd(t, 1, pairOpts{typ: uverbs.QPTypeRC})
	bp := rcPeerOf(t, b, 1)
	ud := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeUD})
	for _, tc := range []struct {
		name string
		qp   *uverbs.QP
		peer uverbs.RCPeer
		opts func(*uverbs.RCOptions)
	}{
		{"UD QP", ud.qp, bp, nil},
		{"no GID on RoCE", a.qp, uverbs.RCPeer{QPNum: bp.QPNum}, nil},
		{"PSN past 24 bits", a.qp, uverbs.RCPeer{QPNum: bp.QPNum, PSN: 1 << 24, GID: bp.GID}, nil},
		{"retry count 8", a.qp, bp, func(o *uverbs.RCOptions) { o.RetryCount = 8 }},
		{"GID index 300", a.qp, bp, func(o *uverbs.RCOptions) { o.SGIDIndex = 300 }},
		{"port 2", a.qp, bp, func(o *uverbs.RCOptions) { o.Port = 2 }},
		{"no MTU", a.qp, bp, func(o *uverbs.RCOptions) { o.PathMTU = 9 }},
		{"empty GID index", a.qp, bp, func(o *uverbs.RCOptions) { o.SGIDIndex = 200 }},
	} {
		o := uverbs.DefaultRCOptions()
		if tc.opts != nil {
			tc.opts(o)
		}
		err := tc.qp.ConnectRC(tc.peer, o)
		var ce *uverbs.ConnectError
		if !errors.Is(err, syscall.EINVAL) || errors.As(err, &ce) {
			t.Errorf("%s: ConnectRC = %v, want EINVAL before any transition", tc.name, err)
		}
		if st := qpState(t, tc.qp); st != uverbs.QPStateReset {
			t.Errorf("%s: the QP went to %v", tc.name, st)
		}
		t.Logf("%s: %v", tc.name, err)
	}

	// A peer address nobody answers for passes the checks and fails in
	// the kernel at RTR, which cannot resolve its MAC address (ETIMEDOUT
	// or EHOSTUNREACH, depending on the routes): the QP stays in INIT.
	unroutable, err := uverbs.ParseGID("203.0.113.1") // TEST-NET-3
	if err != nil {
		t.Fatal(err)
	}
	err = a.qp.ConnectRC(uverbs.RCPeer{QPNum: bp.QPNum, PSN: bp.PSN, GID: unroutable}, nil)
	var ce *uverbs.ConnectError
	if !errors.As(err, &ce) || ce.From != uverbs.QPStateInit || ce.To != uverbs.QPStateRTR || ce.QPNum != a.qp.Num() || ce.Err == nil {
		t.Fatalf("ConnectRC to %v = %v, want a ConnectError INIT -> RTR", unroutable.Addr(), err)
	}
	t.Log(err)
	if st := qpState(t, a.qp); st != uverbs.QPStateInit {
		t.Fatalf("after the failed RTR the QP is in %v, want INIT", st)
	}
	da, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.MaxQPInitRdAtom >= 254 {
		t.Fatalf("%s takes %d reads in flight: no count above it to refuse", a.ctx.Device().Name, da.MaxQPInitRdAtom)
	}

	// More reads in flight than the device takes fail at RTS: the QP
	// stays in RTR, where ConnectRC no longer starts.
	o := uverbs.DefaultRCOptions()
	o.MaxRdAtomic = uint8(da.MaxQPInitRdAtom + 1)
	err = a.qp.ConnectRC(bp, o)
	if !errors.As(err, &ce) || ce.From != uverbs.QPStateRTR || ce.To != uverbs.QPStateRTS {
		t.Fatalf("ConnectRC with %d reads in flight = %v, want a ConnectError RTR -> RTS", o.MaxRdAtomic, err)
	}
	t.Log(err)
	if st := qpState(t, a.qp); st != uverbs.QPStateRTR {
		t.Fatalf("after the failed RTS the QP is in %v, want RTR", st)
	}
	if err := a.qp.ConnectRC(bp, nil); !errors.Is(err, syscall.EINVAL) || errors.As(err, &ce) {
		t.Errorf("ConnectRC of a QP in RTR = %v, want EINVAL before any transition", err)
	}
}
