package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"time"

	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/internal/cycles"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/spin"
	"github.com/purerdma/rdma/uverbs"
)

// The measured loops. Each follows the loop of the perftest program of
// the same name (perftest_resources.c: run_iter_lat_write,
// run_iter_lat_send, run_iter_lat, run_iter_bw, run_iter_bw_server):
// the same posts, the same signalling, the same points where the time is
// taken. They busy-poll, allocate nothing and make no system call but
// the send doorbell; every few milliseconds they yield to the Go
// scheduler (spinWaiter).

// benchRunner runs one test on a connected endpoint.
type benchRunner struct {
	ctx    context.Context
	cfg    *benchConfig
	ep     *benchEndpoint
	peer   perf.Hello
	server bool
	w      spinWaiter
	src    []uverbs.SGE // the first half of the buffer, size bytes
	dst    []uverbs.SGE // the second half, where the peer's messages land
}

func newBenchRunner(ctx context.Context, cfg *benchConfig, ep *benchEndpoint, peer perf.Hello) *benchRunner {
	r := &benchRunner{ctx: ctx, cfg: cfg, ep: ep, peer: peer, server: cfg.server == "", w: spinWaiter{pace: spin.New(ctx, cfg.yield)}}
	r.src = []uverbs.SGE{{Addr: ep.mr.Addr(), Length: uint32(cfg.size), LKey: ep.mr.LKey()}}
	r.dst = []uverbs.SGE{{Addr: ep.mr.Addr() + uint64(ep.region), Length: uint32(cfg.size), LKey: ep.mr.LKey()}}
	return r
}

// total is the number of iterations a loop runs, warm-up included.
func (r *benchRunner) total() int { return r.cfg.warmup + r.cfg.iters }

// prepare posts the receives a SEND test starts with, before the peer
// may send.
func (r *benchRunner) prepare() error {
	if r.ep.rxDepth == 0 || !r.server && r.cfg.test == perf.SendBW {
		return nil
	}
	wr := uverbs.RecvWR{SGL: r.dst}
	for range r.ep.rxDepth {
		if err := r.ep.qp.PostRecv(&wr); err != nil {
			return err
		}
	}
	return nil
}

// measures reports whether this side's loop produces the result: the
// client's always, the server's in the ping-pong tests.
func (r *benchRunner) measures() bool { return !r.server || r.cfg.test.PingPong() }

// run runs the test and returns this side's result, or nil when the
// peer measures.
func (r *benchRunner) run() (*perf.Result, error) {
	cfg := r.cfg
	var lat []uint64
	var bw perf.BWStamps
	if r.measures() {
		if cfg.test.Latency() {
			lat = make([]uint64, cfg.iters)
		} else {
			bw = perf.BWStamps{Posted: make([]uint64, cfg.iters), Completed: make([]uint64, cfg.iters)}
		}
	}
	gc0 := benchGCCycles()
	clock := cycles.StartClock()
	var err error
	switch cfg.test {
	case perf.WriteLat:
		err = r.writeLat(lat)
	case perf.SendLat:
		err = r.sendLat(lat)
	case perf.ReadLat, perf.AtomicLat:
		if !r.server {
			err = r.roundTrips(lat)
		}
	case perf.WriteBW, perf.ReadBW, perf.SendBW:
		switch {
		case !r.server:
			err = r.stream(&bw)
		case cfg.test == perf.SendBW:
			err = r.receive()
		}
	}
	if err != nil || !r.measures() {
		return nil, err
	}
	gcs := benchGCCycles() - gc0
	rate := clock.Rate()
	if rate <= 0 {
		return nil, errors.New("the cycle counter did not advance")
	}
	res := &perf.Result{
		Test: cfg.test, Role: "client", Reporter: "client", Device: r.ep.ctx.Device().Name, Port: cfg.port,
		GIDIndex: r.ep.gidIndex, MTU: r.ep.mtu.Bytes(), Size: cfg.size, Iterations: cfg.iters, Warmup: cfg.warmup,
		TxDepth: cfg.txDepth, CQMod: cfg.cqMod, RxDepth: r.ep.rxDepth, CyclesPerUsec: rate, GCCycles: gcs,
	}
	if r.server {
		res.Role, res.Reporter = "server", "server"
	}
	if cfg.test == perf.ReadLat || cfg.test == perf.ReadBW || cfg.test == perf.AtomicLat {
		res.OutReads = int(min(uint8(r.ep.outReads), r.peer.OutReads))
	}
	if res.Latency, res.Bandwidth, err = summarizeRun(cfg.test.Latency(), cfg.test.RTTFactor(), lat, cfg.size, bw, cfg.cqMod, rate); err != nil {
		return nil, err
	}
	return res, nil
}

