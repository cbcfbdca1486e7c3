package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/uverbs"
)

// benchEndpoint is one side's verbs objects for a run: an RC queue pair with
// its own send and receive CQs, on a thread domain (one goroutine posts
// and polls, so neither takes a lock), and one registered buffer in two
// halves: the first is the local source or sink, the second is what the
// peer writes, reads or sends into.
type benchEndpoint struct {
	ctx      *uverbs.Context
	td       *uverbs.TD
	pd       *uverbs.PD
	scq, rcq *uverbs.CQ
	qp       *uverbs.QP
	buf      *uverbs.Buffer
	mem      []byte
	mr       *uverbs.MR
	region   int // bytes in each half of mem
	port     int
	gidIndex int
	gid      uverbs.GID
	mtu      uverbs.MTU // the port's active MTU; the path MTU once connected
	outReads int        // RDMA READs and atomics in flight the device takes per QP
	rxDepth  int
	psn      uint32
	cm       bool           // connected by the rdma_cm: connect does nothing
	closers  []func() error // newest last

	wc [16]uverbs.WorkCompletion
}

const benchAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

// openBenchEndpoint opens the device and creates the objects of a run, with
// the QP in INIT.
func openBenchEndpoint(cfg *benchConfig) (_ *benchEndpoint, err error) {
	ep := &benchEndpoint{port: cfg.port, rxDepth: cfg.rxDepth()}
	defer func() {
		if err != nil {
			ep.close()
		}
	}()
	dev, err := devs.Find(cfg.dev)
	if err != nil {
		return nil, err
	}
	if ep.ctx, err = uverbs.Open(dev.Name, nil); err != nil {
		return nil, err
	}
	ep.closers = append(ep.closers, ep.ctx.Close)
	if err := ep.create(cfg, func(pd *uverbs.PD, qc uverbs.QPConfig) (*uverbs.QP, error) { return pd.CreateQP(qc) }); err != nil {
		return nil, err
	}
	err = ep.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: cfg.port, AccessFlags: benchAccess},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
	if err != nil {
		return nil, err
	}
	ep.psn = rand.Uint32() & 0xffffff
	return ep, nil
}

// create makes the run's objects on ep.ctx, the QP through createQP
// (the PD's, or an rdma_cm ID's).
func (ep *benchEndpoint) create(cfg *benchConfig, createQP func(*uverbs.PD, uverbs.QPConfig) (*uverbs.QP, error)) (err error) {
	name := ep.ctx.Device().Name
	attr, err := ep.ctx.QueryDevice()
	if err != nil {
		return err
	}
	ep.outReads = min(max(attr.MaxQPRdAtom, 1), 255)
	pattr, err := ep.ctx.QueryPort(ep.port)
	if err != nil {
		return err
	}
	if pattr.State != uverbs.PortActive {
		return fmt.Errorf("%s port %d is %v, not ACTIVE", name, ep.port, pattr.State)
	}
	ep.mtu = pattr.ActiveMTU
	if ep.gidIndex, ep.gid, err = benchGID(ep.ctx, ep.port, cfg.gidIndex); err != nil && !ep.cm {
		return err
	}
	if ep.td, err = ep.ctx.AllocTD(); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.td.Close)
	if ep.pd, err = ep.ctx.AllocPD(); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.pd.Close)
	if ep.scq, err = ep.ctx.CreateCQ(uverbs.CQConfig{Size: cfg.txDepth, TD: ep.td}); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.scq.Close)
	if ep.rcq, err = ep.ctx.CreateCQ(uverbs.CQConfig{Size: max(ep.rxDepth, 1), TD: ep.td}); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.rcq.Close)
	ep.qp, err = createQP(ep.pd, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: ep.scq, RecvCQ: ep.rcq, TD: ep.td,
		Cap: uverbs.QPCap{MaxSendWR: uint32(cfg.txDepth), MaxRecvWR: uint32(max(ep.rxDepth, 1)), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.qp.Close)
	page := os.Getpagesize()
	ep.region = (cfg.size + page - 1) / page * page
	if ep.buf, err = uverbs.AllocBuffer(2 * ep.region); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.buf.Close)
	ep.mem = ep.buf.Bytes()
	if ep.mr, err = ep.pd.RegBuffer(ep.buf, benchAccess); err != nil {
		return err
	}
	ep.closers = append(ep.closers, ep.mr.Close)
	return nil
}

