package rpma

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// ConnReq is a connection request (struct rpma_conn_req): outgoing, from
// Peer.NewConnReq, or incoming, from Ep.NextConnReq. Its CQs and QP
// exist already, so receives can be posted before the connection is
// made (Recv). Connect turns it into a Conn; Close drops it (an
// incoming request is rejected).
//
// A ConnReq is used by one goroutine at a time.
type ConnReq struct {
	peer    *Peer
	id      *rdmacm.ID
	passive bool
	res     *connResources
	data    []byte // the peer's private data (incoming)
	done    atomic.Bool
}

// connResources are what a request prepares and its Conn inherits.
type connResources struct {
	cfg connCfgSnapshot
	td  *uverbs.TD
	ch  *uverbs.CompChannel // the shared channel, or nil
	cq  *CQ
	rcq *CQ // the connection's own receive CQ, or nil
	srq *SRQ
	qp  *uverbs.QP
}

// close destroys the QP, the CQs, the shared channel and the TD, after
// the ID (which drives the QP's states but does not own it) is closed.
func (r *connResources) close() error {
	var err error
	if r.qp != nil {
		if cerr := r.qp.Close(); cerr != nil && !errors.Is(cerr, uverbs.ErrClosed) {
			err = cerr
		}
	}
	err = errors.Join(err, r.rcq.close(), r.cq.close())
	if r.ch != nil {
		err = errors.Join(err, r.ch.Close())
	}
	if r.td != nil {
		err = errors.Join(err, r.td.Close())
	}
	return err
}

// NewConnReq prepares an outgoing connection request to addr and port
// (rpma_conn_req_new): it resolves the address and the route, within
// cfg's timeout or ctx's deadline, whichever is sooner, and creates the
// CQs and the QP that cfg (nil for the defaults) describes.
//
// A resolution that fails names the step and the address. When cfg's
// timeout ends it, the error says so and matches ETIMEDOUT (class
// ErrProvider, as librpma's), not context.DeadlineExceeded, which
// means ctx's own deadline passed; an address without an RDMA device
// (127.0.0.1, an address on a network interface without one) says so
// and matches ENODEV (rdmacm.ID.ResolveAddrContext).
func (p *Peer) NewConnReq(ctx context.Context, addr, port string, cfg *ConnCfg) (*ConnReq, error) {
	const op = "conn_req new"
	if err := p.checkAddr(op, ctx, addr, port); err != nil {
		return nil, err
	}
	c := cfgOrDefault(cfg)
	timer, rctx, cancel := newLibTimer(ctx, c.Timeout(), "ConnCfg's timeout", "ConnCfg.SetTimeout changes it")
	defer cancel()
	ais, err := rdmacm.GetAddrInfo(rctx, addr, port, nil)
	if err != nil {
		return nil, timer.explain(op, "looking up "+addr, err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, provider(op, err)
	}
	dst := ais[0].Dst
	if err := id.ResolveAddrContext(rctx, ais[0].Src, dst); err != nil {
		id.Close()
		return nil, timer.explain(op, fmt.Sprintf("address resolution of %v", dst), err)
	}
	if err := id.ResolveRouteContext(rctx); err != nil {
		id.Close()
		return nil, timer.explain(op, fmt.Sprintf("route resolution of %v", dst), err)
	}
	req, err := newConnReq(op, p, id, cfg, false)
	if err != nil {
		id.Close()
		return nil, err
	}
	logf(LogNotice, "Requesting a connection to %s:%s", addr, port)
	return req, nil
}

// checkAddr checks the arguments Listen and NewConnReq share.
func (p *Peer) checkAddr(op string, ctx context.Context, addr, port string) error {
	if err := p.alive(op); err != nil {
		return err
	}
	if ctx == nil {
		return invalid(op, "nil context")
	}
	if addr == "" || port == "" {
		return invalid(op, "address %q, port %q: both are needed", addr, port)
	}
	return nil
}

// newConnReq creates the request's CQs and QP on a bound ID.
func newConnReq(op string, p *Peer, id *rdmacm.ID, cfg *ConnCfg, passive bool) (*ConnReq, error) {
	dev, ok := id.Device()
	if !ok {
		return nil, newErr(op, ErrProvider, errors.New("the connection has no device"))
	}
	if name := p.ctx.Device().Name; dev.Name != name {
		return nil, invalid(op, "the peer is on %s, the connection's route on %s", name, dev.Name)
	}
	s := cfgOrDefault(cfg).snapshot()
	var srqRCQ *CQ
	if s.srq != nil {
		srqRCQ = s.srq.rcq
		if s.srq.peer != p {
			return nil, invalid(op, "the SRQ belongs to another peer")
		}
	}
	if s.shared && srqRCQ != nil {
		return nil, invalid(op, "a shared completion channel cannot be used when the SRQ has its own receive CQ")
	}
	if s.sq > 1<<24 || s.rq > 1<<24 {
		return nil, invalid(op, "queue sizes SQ %d, RQ %d: at most 2^24", s.sq, s.rq)
	}
	r := &connResources{cfg: s, srq: s.srq}
	var err error
	fail := func(e error) (*ConnReq, error) {
		if cerr := r.close(); cerr != nil {
			logf(LogError, "%s: cleaning up: %v", op, cerr)
		}
		return nil, e
	}
	if r.td, err = p.ctx.AllocTD(); err != nil {
		return fail(provider(op, err))
	}
	if s.shared {
		if r.ch, err = p.ctx.CreateCompChannel(); err != nil {
			return fail(provider(op, err))
		}
	}
	if r.cq, err = newCQ(op, p.ctx, s.cq, r.ch, r.td); err != nil {
		return fail(err)
	}
	if srqRCQ == nil && s.rcq > 0 {
		if r.rcq, err = newCQ(op, p.ctx, s.rcq, r.ch, r.td); err != nil {
			return fail(err)
		}
	}
	qc := uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: r.cq.cq, RecvCQ: r.cq.cq, TD: r.td,
		Cap: uverbs.QPCap{MaxSendWR: s.sq, MaxRecvWR: s.rq, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 8}}
	switch {
	case srqRCQ != nil:
		qc.RecvCQ = srqRCQ.cq
	case r.rcq != nil:
		qc.RecvCQ = r.rcq.cq
	}
	if s.srq != nil {
		qc.SRQ = s.srq.srq
	}
	if r.qp, err = p.pd.CreateQP(qc); err != nil {
		return fail(provider(op, fmt.Errorf("create QP (SQ %d, RQ %d, 1 SGE, 8 bytes inline): %w", s.sq, s.rq, err)))
	}
	// The connection owns its QP; the ID moves it through its states.
	// The responder checks the QP's access rights for FLUSH too, which
	// rdma_cm does not grant (it gives remote write, read and atomics):
	// they are added at every move to INIT.
	var flushAccess uverbs.Access
	if p.flush {
		flushAccess = uverbs.AccessFlushGlobal | uverbs.AccessFlushPersistent
	}
	if err := id.AttachQP(r.qp, flushAccess); err != nil {
		return fail(provider(op, err))
	}
	return &ConnReq{peer: p, id: id, passive: passive, res: r}, nil
}

