package rdmacm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestRCConnect connects a client on rxe1 to a listener on rxe0 with the
// blocking calls and the package's shared Context, checks what each
// side learns about the other, and moves data both ways: sends, and an
// RDMA write and read of the memory the server announced in its accept
// private data.
//
//purerdma:race
func TestRCConnect(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	if d, ok := l.Device(); !ok || d.Name != serverDev {
		t.Errorf("listener's device %q (bound %v), want %s", d.Name, ok, serverDev)
	}
	connectData := []byte("hello from the client")
	const serverMsg = "reply from the server"

	type serverView struct {
		req         *rdmacm.Event
		est         *rdmacm.Event
		local, peer netip.AddrPort
		dev         string
		qp          uverbs.QPAttr
		got         string
	}
	var sv serverView
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		sv.req = req
		s := req.ID
		defer s.Close()
		if _, err := s.CreateQP(nil, qpConfig()); err != nil {
			return err
		}
		buf := make([]byte, 4096)
		mr, err := s.PD().RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
		if err != nil {
			return err
		}
		defer mr.Close()
		copy(buf[2048:], "server memory to read")
		if err := s.PostRecv(1, mr, 0, 64); err != nil {
			return err
		}
		var acceptData [16]byte // where the client may write and read
		binary.BigEndian.PutUint64(acceptData[0:], mr.Addr())
		binary.BigEndian.PutUint32(acceptData[8:], mr.RKey())
		p := rdmacm.DefaultConnParam()
		p.PrivateData = acceptData[:]
		sv.est, err = s.AcceptContext(ctx, p)
		gate.open()
		if err != nil {
			return err
		}
		wc, err := s.GetRecvComp(ctx)
		if err != nil {
			return err
		}
		sv.got = string(buf[:wc.ByteLen])
		copy(buf[64:], serverMsg)
		if err := s.PostSend(2, mr, 64, len(serverMsg), uverbs.SendSignaled); err != nil {
			return err
		}
		if _, err := s.GetSendComp(ctx); err != nil {
			return err
		}
		sv.local, _ = s.LocalAddr()
		sv.peer, _ = s.RemoteAddr()
		d, _ := s.Device()
		sv.dev = d.Name
		if sv.qp, err = s.QP().Query(uverbs.QPAttrMaxQPRdAtomic | uverbs.QPAttrMaxDestRdAtomic); err != nil {
			return err
		}
		// Wait for the client to finish with the server's memory.
		ev, err := s.Channel().Next(ctx)
		if err != nil {
			return err
		}
		if ev.Type != rdmacm.EventDisconnected {
			return fmt.Errorf("server: %v, want DISCONNECTED", ev)
		}
		if s := string(buf[1024:1045]); s != "written by the client" {
			return fmt.Errorf("server memory after the RDMA write: %q", s)
		}
		return nil
	})
	defer wait()

	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if d, ok := c.Device(); !ok || d.Name != clientDev || c.Port() != 1 {
		t.Errorf("client's device %q port %d (bound %v), want %s port 1", d.Name, c.Port(), ok, clientDev)
	}
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	mr, buf := regMsgs(t, c, 4096)
	if err := c.PostRecv(10, mr, 0, 64); err != nil {
		t.Fatal(err)
	}
	p := &rdmacm.ConnParam{PrivateData: connectData, InitiatorDepth: 2, ResponderResources: 4, RetryCount: 7, RNRRetryCount: 7}
	est, err := c.ConnectContext(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// InfiniBand and RoCE pad the accept's private data to the REP's
	// size; iWARP's MPA reply carries exactly what was sent (16 bytes).
	wantPD := rdmacm.MaxAcceptPrivateData
	if testenv.CurrentFabric().IWARP {
		wantPD = 16
	}
	if est.Type != rdmacm.EventEstablished || est.ID != c || len(est.PrivateData) != wantPD {
		t.Fatalf("client's event %v with %d bytes of private data, want ESTABLISHED with %d", est, len(est.PrivateData), wantPD)
	}
	raddr, rkey := binary.BigEndian.Uint64(est.PrivateData), binary.BigEndian.Uint32(est.PrivateData[8:])

	gate.wait(t, ctx)
	copy(buf[64:], "message from the client")
	if err := c.PostSend(11, mr, 64, 23, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.WRID != 11 || wc.Opcode != uverbs.WCSend {
		t.Fatalf("send completion %+v, %v", wc, err)
	}
	copy(buf[128:], "written by the client")
	if err := c.PostWrite(12, mr, 128, 21, uverbs.SendSignaled, rdmacm.Remote{Addr: raddr + 1024, RKey: rkey}); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.Opcode != uverbs.WCRDMAWrite {
		t.Fatalf("write completion %+v, %v", wc, err)
	}
	if err := c.PostRead(13, mr, 256, 21, uverbs.SendSignaled, rdmacm.Remote{Addr: raddr + 2048, RKey: rkey}); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.Opcode != uverbs.WCRDMARead {
		t.Fatalf("read completion %+v, %v", wc, err)
	}
	if got := string(buf[256:277]); got != "server memory to read" {
		t.Errorf("RDMA read %q", got)
	}
	wc, err := c.GetRecvComp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:wc.ByteLen]); got != serverMsg {
		t.Errorf("client received %q, want %q", got, serverMsg)
	}
	cq, err := c.QP().Query(uverbs.QPAttrMaxQPRdAtomic | uverbs.QPAttrMaxDestRdAtomic)
	if err != nil {
		t.Fatal(err)
	}
	local, err := c.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	remote, err := c.RemoteAddr()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DisconnectContext(ctx); err != nil {
		t.Fatal(err)
	}
	wait()

	if local.Addr() != clientIP || local.Port() == 0 || remote != addr {
		t.Errorf("client: local %v remote %v, want %v:* and %v", local, remote, clientIP, addr)
	}
	if sv.req == nil || sv.est == nil {
		t.Fatal("the server saw no request or no ESTABLISHED")
	}
	if sv.req.Type != rdmacm.EventConnectRequest || sv.req.Listener != l || sv.req.ID == l {
		t.Errorf("server's request %v: listener %p (want %p), ID %p", sv.req, sv.req.Listener, l, sv.req.ID)
	}
	wantReqPD := padded(connectData, rdmacm.MaxConnectPrivateData)
	if testenv.CurrentFabric().IWARP {
		wantReqPD = connectData // MPA carries the private data as sent
	}
	if diff := cmp.Diff(wantReqPD, sv.req.PrivateData); diff != "" {
		t.Errorf("connect private data at the server (-want +got):\n%s", diff)
	}
	// The request reports the client's resources from the server's side.
	if sv.req.Conn.ResponderResources != 2 || sv.req.Conn.InitiatorDepth != 4 {
		t.Errorf("request's conn info %+v, want responder resources 2 and initiator depth 4", sv.req.Conn)
	}
	if sv.est.Type != rdmacm.EventEstablished || sv.est.ID != sv.req.ID {
		t.Errorf("server's second event %v", sv.est)
	}
	if sv.got != "message from the client" {
		t.Errorf("server received %q", sv.got)
	}
	if sv.local != addr || sv.peer != local || sv.dev != serverDev {
		t.Errorf("server's connection: local %v peer %v on %s, want %v, %v on %s", sv.local, sv.peer, sv.dev, addr, local, serverDev)
	}
	// Accept and the connect response applied the agreed read/atomic
	// depths to the QPs.
	type depths struct{ MaxRdAtomic, MaxDestRdAtomic uint8 }
	wantC, wantS := depths{2, 4}, depths{4, 2}
	if testenv.CurrentFabric().IWARP {
		// siw's QUERY_QP reports the inbound read queue as
		// max_rd_atomic and the outbound one as max_dest_rd_atomic
		// (siw_query_qp, Linux 6.1 and 6.12): the same values, swapped.
		wantC, wantS = depths{4, 2}, depths{2, 4}
	}
	if diff := cmp.Diff(wantC, depths{cq.MaxRdAtomic, cq.MaxDestRdAtomic}); diff != "" {
		t.Errorf("client QP (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantS, depths{sv.qp.MaxRdAtomic, sv.qp.MaxDestRdAtomic}); diff != "" {
		t.Errorf("server QP (-want +got):\n%s", diff)
	}
}