// close destroys the objects, newest first: the memory region before its
// buffer, the QP before its CQs, the context last.
func (ep *benchEndpoint) close() error {
	var errs []error
	for i := len(ep.closers) - 1; i >= 0; i-- {
		errs = append(errs, ep.closers[i]())
	}
	ep.closers = nil
	return errors.Join(errs...)
}

// benchGID returns the GID at index, or with index -1 the port's RoCE
// v2 GID that uverbs.Context.RoCEv2GID picks: its first of an IPv4
// address (what RoCE v2 over IPv4 needs and what perftest's -x is
// usually pointed at), else its first RoCE v2 GID; else its first GID.
func benchGID(c *uverbs.Context, port, index int) (int, uverbs.GID, error) {
	if index >= 0 {
		g, err := c.QueryGID(port, index)
		return index, g, err
	}
	if e, err := c.RoCEv2GID(port, ""); err == nil {
		return e.Index, e.GID, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, uverbs.GID{}, err
	}
	tbl, err := c.GIDTable(port)
	if err != nil {
		return 0, uverbs.GID{}, err
	}
	if len(tbl) == 0 {
		return 0, uverbs.GID{}, fmt.Errorf("%s port %d has no GID", c.Device().Name, port)
	}
	return tbl[0].Index, tbl[0].GID, nil
}

// hello is what this side tells the peer.
func (ep *benchEndpoint) hello(cfg *benchConfig) perf.Hello {
	return perf.Hello{
		Test: cfg.test, Size: uint32(cfg.size), Iters: uint32(cfg.iters), Warmup: uint32(cfg.warmup),
		QPN: ep.qp.Num(), PSN: ep.psn, GID: ep.gid, MTU: uint8(ep.mtu), OutReads: uint8(ep.outReads),
		RKey: ep.mr.RKey(), Addr: ep.mr.Addr() + uint64(ep.region), Len: uint64(ep.region),
	}
}

// RC timing, as perftest sets it.
const (
	benchQPTimeout   = 14 // DEF_QP_TIME: 4.096 us * 2^14 = 67 ms
	benchRetryCount  = 7
	benchRNRRetry    = 7  // retry forever on receiver-not-ready
	benchMinRNRTimer = 12 // MIN_RNR_TIMER: 0.64 ms
	benchHopLimit    = 255
)

// connect moves the QP, in INIT, to RTR and RTS towards the peer, with
// perftest's settings.
func (ep *benchEndpoint) connect(peer perf.Hello) error {
	ep.mtu = min(ep.mtu, uverbs.MTU(peer.MTU))
	if ep.cm {
		return nil // the rdma_cm connected the QP
	}
	return ep.qp.ConnectRC(uverbs.RCPeer{QPNum: peer.QPN, PSN: peer.PSN, GID: peer.GID}, &uverbs.RCOptions{
		Port: ep.port, SGIDIndex: ep.gidIndex, HopLimit: benchHopLimit, PathMTU: ep.mtu, SQPSN: ep.psn,
		MaxRdAtomic: max(peer.OutReads, 1), MaxDestRdAtomic: uint8(ep.outReads), MinRNRTimer: benchMinRNRTimer,
		Timeout: benchQPTimeout, RetryCount: benchRetryCount, RNRRetry: benchRNRRetry})
}

// benchHandshakeTimeout bounds each exchange before and after the run, so a
// peer that is not a purerdma bench (or hangs) cannot keep this side
// waiting forever. The wait for the client's Done, which lasts as long
// as the client's run, is bounded by the stall watchdog on the client
// instead.
const benchHandshakeTimeout = 30 * time.Second