// RemoteAddr is the address of the other side.
func (r *ConnReq) RemoteAddr() (netip.AddrPort, error) { return r.id.RemoteAddr() }

// PrivateData is the private data of an incoming request as the
// transport delivered it (rpma_conn_req_get_private_data); nil for an
// outgoing one.
func (r *ConnReq) PrivateData() []byte { return r.data }

// Recv posts a receive before the connection is made (rpma_conn_req_recv),
// so a message the other side sends at once finds it. See Conn.Recv.
func (r *ConnReq) Recv(dst *MR, offset, length int, opContext uint64) error {
	const o = opConnReqRecv
	if r == nil || r.done.Load() {
		return invalid(o.String(), "nil or used connection request")
	}
	var sge [1]uverbs.SGE
	wr := uverbs.RecvWR{WRID: opContext}
	if err := recvSGE(o, dst, offset, length, &sge, &wr); err != nil {
		return err
	}
	if r.res.srq != nil {
		return invalid(o.String(), "the connection takes its receives from an SRQ: post to it")
	}
	if err := r.res.qp.PostRecv(&wr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// Connect connects an outgoing request or accepts an incoming one
// (rpma_conn_req_connect), sending pdata (nil for none; at most 56
// bytes connecting, 196 accepting) as the private data. It returns at
// once: Conn.NextEvent reports ESTABLISHED, with the other side's
// private data, or the failure. The request is used up either way;
// closing it afterwards does nothing.
func (r *ConnReq) Connect(pdata []byte) (*Conn, error) {
	const op = "conn_req connect"
	if r == nil {
		return nil, invalid(op, "nil connection request")
	}
	if !r.done.CompareAndSwap(false, true) {
		return nil, invalid(op, "the request was used already")
	}
	if pdata != nil && len(pdata) == 0 {
		r.destroy()
		return nil, invalid(op, "empty private data: pass nil for none")
	}
	p := rdmacm.DefaultConnParam()
	p.PrivateData = pdata
	p.FlowControl = true
	p.ResponderResources, p.InitiatorDepth = rdmacm.MaxResources, rdmacm.MaxResources
	c, err := newConn(op, r)
	if err != nil {
		r.destroy()
		return nil, err
	}
	if r.passive {
		err = r.id.Accept(p)
	} else {
		err = r.id.Connect(p)
	}
	if err != nil {
		c.Close()
		return nil, provider(op, err)
	}
	if r.passive {
		c.data = r.data
	}
	return c, nil
}

// Close drops the request (rpma_conn_req_delete): an incoming one is
// rejected, an outgoing one never sent. After Connect it does nothing.
func (r *ConnReq) Close() error {
	if r == nil {
		return invalid("conn_req delete", "nil connection request")
	}
	if !r.done.CompareAndSwap(false, true) {
		return nil
	}
	return r.destroy()
}

func (r *ConnReq) destroy() error {
	const op = "conn_req delete"
	var errs []error
	if r.passive {
		if err := r.id.Reject(nil); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.id.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := r.res.close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return provider(op, err)
	}
	return nil
}
