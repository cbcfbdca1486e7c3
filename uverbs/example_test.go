package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/purerdma/rdma/uverbs"
)

// side is one end of Example's connection: its device's objects.
type side struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	cq   *uverbs.CQ
	qp   *uverbs.QP
	mr   *uverbs.MR
	gid  uverbs.GID
	gidx int
}

func open(name string) *side {
	c, err := uverbs.Open(name, nil)
	if err != nil {
		log.Fatal(err)
	}
	s := &side{ctx: c}
	if s.pd, err = c.AllocPD(); err != nil {
		log.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(uverbs.CQConfig{Size: 16}); err != nil {
		log.Fatal(err)
	}
	s.qp, err = s.pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite); err != nil {
		log.Fatal(err)
	}
	gids, err := c.GIDTable(1)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range gids { // RoCE v2 over IPv4
		if g.Type == uverbs.GIDTypeRoCEv2 && g.GID.Addr().Is4() {
			s.gid, s.gidx = g.GID, g.Index
		}
	}
	return s
}

// connect moves s's QP through INIT and RTR to RTS towards peer's.
func (s *side) connect(peer *side) {
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPNum: peer.qp.Num(), MinRNRTimer: 12,
			AHAttr: uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: peer.gid, SGIDIndex: s.gidx, HopLimit: 64}}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 6, RNRRetry: 7},
			uverbs.QPAttrState | uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt |
				uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := s.qp.Modify(&st.attr, st.mask); err != nil {
			log.Fatal(err)
		}
	}
}

func (s *side) close() {
	for _, c := range []interface{ Close() error }{s.mr, s.qp, s.cq, s.pd, s.ctx} { // children first
		if err := c.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// wait polls cq until it has a completion: Poll makes no system call.
func wait(ctx context.Context, cq *uverbs.CQ) uverbs.WorkCompletion {
	wc := make([]uverbs.WorkCompletion, 1)
	for ctx.Err() == nil {
		if n, err := cq.Poll(wc); err != nil {
			log.Fatal(err)
		} else if n == 1 {
			if err := wc[0].Status.Err(); err != nil {
				log.Fatal(err)
			}
			return wc[0]
		}
	}
	log.Fatal(ctx.Err())
	return uverbs.WorkCompletion{}
}

// Two RC queue pairs on the test VM's two soft-RoCE devices, connected
// by hand (the exchange of QP numbers and GIDs that rdmacm automates),
// and one message from one to the other.
//
//purerdma:race
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := open("rxe0"), open("rxe1")
	defer a.close()
	defer b.close()
	a.connect(b)
	b.connect(a)

	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{{Addr: b.mr.Addr(), Length: 4096, LKey: b.mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	n := copy(a.mr.Bytes(), "hello over soft-RoCE")
	err := a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: a.mr.Addr(), Length: uint32(n), LKey: a.mr.LKey()}}})
	if err != nil {
		log.Fatal(err)
	}
	wait(ctx, a.cq)
	wc := wait(ctx, b.cq)
	fmt.Printf("%v of %d bytes: %q\n", wc.Opcode, wc.ByteLen, b.mr.Bytes()[:wc.ByteLen])
}
