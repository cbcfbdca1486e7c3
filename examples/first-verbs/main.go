// Command first-verbs is a first verbs program (docs/getting-started.md):
// two RC queue pairs, one on each of two devices, connected to each
// other by hand, and one message sent from the first to the second.
//
// It is the shape of the manual's RC example without its TCP exchange:
// both ends live in this process, so each side's QP number, PSN, GID and
// MTU are handed over directly. In the test VM:
//
//	go build -o bin/ ./examples/first-verbs && bin/rxevm -- bin/first-verbs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/purerdma/rdma/uverbs"
)

func main() {
	a := flag.String("a", "rxe0", "the sending device")
	b := flag.String("b", "rxe1", "the receiving device")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, *a, *b); err != nil {
		fmt.Fprintln(os.Stderr, "first-verbs:", err)
		os.Exit(1)
	}
}

// side is one end: a device context, a protection domain, a CQ with a
// completion channel to sleep on, an RC QP and a registered buffer.
type side struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	ch  *uverbs.CompChannel
	cq  *uverbs.CQ
	qp  *uverbs.QP
	mr  *uverbs.MR
}

func open(dev string) (_ *side, err error) {
	s := &side{}
	defer func() {
		if err != nil {
			s.close() // what was made before the failure
		}
	}()
	if s.ctx, err = uverbs.Open(dev, nil); err != nil {
		return nil, err // lists the devices there are
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return nil, err
	}
	if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
		return nil, err
	}
	if s.cq, err = s.ctx.CreateCQ(uverbs.CQConfig{Size: 16, Channel: s.ch}); err != nil {
		return nil, err
	}
	if s.qp, err = s.pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	return s, nil
}

// close frees what open made, children before parents.
func (s *side) close() error {
	var errs []error
	add := func(c io.Closer) { errs = append(errs, c.Close()) }
	if s.mr != nil {
		add(s.mr)
	}
	if s.qp != nil {
		add(s.qp)
	}
	if s.cq != nil {
		add(s.cq)
	}
	if s.ch != nil {
		add(s.ch)
	}
	if s.pd != nil {
		add(s.pd)
	}
	if s.ctx != nil {
		add(s.ctx)
	}
	return errors.Join(errs...)
}

// me is what this side tells its peer (over TCP, in a program of two
// machines): its QP number, first PSN, GID and port MTU.
func (s *side) me(psn uint32) (uverbs.RCPeer, error) {
	g, err := s.ctx.RoCEv2GID(1, "") // RoCE v2 over IPv4 where the port has an IPv4 address
	if err != nil {
		return uverbs.RCPeer{}, err
	}
	pa, err := s.ctx.QueryPort(1)
	if err != nil {
		return uverbs.RCPeer{}, err
	}
	return uverbs.RCPeer{QPNum: s.qp.Num(), PSN: psn, GID: g.GID, LID: pa.LID, MTU: pa.ActiveMTU}, nil
}

func run(ctx context.Context, out io.Writer, devA, devB string) (err error) {
	a, err := open(devA)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.close()) }()
	b, err := open(devB)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.close()) }()

	// Exchange the connection data, then move each QP to RTS.
	aInfo, err := a.me(100)
	if err != nil {
		return err
	}
	bInfo, err := b.me(200)
	if err != nil {
		return err
	}
	ao, bo := uverbs.DefaultRCOptions(), uverbs.DefaultRCOptions()
	ao.SQPSN, bo.SQPSN = aInfo.PSN, bInfo.PSN
	if err := a.qp.ConnectRC(bInfo, ao); err != nil {
		return err // a *uverbs.ConnectError names the transition that failed
	}
	if err := b.qp.ConnectRC(aInfo, bo); err != nil {
		return err
	}

	// The receive is posted before the send: a send that finds no
	// receive waits (RNR) and retries.
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1,
		SGL: []uverbs.SGE{{Addr: b.mr.Addr(), Length: uint32(b.mr.Len()), LKey: b.mr.LKey()}}}); err != nil {
		return err
	}
	n := copy(a.mr.Bytes(), "hello from "+devA)
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: a.mr.Addr(), Length: uint32(n), LKey: a.mr.LKey()}}}); err != nil {
		return err
	}

	// Wait for both completions: PollContext polls, and sleeps on the
	// completion channel while the CQ is empty.
	wc := make([]uverbs.WorkCompletion, 1)
	for _, s := range []*side{a, b} {
		if _, err := s.cq.PollContext(ctx, wc); err != nil {
			return err
		}
		if err := wc[0].Status.Err(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s received %q\n", devB, b.mr.Bytes()[:wc[0].ByteLen])
	return nil
}