// summarizeRun makes a run's statistics from its time stamps: for a latency
// test its samples (rttFactor stamps a sample), else its bandwidth (size
// bytes a message, a completion every perCompletion of them), the
// cycle counter's rate cyclesPerUsec.
func summarizeRun(latency bool, rttFactor int, lat []uint64, size int, bw perf.BWStamps, perCompletion int, cyclesPerUsec float64) (*perf.Latency, *perf.Bandwidth, error) {
	if latency {
		l, err := perf.SummarizeLatency(perf.LatencySamples(lat, cyclesPerUsec, rttFactor))
		if err != nil {
			return nil, nil, err
		}
		return &l, nil, nil
	}
	b, err := perf.SummarizeBandwidth(size, bw, perCompletion, cyclesPerUsec)
	if err != nil {
		return nil, nil, err
	}
	return nil, &b, nil
}

// benchGCCycles is the number of garbage collections so far.
func benchGCCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// writeLat is ib_write_lat's loop, on both sides: write the buffer to
// the peer with the iteration number in its last byte, wait for the
// write's completion, and spin on the last byte of the buffer the peer
// writes until it holds the peer's iteration number. The client writes
// first. stamps[i] is taken before measured iteration i's write.
func (r *benchRunner) writeLat(stamps []uint64) error {
	ep, size, total, warm := r.ep, r.cfg.size, r.total(), r.cfg.warmup
	wr := uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: r.src,
		RemoteAddr: r.peer.Addr, RKey: r.peer.RKey}
	last := ep.region + size - 1 // the byte the peer's writes end with
	word, shift := last&^3, uint(last&3)*8
	var scnt, rcnt, ccnt int
	for scnt < total || ccnt < total || rcnt < total {
		if err := r.w.tick(); err != nil {
			return err
		}
		if rcnt < total && !(scnt == 0 && r.server) {
			rcnt++
			for want := byte(rcnt); byte(mmio.LoadUint32(ep.mem, word)>>shift) != want; {
				if err := r.w.spin(); err != nil {
					return err
				}
			}
			r.w.reset()
		}
		if scnt < total {
			if scnt >= warm && stamps != nil {
				stamps[scnt-warm] = cycles.Read()
			}
			scnt++
			ep.mem[size-1] = byte(scnt)
			if err := ep.qp.PostSend(&wr); err != nil {
				return err
			}
		}
		if ccnt < total {
			if err := r.waitOne(ep.scq); err != nil {
				return err
			}
			ccnt++
		}
	}
	return nil
}

// sendLat is ib_send_lat's loop, on both sides: wait for the peer's
// message and post its receive again, then send one and wait for its
// completion. The client sends first.
func (r *benchRunner) sendLat(stamps []uint64) error {
	ep, total, warm := r.ep, r.total(), r.cfg.warmup
	swr := uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: r.src}
	rwr := uverbs.RecvWR{SGL: r.dst}
	var scnt, rcnt int
	for scnt < total || rcnt < total {
		if err := r.w.tick(); err != nil {
			return err
		}
		if rcnt < total && !(scnt == 0 && !r.server) {
			if err := r.waitOne(ep.rcq); err != nil {
				return err
			}
			rcnt++
			if rcnt+ep.rxDepth <= total {
				if err := ep.qp.PostRecv(&rwr); err != nil {
					return err
				}
			}
		}
		if scnt < total {
			if scnt >= warm && stamps != nil {
				stamps[scnt-warm] = cycles.Read()
			}
			scnt++
			if err := ep.qp.PostSend(&swr); err != nil {
				return err
			}
			if err := r.waitOne(ep.scq); err != nil {
				return err
			}
		}
	}
	return nil
}

// roundTrips is ib_read_lat's and ib_atomic_lat's loop on the client:
// post one READ (or FETCH_AND_ADD) and wait for its completion.
func (r *benchRunner) roundTrips(stamps []uint64) error {
	ep, warm := r.ep, r.cfg.warmup
	wr := uverbs.SendWR{Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, SGL: r.src,
		RemoteAddr: r.peer.Addr, RKey: r.peer.RKey}
	if r.cfg.test == perf.AtomicLat {
		wr.Opcode, wr.CompareAdd = uverbs.WRAtomicFetchAndAdd, 1
	}
	for scnt := range r.total() {
		if err := r.w.tick(); err != nil {
			return err
		}
		if scnt >= warm {
			stamps[scnt-warm] = cycles.Read()
		}
		if err := ep.qp.PostSend(&wr); err != nil {
			return err
		}
		if err := r.waitOne(ep.scq); err != nil {
			return err
		}
	}
	return nil
}

// stream is ib_write_bw's, ib_read_bw's and ib_send_bw's loop on the
// client: keep up to tx depth messages posted, signal every cq_mod-th
// and the last, and count a signalled completion as all messages up to
// it done. The warm-up runs the same loop unmeasured first.
func (r *benchRunner) stream(st *perf.BWStamps) error {
	op := map[perf.Test]uverbs.WROpcode{perf.WriteBW: uverbs.WRRDMAWrite, perf.ReadBW: uverbs.WRRDMARead,
		perf.SendBW: uverbs.WRSend}[r.cfg.test]
	wr := uverbs.SendWR{Opcode: op, SGL: r.src, RemoteAddr: r.peer.Addr, RKey: r.peer.RKey}
	if r.cfg.warmup > 0 {
		if err := r.streamN(&wr, r.cfg.warmup, nil); err != nil {
			return err
		}
	}
	return r.streamN(&wr, r.cfg.iters, st)
}

