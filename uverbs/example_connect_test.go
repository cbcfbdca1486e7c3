package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/purerdma/rdma/uverbs"
)

// rcSide is one end of the examples below: a device's context, and on
// it a CQ with a completion channel (to sleep on), an RC QP and a
// registered buffer.
type rcSide struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	ch  *uverbs.CompChannel
	cq  *uverbs.CQ
	qp  *uverbs.QP
	mr  *uverbs.MR
}

func newRCSide(dev string) *rcSide {
	c, err := uverbs.Open(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	s := &rcSide{ctx: c}
	if s.pd, err = c.AllocPD(); err != nil {
		log.Fatal(err)
	}
	if s.ch, err = c.CreateCompChannel(); err != nil {
		log.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(uverbs.CQConfig{Size: 16, Channel: s.ch}); err != nil {
		log.Fatal(err)
	}
	s.qp, err = s.pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead); err != nil {
		log.Fatal(err)
	}
	return s
}

// me is what the side tells its peer: its QP number, its first PSN and
// the GID it sends from.
func (s *rcSide) me(psn uint32) uverbs.RCPeer {
	g, err := s.ctx.RoCEv2GID(1, "") // RoCE v2 over IPv4, when the port has an IPv4 address
	if err != nil {
		log.Fatal(err)
	}
	pa, err := s.ctx.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	return uverbs.RCPeer{QPNum: s.qp.Num(), PSN: psn, GID: g.GID, LID: pa.LID, MTU: pa.ActiveMTU}
}

func (s *rcSide) close() {
	for _, c := range []interface{ Close() error }{s.mr, s.qp, s.cq, s.ch, s.pd, s.ctx} { // children first
		if err := c.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// Connecting two RC queue pairs by hand: each side sends the other its
// QP number, PSN, GID and MTU (here they are in one program; over a
// network, a TCP connection carries them), and ConnectRC moves each QP
// through INIT and RTR to RTS with the defaults. On the test VM's two
// soft-RoCE devices.
func ExampleQP_ConnectRC() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := newRCSide("rxe0"), newRCSide("rxe1")
	defer a.close()
	defer b.close()

	aInfo, bInfo := a.me(1000), b.me(2000)
	ao, bo := uverbs.DefaultRCOptions(), uverbs.DefaultRCOptions()
	ao.SQPSN, bo.SQPSN = aInfo.PSN, bInfo.PSN // the PSNs each side announced
	if err := a.qp.ConnectRC(bInfo, ao); err != nil {
		log.Fatal(err) // a *uverbs.ConnectError names the transition that failed
	}
	if err := b.qp.ConnectRC(aInfo, bo); err != nil {
		log.Fatal(err)
	}

	// b receives into its buffer, a sends from its own.
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{{Addr: b.mr.Addr(), Length: 4096, LKey: b.mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	n := copy(a.mr.Bytes(), "connected by ConnectRC")
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: a.mr.Addr(), Length: uint32(n), LKey: a.mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := b.cq.PollContext(ctx, wc); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v: %q\n", wc[0].Opcode, b.mr.Bytes()[:wc[0].ByteLen])
}

// A goroutine that handles completions and sleeps while there are
// none: PollContext returns what the CQ has, or arms it and waits on
// its completion channel, in the runtime poller, until a completion
// comes or ctx ends.
func ExampleCQ_PollContext() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := newRCSide("rxe0"), newRCSide("rxe1")
	defer a.close()
	defer b.close()
	if err := a.qp.ConnectRC(b.me(0), nil); err != nil { // nil: DefaultRCOptions, send PSN 0
		log.Fatal(err)
	}
	if err := b.qp.ConnectRC(a.me(0), nil); err != nil {
		log.Fatal(err)
	}

	const msgs = 3
	done := make(chan int)
	go func() { // b's receiver
		wc := make([]uverbs.WorkCompletion, 4)
		got := 0
		for got < msgs {
			n, err := b.cq.PollContext(ctx, wc)
			if err != nil {
				log.Fatal(err) // ctx.Err(), or ErrClosed
			}
			for _, c := range wc[:n] {
				if err := c.Status.Err(); err != nil {
					log.Fatal(err)
				}
			}
			got += n
		}
		done <- got
	}()
	for i := range msgs {
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{{Addr: b.mr.Addr(), Length: 4096, LKey: b.mr.LKey()}}}); err != nil {
			log.Fatal(err)
		}
	}
	wc := make([]uverbs.WorkCompletion, 1)
	for i := range msgs {
		time.Sleep(10 * time.Millisecond) // the receiver sleeps in between
		if err := a.qp.PostSend(&uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey()}}}); err != nil {
			log.Fatal(err)
		}
		if _, err := a.cq.PollContext(ctx, wc); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(<-done, "messages received")
}

// The GID index to send from a given address over RoCE v2, as
// GlobalRoute.SGIDIndex (and rdmacm, rping, perftest's -x) want it.
func ExampleContext_RoCEv2GIDIndex() {
	c, err := uverbs.Open("rxe0", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	idx, err := c.RoCEv2GIDIndex(1, netip.MustParseAddr("198.18.0.1"))
	if err != nil {
		log.Fatal(err) // matches os.ErrNotExist, and lists the port's RoCE v2 GIDs
	}
	fmt.Println("GID index", idx)
}

// The GID a RoCE program sends from when the user named a device (and
// perhaps a network device) rather than an address.
func ExampleContext_RoCEv2GID() {
	c, err := uverbs.Open("rxe0", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	e, err := c.RoCEv2GID(1, "") // any of the port's network devices
	if err != nil {
		log.Fatal(err) // an InfiniBand port has none: address its peers by LID
	}
	fmt.Printf("GID index %d: %v on %s\n", e.Index, e.GID.Addr(), e.Netdev)
}
