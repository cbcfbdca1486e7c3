package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/internal/cycles"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/spin"
	"github.com/purerdma/rdma/uverbs"
)

// Each side registers one buffer of two page-rounded halves: the first
// is the source of writes and sends, the second where reads and
// receives land. The server's region (its descriptor covers both
// halves) is the target of the client's writes, reads and flushes, all
// at offset 0.
const (
	rpmaServerUsage = rpma.UsageWriteDst | rpma.UsageReadSrc | rpma.UsageFlushVisibility | rpma.UsageSend | rpma.UsageRecv
	rpmaClientUsage = rpma.UsageWriteSrc | rpma.UsageReadDst | rpma.UsageSend | rpma.UsageRecv
)

// rpmaSide is one side's objects: the device, the peer and the region.
type rpmaSide struct {
	dev     *uverbs.Context
	peer    *rpma.Peer
	buf     *uverbs.Buffer
	mr      *rpma.MR
	region  int
	closers []func() error
}

func openRpmaSide(ctx context.Context, cfg *rpmaBenchConfig, addr string, side rpma.Side, usage rpma.Usage) (_ *rpmaSide, err error) {
	s := &rpmaSide{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dev, err = rpma.DeviceContext(ctx, addr, side); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.dev.Close)
	if s.peer, err = rpma.NewPeer(s.dev); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.peer.Close)
	page := os.Getpagesize()
	s.region = (cfg.size + page - 1) / page * page
	if s.buf, err = uverbs.AllocBuffer(2 * s.region); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.buf.Close)
	if s.mr, err = s.peer.RegMR(s.buf.Bytes(), usage); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.mr.Close)
	return s, nil
}

// close releases the objects, newest first.
func (s *rpmaSide) close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// connCfg is the connection configuration of either side: a send queue
// for what the client keeps in flight, and for send_lat a receive queue
// with its own CQ.
func (cfg *rpmaBenchConfig) connCfg() (*rpma.ConnCfg, error) {
	c := rpma.NewConnCfg()
	sq := uint32(cfg.sqSize())
	c.SetSQSize(sq)
	c.SetCQSize(sq)
	if rx := cfg.rxDepth(); rx > 0 {
		c.SetRQSize(uint32(rx))
		c.SetRCQSize(uint32(rx))
	}
	if err := c.SetFlushMethod(cfg.flush); err != nil {
		return nil, err
	}
	return c, nil
}

// rpmaServe serves one client: it listens, checks the request, accepts
// it with the region's descriptors, runs the server's half of send_lat,
// and waits for the client to disconnect.
func rpmaServe(ctx context.Context, cfg *rpmaBenchConfig) (err error) {
	s, err := openRpmaSide(ctx, cfg, cfg.bind, rpma.Local, rpmaServerUsage)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	pcfg := rpma.NewPeerCfg()
	pcfg.SetNativeFlush(s.peer.NativeFlush())
	pdata, err := (&rpmaCommonData{MRDesc: s.mr.Descriptor(), PCfgDesc: pcfg.Descriptor()}).encode()
	if err != nil {
		return err
	}
	ccfg, err := cfg.connCfg()
	if err != nil {
		return err
	}
	ep, err := s.peer.Listen(ctx, cfg.bind, strconv.Itoa(cfg.port))
	if err != nil {
		return err
	}
	req, err := ep.NextConnReq(ctx, ccfg)
	if err != nil {
		return errors.Join(err, ep.Close())
	}
	h, err := decodeRpmaHello(req.PrivateData())
	if err == nil {
		err = cfg.check(h)
	}
	for range cfg.rxDepth() {
		if err != nil {
			break
		}
		err = req.Recv(s.mr, s.region, cfg.size, 0)
	}
	if err != nil {
		return errors.Join(err, req.Close(), ep.Close()) // Close rejects the request
	}
	conn, err := req.Connect(pdata)
	if err != nil {
		return errors.Join(err, ep.Close())
	}
	ev, err := conn.NextEvent(ctx)
	if err == nil && ev != rpma.ConnEstablished {
		err = fmt.Errorf("connection event %v, want %v", ev, rpma.ConnEstablished)
	}
	err = errors.Join(err, ep.Close())
	if err == nil && cfg.test == rpmaSendLat {
		r := newRpmaRunner(ctx, cfg, s, conn, nil, true)
		err = r.sendLat(nil)
	}
	if err != nil {
		return errors.Join(err, conn.Close())
	}
	// The client disconnects when it is through.
	ev, err = conn.NextEvent(ctx)
	if err == nil && ev != rpma.ConnClosed {
		err = fmt.Errorf("connection event %v, want %v", ev, rpma.ConnClosed)
	}
	return errors.Join(err, conn.Disconnect(), conn.Close())
}