func (r *benchRunner) streamN(wr *uverbs.SendWR, n int, st *perf.BWStamps) error {
	ep, depth, mod := r.ep, r.cfg.txDepth, r.cfg.cqMod
	wc := ep.wc[:]
	var scnt, ccnt int
	for scnt < n || ccnt < n {
		for scnt < n && scnt-ccnt < depth {
			// Every post, not every burst: a burst of big messages can
			// last longer than sysmon's 10 ms.
			if err := r.w.tick(); err != nil {
				return err
			}
			wr.WRID = uint64(scnt)
			wr.Flags = 0
			if scnt%mod == mod-1 || scnt == n-1 {
				wr.Flags = uverbs.SendSignaled
			}
			if st != nil {
				st.Posted[scnt] = cycles.Read()
			}
			if err := ep.qp.PostSend(wr); err != nil {
				if errors.Is(err, uverbs.ErrBusy) {
					break // the ring lags the completions: poll
				}
				return err
			}
			scnt++
		}
		k, err := ep.scq.Poll(wc)
		if err != nil {
			return err
		}
		if k == 0 {
			if err := r.w.spin(); err != nil {
				return err
			}
			continue
		}
		r.w.reset()
		for i := range k {
			if err := benchWCError(&wc[i]); err != nil {
				return err
			}
			id := int(wc[i].WRID)
			if id < ccnt || id >= scnt {
				return fmt.Errorf("completion for message %d, %d of %d posted and %d complete", id, scnt, n, ccnt)
			}
			ccnt = id + 1
			if st != nil {
				st.Completed[id] = cycles.Read()
			}
		}
	}
	return nil
}

// receive is ib_send_bw's loop on the server: take the client's messages
// and keep the receive queue full until all have arrived.
func (r *benchRunner) receive() error {
	ep, total := r.ep, r.total()
	wc := ep.wc[:]
	rwr := uverbs.RecvWR{SGL: r.dst}
	posted, rcnt := ep.rxDepth, 0
	for rcnt < total {
		k, err := ep.rcq.Poll(wc)
		if err != nil {
			return err
		}
		if k == 0 {
			if err := r.w.spin(); err != nil {
				return err
			}
			continue
		}
		r.w.reset()
		for i := range k {
			if err := benchWCError(&wc[i]); err != nil {
				return err
			}
			rcnt++
			if err := r.w.tick(); err != nil {
				return err
			}
			if posted < total {
				if err := ep.qp.PostRecv(&rwr); err != nil {
					return err
				}
				posted++
			}
		}
	}
	return nil
}

// waitOne busy-polls cq for one completion, which must be a success.
func (r *benchRunner) waitOne(cq *uverbs.CQ) error {
	wc := r.ep.wc[:1]
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			return err
		}
		if n == 1 {
			r.w.reset()
			return benchWCError(&wc[0])
		}
		if err := r.w.spin(); err != nil {
			return err
		}
	}
}

func benchWCError(wc *uverbs.WorkCompletion) error {
	if wc.Status == uverbs.WCSuccess {
		return nil
	}
	return fmt.Errorf("%v completion of work request %d: %w", wc.Opcode, wc.WRID, wc.Status)
}

// benchStallTimeout is how long a loop spins without progress before it gives
// up on the peer.
const benchStallTimeout = 30 * time.Second

// spinWaiter paces the loops with a spin.Waiter (which yields to the
// scheduler every -yield, so the runtime never preempts a loop: see
// docs/performance.md) and notices a peer that stopped: after about a
// million empty polls in a row it starts a clock that ends the wait
// after benchStallTimeout. The loops call tick once per iteration and
// spin on every empty poll; neither allocates.
type spinWaiter struct {
	pace  *spin.Waiter
	spins uint64
	since time.Time
}

// tick is called once per iteration of a loop.
func (w *spinWaiter) tick() error { return w.pace.Spin() }

// spin is called on every empty poll.
func (w *spinWaiter) spin() error {
	if err := w.pace.Spin(); err != nil {
		return err
	}
	w.spins++
	if w.spins&(1<<20-1) == 0 {
		now := time.Now()
		if w.since.IsZero() {
			w.since = now
		} else if now.Sub(w.since) > benchStallTimeout {
			return fmt.Errorf("no progress for %v: is the peer still running?", benchStallTimeout)
		}
	}
	return nil
}

// reset records progress.
func (w *spinWaiter) reset() {
	if w.spins != 0 {
		w.spins, w.since = 0, time.Time{}
	}
}