// TestRCConnectOwnContext connects IDs whose QPs live on uverbs
// Contexts the caller opened, with the caller's PD and CQs.
func TestRCConnectOwnContext(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)

	// ownQP opens a Context on id's device and creates the ID's QP on it.
	type end struct {
		c   *uverbs.Context
		cq  *uverbs.CQ
		mr  *uverbs.MR
		buf []byte
	}
	ownQP := func(id *rdmacm.ID) (*end, error) {
		dev, ok := id.Device()
		if !ok {
			return nil, errors.New("the ID has no device")
		}
		c, err := dev.Open(nil)
		if err != nil {
			return nil, err
		}
		e := &end{c: c, buf: make([]byte, 256)}
		pd, err := c.AllocPD()
		if err == nil {
			e.cq, err = c.CreateCQ(uverbs.CQConfig{Size: 32})
		}
		if err == nil {
			cfg := qpConfig()
			cfg.SendCQ, cfg.RecvCQ = e.cq, e.cq
			_, err = id.CreateQP(pd, cfg)
		}
		if err == nil {
			e.mr, err = pd.RegMR(e.buf, uverbs.AccessLocalWrite)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
		return e, nil
	}
	poll := func(cq *uverbs.CQ) (uverbs.WorkCompletion, error) {
		var wc [1]uverbs.WorkCompletion
		for ctx.Err() == nil {
			n, err := cq.Poll(wc[:])
			if err != nil || n == 1 {
				return wc[0], errors.Join(err, wc[0].Status.Err())
			}
			time.Sleep(100 * time.Microsecond)
		}
		return wc[0], ctx.Err()
	}

	var got string
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		s := req.ID
		e, err := ownQP(s)
		if err != nil {
			s.Close()
			return err
		}
		defer e.c.Close() // after the ID: the QP is the ID's to destroy
		defer s.Close()
		if err := s.QP().PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{{Addr: e.mr.Addr(), Length: 64, LKey: e.mr.LKey()}}}); err != nil {
			return err
		}
		_, err = s.AcceptContext(ctx, nil)
		gate.open()
		if err != nil {
			return err
		}
		wc, err := poll(e.cq)
		if err != nil {
			return err
		}
		got = string(e.buf[:wc.ByteLen])
		_, err = s.GetRecvComp(ctx)
		if !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("GetRecvComp on the caller's CQ = %v, want EINVAL", err)
		}
		ev, err := s.Channel().Next(ctx)
		if err == nil && ev.Type != rdmacm.EventDisconnected {
			err = fmt.Errorf("server: %v, want DISCONNECTED", ev)
		}
		return err
	})
	defer wait()

	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	e, err := ownQP(c)
	if err != nil {
		t.Fatal(err)
	}
	defer e.c.Close()
	defer c.Close()
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	gate.wait(t, ctx)
	copy(e.buf[128:], "own context")
	if err := c.QP().PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: e.mr.Addr() + 128, Length: 11, LKey: e.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := poll(e.cq); err != nil {
		t.Fatal(err)
	}
	if err := c.DisconnectContext(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	if got != "own context" {
		t.Errorf("server received %q", got)
	}
	if err := e.mr.Close(); err != nil {
		t.Error(err)
	}
}

