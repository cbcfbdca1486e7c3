package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// grhLen is the room a UD receive needs before the payload: the GRH, or
// on RoCE v2 over IPv4 the IPv4 header in its last 20 bytes.
const grhLen = 40

// TestUDExchange: a UD client resolves a UD listener and connects (the
// SIDR exchange): its ESTABLISHED carries the server's QP number, QKey
// and address, to which it sends a datagram; the server answers the
// sender found in the completion.
//
//purerdma:race
func TestUDExchange(t *testing.T) {
	testenv.NotIWARP(t, "iWARP has no UD QPs")
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceUDP)
	serverQPN := make(chan uint32, 1)
	var got string
	var gotSrcQP uint32
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		s := req.ID
		defer s.Close()
		qp, err := s.CreateQP(nil, qpConfig())
		if err != nil {
			return err
		}
		serverQPN <- qp.Num()
		buf := make([]byte, 256)
		mr, err := s.RegMsgs(buf)
		if err != nil {
			return err
		}
		defer mr.Close()
		if err := s.PostRecv(1, mr, 0, grhLen+64); err != nil {
			return err
		}
		if ev, err := s.AcceptContext(ctx, &rdmacm.ConnParam{PrivateData: []byte("ud accept")}); ev != nil || err != nil {
			return errors.Join(err, errors.New("a UD accept has no event to wait for"))
		}
		wc, err := s.GetRecvComp(ctx)
		if err != nil {
			return err
		}
		got, gotSrcQP = string(buf[grhLen:wc.ByteLen]), wc.SrcQP
		ah, err := s.PD().CreateAHFromWC(s.Port(), &wc, buf[:grhLen])
		if err != nil {
			return err
		}
		defer ah.Close()
		copy(buf[128:], "datagram from the server")
		if err := s.PostUDSend(2, mr, 128, 24, uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: wc.SrcQP}); err != nil {
			return err
		}
		_, err = s.GetSendComp(ctx)
		return err
	})
	defer wait()

	c := dialer(t, ctx, rdmacm.PortSpaceUDP, addr)
	qp, err := c.CreateQP(nil, qpConfig())
	if err != nil {
		t.Fatal(err)
	}
	if st := qp.State(); st != uverbs.QPStateRTS {
		t.Errorf("a new UD QP is in %v, want RTS", st)
	}
	mr, buf := regMsgs(t, c, 256)
	if err := c.PostRecv(10, mr, 0, grhLen+64); err != nil {
		t.Fatal(err)
	}
	ev, err := c.ConnectContext(ctx, &rdmacm.ConnParam{PrivateData: []byte("ud connect")})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != rdmacm.EventEstablished || ev.UD == nil {
		t.Fatalf("client got %v with UD %+v", ev, ev.UD)
	}
	if want := <-serverQPN; ev.UD.QPNum != want || ev.UD.QKey != rdmacm.UDPQKey {
		t.Errorf("UD param QPN %#x QKey %#x, want %#x and %#x", ev.UD.QPNum, ev.UD.QKey, want, rdmacm.UDPQKey)
	}
	if string(ev.PrivateData[:9]) != "ud accept" {
		t.Errorf("accept private data %q", ev.PrivateData)
	}
	ah, err := ev.UD.CreateAH(c.PD())
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	copy(buf[128:], "datagram from the client")
	wc := postThenReceive(t, ctx, c, func() error {
		return c.PostUDSend(11, mr, 128, 24, uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: ev.UD.QPNum})
	})
	wait()
	if s := string(buf[grhLen:wc.ByteLen]); s != "datagram from the server" {
		t.Errorf("client received %q", s)
	}
	if got != "datagram from the client" || gotSrcQP != qp.Num() {
		t.Errorf("server received %q from QP %#x, want the client's from %#x", got, gotSrcQP, qp.Num())
	}
}

// mcastMember is a UD ID bound to addr that joined group with a receive
// posted.
type mcastMember struct {
	id  *rdmacm.ID
	mr  *uverbs.MR
	buf []byte
	ud  *rdmacm.UDParam
}

func joinGroup(t testing.TB, ctx context.Context, addr netip.Addr, group netip.Addr, sendOnly bool) *mcastMember {
	t.Helper()
	id := newID(t, nil, rdmacm.PortSpaceUDP)
	if err := id.Bind(netip.AddrPortFrom(addr, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := id.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	m := &mcastMember{id: id}
	m.mr, m.buf = regMsgs(t, id, 256)
	if !sendOnly {
		if err := id.PostRecv(1, m.mr, 0, grhLen+64); err != nil {
			t.Fatal(err)
		}
	}
	ud, err := id.JoinMulticastContext(ctx, group, sendOnly)
	if err != nil {
		t.Fatalf("join %v from %v: %v", group, addr, err)
	}
	m.ud = ud
	return m
}

// TestMulticast: two members on rxe1 join a group; a send-only member on
// rxe0 sends a datagram to it, which both receive. After one leaves,
// only the other receives the next.
func TestMulticast(t *testing.T) {
	testenv.NotIWARP(t, "iWARP has no UD QPs or multicast")
	needDevices(t)
	ctx := testContext(t)
	group := netip.MustParseAddr("239.1.2.3")
	r1 := joinGroup(t, ctx, clientIP, group, false)
	r2 := joinGroup(t, ctx, clientIP, group, false)
	s := joinGroup(t, ctx, serverIP, group, true)
	if s.ud.QPNum != rdmacm.MulticastQPN || s.ud.QKey != rdmacm.UDPQKey {
		t.Errorf("group's UD param QPN %#x QKey %#x, want %#x and %#x", s.ud.QPNum, s.ud.QKey, rdmacm.MulticastQPN, rdmacm.UDPQKey)
	}
	ah, err := s.ud.CreateAH(s.id.PD())
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	send := func(msg string) {
		t.Helper()
		copy(s.buf[128:], msg)
		if err := s.id.PostUDSend(uint64(len(msg)), s.mr, 128, len(msg), uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: s.ud.QPNum}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.id.GetSendComp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(m *mcastMember, want string) {
		t.Helper()
		wc, err := m.id.GetRecvComp(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(m.buf[grhLen:wc.ByteLen]); got != want {
			t.Errorf("member %d received %q, want %q", m.id.Handle(), got, want)
		}
	}
	send("to the group")
	recv(r1, "to the group")
	recv(r2, "to the group")

	if err := r2.id.LeaveMulticast(group); err != nil {
		t.Fatal(err)
	}
	if err := r2.id.LeaveMulticast(group); err == nil {
		t.Error("leaving a group twice succeeded")
	}
	for _, m := range []*mcastMember{r1, r2} {
		if err := m.id.PostRecv(2, m.mr, 0, grhLen+64); err != nil {
			t.Fatal(err)
		}
	}
	send("after a leave")
	recv(r1, "after a leave")
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if wc, err := r2.id.GetRecvComp(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the member that left received %+v, %v", wc, err)
	}
}