// rpmaClient connects to the server, runs the test and returns the
// result.
func rpmaClient(ctx context.Context, cfg *rpmaBenchConfig) (_ *rpmaResult, err error) {
	s, err := openRpmaSide(ctx, cfg, cfg.server, rpma.Remote, rpmaClientUsage)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	ccfg, err := cfg.connCfg()
	if err != nil {
		return nil, err
	}
	conn, err := rpmaConnect(ctx, cfg, s, ccfg)
	if err != nil {
		return nil, err
	}
	res, err := rpmaClientRun(ctx, cfg, s, conn)
	// An orderly close: the server is waiting for it.
	cctx, cancel := context.WithTimeout(ctx, benchHandshakeTimeout)
	defer cancel()
	derr := conn.Disconnect()
	if derr == nil {
		var ev rpma.ConnEvent
		ev, derr = conn.NextEvent(cctx)
		if derr == nil && ev != rpma.ConnClosed {
			derr = fmt.Errorf("connection event %v, want %v", ev, rpma.ConnClosed)
		}
	}
	if err = errors.Join(err, derr, conn.Close()); err != nil {
		return nil, err
	}
	return res, nil
}

// rpmaConnect connects with the request's private data, retrying for
// cfg.timeout while the server rejects it (it may not listen yet: a
// script starts both sides at once).
func rpmaConnect(ctx context.Context, cfg *rpmaBenchConfig, s *rpmaSide, ccfg *rpma.ConnCfg) (*rpma.Conn, error) {
	hello := cfg.hello().encode()
	port := strconv.Itoa(cfg.port)
	deadline := time.Now().Add(cfg.timeout)
	for {
		req, err := s.peer.NewConnReq(ctx, cfg.server, port, ccfg)
		if err != nil {
			return nil, err
		}
		for range cfg.rxDepth() {
			if err = req.Recv(s.mr, s.region, cfg.size, 0); err != nil {
				return nil, errors.Join(err, req.Close())
			}
		}
		conn, err := req.Connect(hello)
		if err != nil {
			return nil, err
		}
		ev, err := conn.NextEvent(ctx)
		if err == nil && ev == rpma.ConnEstablished {
			return conn, nil
		}
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if ev != rpma.ConnRejected && ev != rpma.ConnUnreachable || time.Now().After(deadline) {
			return nil, fmt.Errorf("connecting to %s port %s: %v (a server that runs another test or size rejects the request)", cfg.server, port, ev)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rpmaClientRun reads the server's descriptors and runs the measured
// loop.
func rpmaClientRun(ctx context.Context, cfg *rpmaBenchConfig, s *rpmaSide, conn *rpma.Conn) (*rpmaResult, error) {
	d, err := decodeRpmaCommonData(conn.PrivateData())
	if err != nil {
		return nil, err
	}
	rmr, err := rpma.RemoteMRFromDescriptor(d.MRDesc)
	if err != nil {
		return nil, err
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(d.PCfgDesc)
	if err != nil {
		return nil, err
	}
	if err := conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return nil, err
	}
	if rmr.Len < uint64(d.DataOffset)+uint64(cfg.size) {
		return nil, fmt.Errorf("the server's region has %d bytes after offset %d, the test needs %d", rmr.Len, d.DataOffset, cfg.size)
	}
	r := newRpmaRunner(ctx, cfg, s, conn, rmr, false)
	r.roff = int(d.DataOffset)
	res, err := r.run()
	if err != nil || !cfg.verify {
		return res, err
	}
	if err := r.verify(); err != nil {
		return nil, fmt.Errorf("-verify: %w", err)
	}
	res.Verified = true
	return res, nil
}

// rpmaRunner runs one test's loop on a connection. Like the verbs
// bench's loops (loops.go) it busy-polls, allocates nothing and
// yields to the Go scheduler every -yield (spinWaiter).
type rpmaRunner struct {
	cfg    *rpmaBenchConfig
	side   *rpmaSide
	conn   *rpma.Conn
	cq     *rpma.CQ
	rcq    *rpma.CQ
	rmr    *rpma.RemoteMR
	roff   int // where the server's data starts in its region
	server bool
	w      spinWaiter
	wc     [16]uverbs.WorkCompletion
}

func newRpmaRunner(ctx context.Context, cfg *rpmaBenchConfig, s *rpmaSide, conn *rpma.Conn, rmr *rpma.RemoteMR, server bool) *rpmaRunner {
	return &rpmaRunner{cfg: cfg, side: s, conn: conn, cq: conn.CQ(), rcq: conn.RCQ(), rmr: rmr, server: server,
		w: spinWaiter{pace: spin.New(ctx, cfg.yield)}}
}

// run runs the client's loop and summarizes it.
func (r *rpmaRunner) run() (*rpmaResult, error) {
	cfg := r.cfg
	var lat []uint64
	var bw perf.BWStamps
	if cfg.test.latency() {
		lat = make([]uint64, cfg.iters)
	} else {
		bw = perf.BWStamps{Posted: make([]uint64, cfg.iters), Completed: make([]uint64, cfg.iters)}
	}
	gc0 := benchGCCycles()
	clock := cycles.StartClock()
	var err error
	switch cfg.test {
	case rpmaWriteLat:
		err = r.writeLat(lat)
	case rpmaReadLat:
		err = r.readLat(lat)
	case rpmaSendLat:
		err = r.sendLat(lat)
	case rpmaWriteBW:
		err = r.writeBW(&bw)
	}
	if err != nil {
		return nil, err
	}
	gcs := benchGCCycles() - gc0
	rate := clock.Rate()
	if rate <= 0 {
		return nil, errors.New("the cycle counter did not advance")
	}
	res := &rpmaResult{Test: cfg.test.String(), Library: "purerdma", Role: "client", Size: cfg.size,
		Iterations: cfg.iters, Warmup: cfg.warmup, TxDepth: cfg.txDepth, FlushEvery: cfg.flushEvery,
		CyclesPerUsec: rate, GCCycles: gcs}
	if cfg.test.flushes() {
		res.Flush = "emulated"
		if r.conn.NativeFlushUsed() {
			res.Flush = "native"
		}
	}
	if res.Latency, res.Bandwidth, err = summarizeRun(cfg.test.latency(), cfg.test.rttFactor(), lat, cfg.size, bw, cfg.flushEvery, rate); err != nil {
		return nil, err
	}
	return res, nil
}

// writeLat: an rpma write whose completion is reported only on error,
// then a flush of the written range reported always; wait for the
// flush. stamps[i] is taken before measured iteration i's write.
func (r *rpmaRunner) writeLat(stamps []uint64) error {
	c, mr, rmr, size, off, warm := r.conn, r.side.mr, r.rmr, r.cfg.size, r.roff, r.cfg.warmup
	for i := range r.cfg.total() {
		if err := r.w.tick(); err != nil {
			return err
		}
		if i >= warm {
			stamps[i-warm] = cycles.Read()
		}
		if err := c.Write(rmr, off, mr, 0, size, rpma.CompletionOnError, 0); err != nil {
			return err
		}
		if err := c.Flush(rmr, off, size, rpma.FlushVisibility, rpma.CompletionAlways, uint64(i)); err != nil {
			return err
		}
		if err := r.waitOne(r.cq); err != nil {
			return err
		}
	}
	return nil
}

// readLat: one rpma read at a time into the second half of the local
// region.
func (r *rpmaRunner) readLat(stamps []uint64) error {
	c, mr, rmr, size, off, warm, dst := r.conn, r.side.mr, r.rmr, r.cfg.size, r.roff, r.cfg.warmup, r.side.region
	for i := range r.cfg.total() {
		if err := r.w.tick(); err != nil {
			return err
		}
		if i >= warm {
			stamps[i-warm] = cycles.Read()
		}
		if err := c.Read(mr, dst, rmr, off, size, rpma.CompletionAlways, uint64(i)); err != nil {
			return err
		}
		if err := r.waitOne(r.cq); err != nil {
			return err
		}
	}
	return nil
}

// sendLat is perftest's send_lat loop on rpma, on both sides: wait for
// the peer's message and post its receive again, then send one and wait
// for the send's completion. The client sends first. The first
// rxDepth receives were posted before the connection was made.
func (r *rpmaRunner) sendLat(stamps []uint64) error {
	c, mr, size, total, warm, dst, rx := r.conn, r.side.mr, r.cfg.size, r.cfg.total(), r.cfg.warmup, r.side.region, r.cfg.rxDepth()
	var scnt, rcnt int
	for scnt < total || rcnt < total {
		if err := r.w.tick(); err != nil {
			return err
		}
		if rcnt < total && !(scnt == 0 && !r.server) {
			if err := r.waitOne(r.rcq); err != nil {
				return err
			}
			rcnt++
			if rcnt+rx <= total {
				if err := c.Recv(mr, dst, size, 0); err != nil {
					return err
				}
			}
		}
		if scnt < total {
			if scnt >= warm && stamps != nil {
				stamps[scnt-warm] = cycles.Read()
			}
			scnt++
			if err := c.Send(mr, 0, size, rpma.CompletionAlways, 0); err != nil {
				return err
			}
			if err := r.waitOne(r.cq); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeBW streams writes, the warm-up first, unmeasured.
func (r *rpmaRunner) writeBW(st *perf.BWStamps) error {
	if r.cfg.warmup > 0 {
		if err := r.streamN(r.cfg.warmup, nil); err != nil {
			return err
		}
	}
	return r.streamN(r.cfg.iters, st)
}

// streamN keeps up to the depth of writes in flight, each reported only
// on error, with a flush reported always after every -f writes and
// after the last; a flush's completion (its op context is the number of
// writes before it) completes every write before it.
func (r *rpmaRunner) streamN(n int, st *perf.BWStamps) error {
	c, mr, rmr, size, off := r.conn, r.side.mr, r.rmr, r.cfg.size, r.roff
	depth, every := r.cfg.txDepth, r.cfg.flushEvery
	wc := r.wc[:]
	var scnt, ccnt, flushed int // writes posted, writes complete, writes a posted flush covers
	for ccnt < n {
		for {
			if err := r.w.tick(); err != nil {
				return err
			}
			if flushed < scnt && (scnt%every == 0 || scnt == n) {
				err := c.Flush(rmr, off, size, rpma.FlushVisibility, rpma.CompletionAlways, uint64(scnt))
				if rpmaBusy(err) {
					break // the queue lags the completions: poll
				}
				if err != nil {
					return err
				}
				flushed = scnt
			}
			if scnt == n || scnt-ccnt == depth {
				break
			}
			if st != nil {
				st.Posted[scnt] = cycles.Read()
			}
			err := c.Write(rmr, off, mr, 0, size, rpma.CompletionOnError, 0)
			if rpmaBusy(err) {
				break
			}
			if err != nil {
				return err
			}
			scnt++
		}
		k, err := r.cq.GetWC(wc)
		if k == 0 {
			if !rpmaNoCompletion(err) {
				return err
			}
			if err := r.w.spin(); err != nil {
				return err
			}
			continue
		}
		r.w.reset()
		for i := range k {
			if err := rpma.CompletionErr(&wc[i]); err != nil {
				return err
			}
			end := int(wc[i].WRID)
			if end <= ccnt || end > flushed {
				return fmt.Errorf("flush completion after write %d, %d writes flushed and %d complete", end, flushed, ccnt)
			}
			if st != nil {
				now := cycles.Read()
				for j := ccnt; j < end; j++ {
					st.Completed[j] = now
				}
			}
			ccnt = end
		}
	}
	return nil
}

// verify writes a pattern the loop did not write (the loops send the
// first half of the local region as it is, zeros; the pattern starts at
// a random nonzero byte) to the server's data, flushes it, reads it back
// into the second half of the local region, zeroed first, and compares.
func (r *rpmaRunner) verify() error {
	c, mr, rmr, size, off, dst := r.conn, r.side.mr, r.rmr, r.cfg.size, r.roff, r.side.region
	buf := r.side.buf.Bytes()
	src, back := buf[:size], buf[dst:dst+size]
	first := byte(1 + rand.IntN(255))
	for i := range src {
		src[i] = first + byte(i%251)
	}
	clear(back)
	if err := c.Write(rmr, off, mr, 0, size, rpma.CompletionOnError, 0); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := c.Flush(rmr, off, size, rpma.FlushVisibility, rpma.CompletionAlways, 1); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := r.waitOne(r.cq); err != nil {
		return fmt.Errorf("write and flush: %w", err)
	}
	if err := c.Read(mr, dst, rmr, off, size, rpma.CompletionAlways, 2); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := r.waitOne(r.cq); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	for i := range src {
		if back[i] != src[i] {
			return fmt.Errorf("byte %d of the %d read back is %#02x, %#02x was written and flushed", i, size, back[i], src[i])
		}
	}
	return nil
}

// waitOne busy-polls cq for one completion, which must be a success.
func (r *rpmaRunner) waitOne(cq *rpma.CQ) error {
	wc := r.wc[:1]
	for {
		n, err := cq.GetWC(wc)
		if n == 1 {
			r.w.reset()
			return rpma.CompletionErr(&wc[0])
		}
		if !rpmaNoCompletion(err) {
			return err
		}
		if err := r.w.spin(); err != nil {
			return err
		}
	}
}

// rpmaNoCompletion reports whether err is GetWC's "nothing yet". A type
// assertion, not errors.Is: *rpma.Error's Unwrap builds a slice, and an
// empty poll must not allocate.
func rpmaNoCompletion(err error) bool {
	e, ok := err.(*rpma.Error)
	return ok && e.Class == rpma.ErrNoCompletion
}

// rpmaBusy reports whether err is a full send queue.
func rpmaBusy(err error) bool {
	e, ok := err.(*rpma.Error)
	return ok && e.Class == rpma.ErrAgain
}
