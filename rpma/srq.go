package rpma

import (
	"sync"

	"github.com/purerdma/rdma/uverbs"
)

// SRQ is a shared receive queue (struct rpma_srq): receives posted to it
// serve every connection made with it in their ConnCfg. It may have a
// receive CQ of its own, shared by those connections. An SRQ is safe
// for concurrent use.
type SRQ struct {
	peer *Peer
	srq  *uverbs.SRQ
	rcq  *CQ

	mu  sync.Mutex // guards the scratch request below
	wr  uverbs.RecvWR
	sge [1]uverbs.SGE
}

// NewSRQ creates a shared receive queue (rpma_srq_new); a nil cfg means
// NewSRQCfg's defaults.
func (p *Peer) NewSRQ(cfg *SRQCfg) (*SRQ, error) {
	const op = "srq new"
	if err := p.alive(op); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = NewSRQCfg()
	}
	rq, rcq := cfg.RQSize(), cfg.RCQSize()
	if rq == 0 {
		return nil, invalid(op, "receive queue size 0")
	}
	srq, err := p.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: rq, MaxSGE: 1})
	if err != nil {
		return nil, provider(op, err)
	}
	s := &SRQ{peer: p, srq: srq}
	if rcq > 0 {
		if s.rcq, err = newCQ(op, p.ctx, rcq, nil, nil); err != nil {
			srq.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close destroys the SRQ and its receive CQ (rpma_srq_delete). It fails
// while connections use it.
func (s *SRQ) Close() error {
	const op = "srq delete"
	if s == nil {
		return invalid(op, "nil SRQ")
	}
	if err := s.srq.Close(); err != nil {
		return provider(op, err)
	}
	if err := s.rcq.close(); err != nil {
		return provider(op, err)
	}
	return nil
}

// RCQ is the SRQ's receive CQ, nil without one (rpma_srq_get_rcq).
func (s *SRQ) RCQ() *CQ { return s.rcq }

// Verbs is the uverbs SRQ underneath.
func (s *SRQ) Verbs() *uverbs.SRQ { return s.srq }

// Recv posts a receive of up to length bytes into dst at offset
// (rpma_srq_recv); opContext comes back as the completion's WRID. A nil
// dst with offset and length 0 posts a receive for a message without
// data. A full SRQ fails at once with ErrAgain (and uverbs.ErrBusy).
func (s *SRQ) Recv(dst *MR, offset, length int, opContext uint64) error {
	const o = opSRQRecv
	if s == nil {
		return invalid(o.String(), "nil SRQ")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wr = uverbs.RecvWR{WRID: opContext}
	if err := recvSGE(o, dst, offset, length, &s.sge, &s.wr); err != nil {
		return err
	}
	if err := s.srq.PostRecv(&s.wr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// recvSGE fills the receive o's scatter/gather entry from dst.
func recvSGE(o op, dst *MR, offset, length int, sge *[1]uverbs.SGE, wr *uverbs.RecvWR) error {
	if dst == nil {
		if offset != 0 || length != 0 {
			return invalid(o.String(), "no region, but offset %d and length %d", offset, length)
		}
		return nil
	}
	if !dst.inRange(offset, length) {
		return dst.rangeErr(o.String(), offset, length)
	}
	if length > 1<<31 {
		return invalid(o.String(), "length %d: at most 2 GiB", length)
	}
	sge[0] = uverbs.SGE{Addr: dst.mr.Addr() + uint64(offset), Length: uint32(length), LKey: dst.mr.LKey()}
	wr.SGL = sge[:]
	return nil
}