// TestPrivateData sends the longest private data each step carries in
// each port space, and checks that one byte more is refused before the
// kernel sees it: the same call with the right length then succeeds,
// which it could not after a call the kernel had taken.
func TestPrivateData(t *testing.T) {
	needDevices(t)
	for _, tc := range []struct {
		ps  rdmacm.PortSpace
		op  string // connect, accept or reject
		max int
	}{
		{rdmacm.PortSpaceTCP, "connect", 56},
		{rdmacm.PortSpaceTCP, "accept", 196},
		{rdmacm.PortSpaceTCP, "reject", 148},
		{rdmacm.PortSpaceUDP, "connect", 180},
		{rdmacm.PortSpaceUDP, "accept", 136},
		{rdmacm.PortSpaceUDP, "reject", 136},
	} {
		t.Run(fmt.Sprintf("%v/%s", tc.ps, tc.op), func(t *testing.T) {
			if tc.ps == rdmacm.PortSpaceUDP {
				testenv.NotIWARP(t, "PortSpaceUDP makes UD QPs")
			}
			ctx := testContext(t)
			l, addr := listen(t, tc.ps)
			data := pattern(tc.max, 1)
			long := pattern(tc.max+1, 1)
			var serverGot []byte
			wait := goRun(t, func() error {
				req, err := l.GetRequest(ctx)
				if err != nil {
					return err
				}
				s := req.ID
				defer s.Close()
				serverGot = req.PrivateData
				if _, err := s.CreateQP(nil, qpConfig()); err != nil {
					return err
				}
				switch tc.op {
				case "connect", "accept":
					p := rdmacm.DefaultConnParam()
					if tc.op == "accept" {
						p.PrivateData = long
						if err := s.Accept(p); !errors.Is(err, syscall.EINVAL) {
							return fmt.Errorf("accept with %d bytes = %v, want EINVAL", len(long), err)
						}
						p.PrivateData = data
					}
					if _, err := s.AcceptContext(ctx, p); err != nil {
						return err
					}
				case "reject":
					if err := s.Reject(long); !errors.Is(err, syscall.EINVAL) {
						return fmt.Errorf("reject with %d bytes = %v, want EINVAL", len(long), err)
					}
					return s.Reject(data)
				}
				if tc.ps == rdmacm.PortSpaceTCP {
					ev, err := s.Channel().Next(ctx)
					if err == nil && ev.Type != rdmacm.EventDisconnected {
						err = fmt.Errorf("server: %v, want DISCONNECTED", ev)
					}
					return err
				}
				return nil
			})
			defer wait()

			c := dialer(t, ctx, tc.ps, addr)
			if _, err := c.CreateQP(nil, qpConfig()); err != nil {
				t.Fatal(err)
			}
			p := rdmacm.DefaultConnParam()
			if tc.op == "connect" {
				p.PrivateData = long
				if err := c.Connect(p); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), fmt.Sprint(tc.max)) {
					t.Fatalf("connect with %d bytes = %v, want EINVAL naming the limit %d", len(long), err, tc.max)
				}
				p.PrivateData = data
			}
			ev, err := c.ConnectContext(ctx, p)
			switch tc.op {
			case "connect":
				if err != nil {
					t.Fatal(err)
				}
				if tc.ps == rdmacm.PortSpaceTCP {
					if err := c.DisconnectContext(ctx); err != nil {
						t.Fatal(err)
					}
				}
				wait()
				if diff := cmp.Diff(data, serverGot); diff != "" {
					t.Errorf("private data at the server (-want +got):\n%s", diff)
				}
			case "accept":
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(data, ev.PrivateData); diff != "" {
					t.Errorf("private data at the client (-want +got):\n%s", diff)
				}
			case "reject":
				var ee *rdmacm.EventError
				if !errors.As(err, &ee) || !errors.Is(err, rdmacm.ErrRejected) || !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("connect to a rejecting server = %v, want an EventError matching ErrRejected and ECONNREFUSED", err)
				}
				want := rdmacm.EventRejected
				if tc.ps == rdmacm.PortSpaceUDP {
					want = rdmacm.EventUnreachable // a SIDR reply with the reject status
				}
				if ee.Event.Type != want || !ee.Event.Refused() {
					t.Errorf("reject arrived as %v (refused %v), want %v", ee.Event, ee.Event.Refused(), want)
				}
				wantReason := rdmacm.RejectConsumerDefined
				if testenv.CurrentFabric().IWARP {
					wantReason = -rdmacm.RejectReason(syscall.ECONNRESET)
				}
				if tc.ps == rdmacm.PortSpaceTCP && ee.Event.RejectReason() != wantReason {
					t.Errorf("reject reason %v, want %v", ee.Event.RejectReason(), wantReason)
				}
				if diff := cmp.Diff(data, ee.Event.PrivateData); diff != "" {
					t.Errorf("reject private data at the client (-want +got):\n%s", diff)
				}
				return
			}
			if tc.ps == rdmacm.PortSpaceTCP && tc.op == "accept" {
				if err := c.DisconnectContext(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestUnreachable asserts what a connection attempt to nothing gets: an
// address no host answers ARP for, and ports no listener has. The
// verdict must be the kernel's (ADDR_ERROR after the 500 ms resolve
// timeout the test passes, or the refusal), never the test context's
// deadline; how long it took is logged, not asserted.
func TestUnreachable(t *testing.T) {
	needDevices(t)
	for _, tc := range []struct {
		name  string
		ps    rdmacm.PortSpace
		dst   netip.AddrPort
		event rdmacm.EventType
		is    []error
		max   time.Duration
	}{
		{"no host", rdmacm.PortSpaceTCP, netip.MustParseAddrPort("198.18.0.99:7471"),
			rdmacm.EventAddrError, []error{syscall.ETIMEDOUT}, 2 * time.Second},
		{"no listener RC", rdmacm.PortSpaceTCP, netip.AddrPortFrom(serverIP, 9),
			rdmacm.EventRejected, []error{rdmacm.ErrRejected, rdmacm.ErrNoListener, syscall.ECONNREFUSED}, 2 * time.Second},
		{"no listener UD", rdmacm.PortSpaceUDP, netip.AddrPortFrom(serverIP, 9),
			rdmacm.EventUnreachable, []error{rdmacm.ErrRejected, rdmacm.ErrNoListener, syscall.ECONNREFUSED}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ps == rdmacm.PortSpaceUDP {
				testenv.NotIWARP(t, "PortSpaceUDP makes UD QPs")
			}
			ctx := testContext(t)
			c := newID(t, nil, tc.ps)
			start := time.Now()
			// The asynchronous call with the kernel's timeout, then the
			// channel: the kernel's verdict, not the context's.
			if err := c.ResolveAddr(clientAP, tc.dst, 500*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			ev, err := c.Channel().Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == rdmacm.EventAddrResolved {
				if err := c.ResolveRouteContext(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := c.CreateQP(nil, qpConfig()); err != nil {
					t.Fatal(err)
				}
				var ee *rdmacm.EventError
				_, err := c.ConnectContext(ctx, nil)
				if testenv.CurrentFabric().IWARP && tc.event == rdmacm.EventRejected {
					// iWARP's TCP connect is refused inside Connect.
					for _, is := range tc.is {
						if !errors.Is(err, is) {
							t.Errorf("connect = %v, want an error matching %v", err, is)
						}
					}
					if err != nil && !strings.Contains(err.Error(), "connection refused: nothing listens on "+tc.dst.String()) {
						t.Errorf("the refusal reads %q; want it to say nothing listens on %v", err, tc.dst)
					}
					return
				}
				if !errors.As(err, &ee) {
					t.Fatalf("connect = %v, want an EventError", err)
				}
				ev = ee.Event
			}
			d := time.Since(start)
			if ev.Type != tc.event || ev.ID != c {
				t.Errorf("got %v, want %v", ev, tc.event)
			}
			err = ev.Err()
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("%v does not match %v", err, target)
				}
			}
			// Logged, not asserted: a loaded machine stretches any duration.
			t.Logf("%v after %v (typically under %v)", err, d, tc.max)
			if ee, ok := err.(*rdmacm.EventError); ok && tc.event != rdmacm.EventAddrError {
				ee.Op = "ConnectContext"
				if msg := ee.Error(); !strings.Contains(msg, "connection refused: nothing listens on "+tc.dst.String()) {
					t.Errorf("the refusal reads %q; want it to say nothing listens on %v", msg, tc.dst)
				}
			}
		})
	}
}

// TestDisconnect: when one side disconnects, the other gets
// DISCONNECTED, and once it answers with its own Disconnect, so does
// the first.
//
//purerdma:race
func TestDisconnect(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	c, s := connectedPair(t, ctx)
	start := time.Now()
	if err := s.Disconnect(); err != nil {
		t.Fatalf("server's disconnect: %v", err)
	}
	// librdmacm's rdma_disconnect: ERR on InfiniBand and RoCE, SQD
	// (a graceful close of the TCP stream) on iWARP.
	wantSt := uverbs.QPStateErr
	if testenv.CurrentFabric().IWARP {
		wantSt = uverbs.QPStateSQD
	}
	if st := s.QP().State(); st != wantSt {
		t.Errorf("server QP in %v after Disconnect, want %v", st, wantSt)
	}
	for _, side := range []*rdmacm.ID{c, s} {
		ev, err := side.Channel().Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != rdmacm.EventDisconnected || ev.ID != side {
			t.Fatalf("got %v, want DISCONNECTED of ID %d", ev, side.Handle())
		}
		if side == c {
			if err := c.Disconnect(); err != nil { // the answer completes the server's
				t.Fatal(err)
			}
		}
	}
	// Logged, not asserted: a loaded machine stretches any duration.
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("disconnecting took %v", d)
	} else {
		t.Logf("both sides disconnected in %v", d)
	}
}

// TestTimewaitExit: after both sides disconnected, IDs kept open get
// TIMEWAIT_EXIT once the connection's time-wait ends (the kernel's CM
// derives it from the ack timeout; seconds at most here).
//
//purerdma:race
func TestTimewaitExit(t *testing.T) {
	testenv.NotIWARP(t, "iWARP's CM has no TIMEWAIT_EXIT (the TCP stack keeps TIME_WAIT itself)")
	needDevices(t)
	ctx := testContext(t)
	c, s := connectedPair(t, ctx)
	if err := c.Disconnect(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, side := range []*rdmacm.ID{s, c} {
		for {
			ev, err := side.Channel().Next(ctx)
			if err != nil {
				t.Fatalf("ID %d: no TIMEWAIT_EXIT after %v: %v", side.Handle(), time.Since(start), err)
			}
			if ev.Type == rdmacm.EventDisconnected && ev.ID == side {
				if side == s { // the answer completes the client's disconnect
					if err := s.Disconnect(); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			if ev.Type != rdmacm.EventTimewaitExit || ev.ID != side {
				t.Fatalf("got %v, want TIMEWAIT_EXIT of ID %d", ev, side.Handle())
			}
			t.Logf("ID %d: TIMEWAIT_EXIT %v after the disconnect", side.Handle(), time.Since(start))
			break
		}
	}
}

// connectedPair is a connected RC client and the server's ID for it,
// each with its own channel; the test closes both.
func connectedPair(t testing.TB, ctx context.Context) (c, s *rdmacm.ID) {
	t.Helper()
	return connectedPairWith(t, ctx, qpConfig())
}

// connectedPairWith is connectedPair with QPs of cfg.
func connectedPairWith(t testing.TB, ctx context.Context, cfg uverbs.QPConfig) (c, s *rdmacm.ID) {
	t.Helper()
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	accepted := make(chan *rdmacm.ID, 1)
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		if _, err := req.ID.CreateQP(nil, cfg); err != nil {
			req.ID.Close()
			return err
		}
		if _, err := req.ID.AcceptContext(ctx, nil); err != nil {
			req.ID.Close()
			return err
		}
		accepted <- req.ID
		return nil
	})
	c = connectedWith(t, ctx, addr, cfg)
	wait()
	if t.Failed() {
		t.FailNow()
	}
	s = <-accepted
	t.Cleanup(func() { s.Close() })
	return c, s
}

// TestDisconnectOnPeerKill: when the peer process dies, the kernel
// destroys its IDs and the surviving side gets DISCONNECTED.
func TestDisconnectOnPeerKill(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	peer := startPeer(t, "connect", helperAddrEnv+"="+addr.String())
	req, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := req.ID
	defer s.Close()
	if _, err := s.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	peer.expect(t, "established")
	peer.kill(t)
	start := time.Now()
	ev, err := s.Channel().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != rdmacm.EventDisconnected || ev.ID != s {
		t.Fatalf("after the peer died: %v, want DISCONNECTED", ev)
	}
	// Logged, not asserted: a loaded machine stretches any duration.
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("DISCONNECTED took %v", d)
	} else {
		t.Logf("DISCONNECTED %v after the kill", d)
	}
}

// TestListenerKeepsDeviceContext serves two connections one after the
// other, each closed before the next: the listener keeps the shared
// device Context its first connection opened, so the second reuses it
// instead of opening the device again, and closing the listener
// releases it.
func TestListenerKeepsDeviceContext(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	var seen [2]*uverbs.Context
	for round := range seen {
		var s *rdmacm.ID
		wait := goRun(t, func() error {
			req, err := l.GetRequest(ctx)
			if err != nil {
				return err
			}
			s = req.ID
			if _, err := s.CreateQP(nil, qpConfig()); err != nil {
				return err
			}
			if seen[round], err = s.Context(); err != nil {
				return err
			}
			_, err = s.AcceptContext(ctx, nil)
			return err
		})
		c := connected(t, ctx, addr)
		wait()
		if s != nil {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if seen[0] != seen[1] {
		t.Errorf("the second connection got a new Context %p, the first had %p", seen[1], seen[0])
	}
	pd, err := seen[0].AllocPD()
	if err != nil {
		t.Fatalf("the kept Context is unusable while the listener is open: %v", err)
	}
	pd.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if pd, err := seen[0].AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		if err == nil {
			pd.Close()
		}
		t.Errorf("AllocPD after the listener closed: %v, want ErrClosed", err)
	}
}

// TestBlockingStepWhileChannelWatched: a blocking step of an ID whose
// channel another goroutine waits on (a Next watching for the peer's
// disconnect) is refused before it starts, with an error matching
// ErrBusy, and nothing happens: the QP stays in RTS and the peer gets
// no DISCONNECTED. So is one whose context is already done. Once the
// watcher is gone, the same call disconnects.
func TestBlockingStepWhileChannelWatched(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	c, s := connectedPair(t, ctx)

	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.DisconnectContext(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("DisconnectContext with a canceled context = %v, want context.Canceled", err)
	}
	if st := c.QP().State(); st != uverbs.QPStateRTS {
		t.Fatalf("QP in %v after a DisconnectContext refused for its context, want RTS", st)
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		_, err := c.Channel().Next(watchCtx)
		watched <- err
	}()
	for !c.Channel().Waiting() {
		runtime.Gosched()
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"DisconnectContext", func() error { return c.DisconnectContext(ctx) }},
		{"ConnectContext", func() error { _, err := c.ConnectContext(ctx, nil); return err }},
		{"ResolveRouteContext", func() error { return c.ResolveRouteContext(ctx) }},
	}
	for _, st := range steps {
		err := st.run()
		if !errors.Is(err, rdmacm.ErrBusy) {
			t.Errorf("%s while another goroutine waits on the channel = %v, want ErrBusy", st.name, err)
		} else {
			t.Logf("%s: %v", st.name, err)
		}
	}
	if st := c.QP().State(); st != uverbs.QPStateRTS {
		t.Fatalf("QP in %v after refused steps, want RTS (the disconnect ran)", st)
	}
	stopWatch()
	if err := <-watched; !errors.Is(err, context.Canceled) {
		t.Fatalf("the watcher's Next = %v, want context.Canceled (an event came: the step ran)", err)
	}

	// Nobody else waits now: the same call disconnects, and returns when
	// the server answers.
	disconnected := make(chan error, 1)
	go func() { disconnected <- c.DisconnectContext(ctx) }()
	ev, err := s.Channel().Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("server's first event %v, want DISCONNECTED", ev)
	}
	if err := s.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := <-disconnected; err != nil {
		t.Fatalf("DisconnectContext once nobody else waits: %v", err)
	}
}