// benchSession is the TCP side of a run.
type benchSession struct {
	ctx  context.Context
	conn net.Conn
}

func (s *benchSession) send(t perf.MsgType, payload []byte) error {
	s.conn.SetWriteDeadline(time.Now().Add(benchHandshakeTimeout))
	return s.wrap(perf.WriteMessage(s.conn, t, payload))
}

// recv reads the next message, which must be of type want; an Error
// message becomes a *perf.PeerError.
func (s *benchSession) recv(want perf.MsgType, timeout time.Duration) ([]byte, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	s.conn.SetReadDeadline(deadline)
	t, p, err := perf.ReadMessage(s.conn)
	if err != nil {
		return nil, s.wrap(err)
	}
	switch t {
	case want:
		return p, nil
	case perf.MsgError:
		return nil, perf.DecodeError(p)
	}
	return nil, fmt.Errorf("%w: %v message where %v was due", perf.ErrMalformed, t, want)
}

// fail tells the peer why this side stops; it is best effort.
func (s *benchSession) fail(err error) {
	msg := err.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	s.send(perf.MsgError, []byte(msg))
}

func (s *benchSession) wrap(err error) error {
	if err != nil && s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("talking to the peer: %w", err)
	}
	return nil
}

// runBench runs one test on ep over conn, the connection to the peer,
// and returns the result this side prints.
func runBench(ctx context.Context, cfg *benchConfig, conn net.Conn, ep *benchEndpoint) (_ *perf.Result, err error) {
	s := &benchSession{ctx: ctx, conn: conn}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	local := ep.hello(cfg)
	hb, _ := local.MarshalBinary()
	if err := s.send(perf.MsgHello, hb); err != nil {
		return nil, err
	}
	p, err := s.recv(perf.MsgHello, benchHandshakeTimeout)
	if err != nil {
		return nil, err
	}
	var peer perf.Hello
	err = peer.UnmarshalBinary(p)
	if err == nil {
		err = perf.CheckPeer(local, peer)
	}
	if err != nil {
		s.fail(err)
		return nil, err
	}
	if err := ep.connect(peer); err != nil {
		s.fail(err)
		return nil, err
	}
	r := newBenchRunner(ctx, cfg, ep, peer)
	if err := r.prepare(); err != nil {
		s.fail(err)
		return nil, err
	}
	// Both QPs are in RTS and receives are posted: go.
	if err := s.send(perf.MsgReady, nil); err != nil {
		return nil, err
	}
	if _, err := s.recv(perf.MsgReady, benchHandshakeTimeout); err != nil {
		return nil, err
	}
	// No deadline timers during the run: the scheduler would read the
	// clock for them.
	conn.SetDeadline(time.Time{})
	res, err := r.run()
	if err != nil {
		s.fail(err)
		return nil, err
	}
	return benchFinish(s, cfg, res)
}

// benchFinish exchanges the Done messages: the client sends its result and
// waits for the server's Done, so the server keeps its QP and memory
// until the client is through; the server takes the client's result
// when it measured nothing itself.
func benchFinish(s *benchSession, cfg *benchConfig, res *perf.Result) (*perf.Result, error) {
	if cfg.server != "" {
		p, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		if err := s.send(perf.MsgDone, p); err != nil {
			return nil, err
		}
		if _, err := s.recv(perf.MsgDone, benchHandshakeTimeout); err != nil {
			return nil, err
		}
		return res, nil
	}
	p, err := s.recv(perf.MsgDone, 0)
	if err != nil {
		return nil, err
	}
	peerRes, err := perf.DecodeDone(p)
	if err != nil {
		return nil, err
	}
	if err := s.send(perf.MsgDone, nil); err != nil {
		return nil, err
	}
	if res != nil {
		return res, nil
	}
	if peerRes == nil || peerRes.Test != cfg.test {
		return nil, fmt.Errorf("%w: the client reported no %v result", perf.ErrMalformed, cfg.test)
	}
	peerRes.Role = "server"
	return peerRes, nil
}
