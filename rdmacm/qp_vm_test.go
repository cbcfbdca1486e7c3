package rdmacm_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// acceptOne runs a server that accepts one connection with a QP from
// CreateQP (on an SRQ of the ID's when srq is set), receives one message
// and returns it, then waits for the client's disconnect. It opens gate
// once AcceptContext returned.
//
// received returns once the message is in got. A client must call it
// before it disconnects: the server accepts on the client's RTU, and
// a DREQ sent right after the RTU can reach the server's CM first, which
// then reports DISCONNECTED in place of ESTABLISHED (seen once in the
// VM).
func acceptOne(t testing.TB, l *rdmacm.ID, srq bool, got *string, gate acceptGate) (wait, received func()) {
	ctx := testContext(t)
	rcvd := make(chan struct{})
	return goRun(t, func() error {
			req, err := l.GetRequest(ctx)
			if err != nil {
				return err
			}
			s := req.ID
			defer s.Close()
			if srq {
				if _, err := s.CreateSRQ(nil, uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1}); err != nil {
					return err
				}
			}
			mr, err := s.RegMsgs(make([]byte, 64))
			if err != nil {
				return err
			}
			defer mr.Close()
			if srq { // before the QP exists: the receive goes to the SRQ
				if err := s.PostRecv(1, mr, 0, 64); err != nil {
					return err
				}
			}
			if _, err := s.CreateQP(nil, qpConfig()); err != nil {
				return err
			}
			if !srq {
				if err := s.PostRecv(1, mr, 0, 64); err != nil {
					return err
				}
			}
			if req.Conn.SRQ {
				return errors.New("the request claims the client has an SRQ")
			}
			_, err = s.AcceptContext(ctx, nil)
			gate.open()
			if err != nil {
				return err
			}
			wc, err := s.GetRecvComp(ctx)
			if err != nil {
				return err
			}
			*got = string(mr.Bytes()[:wc.ByteLen])
			close(rcvd)
			ev, err := s.Channel().Next(ctx)
			if err == nil && ev.Type != rdmacm.EventDisconnected {
				err = fmt.Errorf("server: %v, want DISCONNECTED", ev)
			}
			if err == nil {
				err = s.Disconnect()
			}
			return err
		}), func() {
			select {
			case <-rcvd:
			case <-ctx.Done():
				t.Fatal("the server did not receive the message")
			}
		}
}

// TestEstablish drives a client whose QP the caller manages: the QP moves
// with InitQPAttr's attributes, CONNECT_RESPONSE reports the accept, and
// Establish completes the connection.
//
//purerdma:race
func TestEstablish(t *testing.T) {
	testenv.NotIWARP(t, "iWARP has no CONNECT_RESPONSE: its CM moves the QP to RTS and reports ESTABLISHED")
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	var got string
	gate := newAcceptGate()
	wait, received := acceptOne(t, l, false, &got, gate)
	defer wait()

	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	vc, err := c.Context()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := vc.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	cq, err := vc.CreateCQ(uverbs.CQConfig{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	cfg := qpConfig()
	cfg.Type, cfg.SendCQ, cfg.RecvCQ = uverbs.QPTypeRC, cq, cq
	qp, err := pd.CreateQP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	move := func(state uverbs.QPState) {
		t.Helper()
		a, mask, err := c.InitQPAttr(state)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Modify(a, mask); err != nil {
			t.Fatalf("%v: %v", state, err)
		}
	}
	move(uverbs.QPStateInit)
	if err := c.Connect(nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Connect(nil) without a QP from CreateQP = %v, want EINVAL", err)
	}
	if err := c.Establish(); err == nil {
		t.Error("Establish before the peer's accept succeeded")
	}
	p := rdmacm.DefaultConnParam()
	p.QPNum = qp.Num()
	ev, err := c.ConnectContext(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != rdmacm.EventConnectResponse {
		t.Fatalf("got %v, want CONNECT_RESPONSE", ev)
	}
	move(uverbs.QPStateInit) // the CM's access flags
	move(uverbs.QPStateRTR)
	move(uverbs.QPStateRTS)
	if err := c.Establish(); err != nil {
		t.Fatal(err)
	}
	buf := []byte("established by hand")
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	gate.wait(t, ctx)
	if err := qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: uint32(len(buf)), LKey: mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	var wc [1]uverbs.WorkCompletion
	for n := 0; n == 0 && ctx.Err() == nil; {
		if n, err = cq.Poll(wc[:]); err != nil {
			t.Fatal(err)
		}
	}
	if wc[0].Status != uverbs.WCSuccess {
		t.Fatalf("send completion %v", wc[0].Status)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	received()
	if err := c.DisconnectContext(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	if got != string(buf) {
		t.Errorf("server received %q", got)
	}
}

// TestSRQ: the server's QP takes its receives from the ID's SRQ, posted
// before the QP existed.
func TestSRQ(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	var got string
	gate := newAcceptGate()
	wait, received := acceptOne(t, l, true, &got, gate)
	defer wait()
	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	mr, buf := regMsgs(t, c, 64)
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	gate.wait(t, ctx)
	n := copy(buf, "through the SRQ")
	if err := c.PostSend(1, mr, 0, n, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSendComp(ctx); err != nil {
		t.Fatal(err)
	}
	received()
	if err := c.DisconnectContext(ctx); err != nil {
		t.Fatal(err)
	}
	wait()
	if got != "through the SRQ" {
		t.Errorf("server received %q", got)
	}
}
