// Package spin paces goroutines that busy-poll: a loop over
// uverbs.CQ.Poll, or over a word of memory the peer writes.
//
// Such a loop never blocks, so to the Go runtime it is a goroutine that
// has run too long. After 10 ms without a reschedule the runtime's sysmon
// thread preempts it with a signal, and while it has goroutines to
// preempt sysmon wakes every 20 us instead of every 10 ms: on a machine
// whose CPUs are busy (both peers polling, soft-RoCE's kernel threads)
// each of those wake-ups takes a CPU from somebody's loop. Measured on
// soft-RoCE, that cost a benchmark client 17 000 context switches and 15 %
// of its bandwidth (docs/performance.md, "Busy polling and the Go
// runtime").
//
// A Waiter avoids it without GODEBUG settings: it calls runtime.Gosched
// itself every few milliseconds, which counts as the reschedule sysmon
// looks for, so sysmon never preempts and backs off to its 10 ms ticks.
// It also watches a context, so a spinning loop ends when it is
// canceled.
//
//	w := spin.New(ctx, spin.DefaultInterval)
//	for {
//		n, err := cq.Poll(wc)
//		if err != nil {
//			return err
//		}
//		if n == 0 {
//			if err := w.Spin(); err != nil {
//				return err // ctx is done
//			}
//			continue
//		}
//		// handle wc[:n] ...
//	}
//
// A loop that rarely finds the queue empty (posting a stream of
// messages) calls Spin once per pass as well: the yield is due by time,
// not by the number of empty polls.
//
// Spin makes no system call (the clock it reads is the processor's
// counter) and never allocates. A Waiter belongs to the goroutine that
// spins: it is not safe for concurrent use. Locking that goroutine to its
// thread (runtime.LockOSThread) is neither needed nor, as measured on
// soft-RoCE, a gain: every yield of a locked goroutine hands its P to
// another thread and back.
package spin

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/cycles"
)

// DefaultInterval is how often a Waiter yields: half of the 10 ms after
// which the runtime preempts a goroutine that was not rescheduled. More
// often costs more Gosched calls for nothing; sysmon's own 10 ms is the
// upper bound.
const DefaultInterval = 5 * time.Millisecond

// A Waiter reads the counter every stride calls of Spin: a read costs
// a few nanoseconds, the comparison that skips it less. The stride
// doubles, up to maxStride, while calls come faster than
// interval/stridePace, and drops to 1 when they come slower (a soft-RoCE
// doorbell that does a 64 KiB message's protocol work takes about a
// millisecond under emulation), so a loop that slows down misses at
// most one yield.
const (
	maxStride  = 16
	stridePace = 64
)

// calibration is how long a Waiter measures the counter's rate against
// the monotonic clock (cycles.Clock) before it trusts the counter alone;
// until then it yields by the clock. Long enough for a rate good to a
// few percent.
const calibration = 20 * time.Millisecond

// ticksPerSecond is the counter's rate once a Waiter has measured it, for
// later Waiters of the process; 0 until then.
var ticksPerSecond atomic.Uint64

// A source is where a Waiter reads time and how it yields: the
// processor's counter, the monotonic clock while it calibrates, the
// counter's rate measured against that clock since the Waiter began,
// and runtime.Gosched. Tests give a Waiter a source of their own, so
// that what they assert follows from the calls they make, not from how
// much CPU a loaded machine gave them.
type source struct {
	counter func() uint64
	now     func() time.Time
	// startRate starts measuring the counter's rate; the function it
	// returns gives ticks per microsecond so far (0: not known yet).
	startRate func() func() float64
	yield     func()
	// known is the rate measured once for the process: ticksPerSecond
	// for the real source.
	known *atomic.Uint64
}

var machine = source{
	counter:   cycles.Read,
	now:       time.Now,
	startRate: func() func() float64 { return cycles.StartClock().Estimate },
	yield:     runtime.Gosched,
	known:     &ticksPerSecond,
}

// A Waiter paces one goroutine's busy-poll loop: see the package
// documentation. New makes one; the zero value never yields and never
// ends the loop.
type Waiter struct {
	ctx  context.Context
	done <-chan struct{}
	src  *source

	interval time.Duration
	calls    uint64 // Spin calls
	next     uint64 // the call that checks next
	stride   uint64 // calls from one check to the next
	every    uint64 // counter ticks per interval; 0 while calibrating
	last     uint64 // counter at the last yield (or at New)
	check0   uint64 // counter at the last check
	yields   uint64

	// Calibration: the counter's rate since New, and the clock at New
	// and at the last yield.
	rate     func() float64
	start    time.Time
	lastTime time.Time
}

// New returns a Waiter that yields every interval (DefaultInterval
// unless there is a reason; 0 or less: never) and ends the loop when ctx
// is done (a nil ctx never is).
func New(ctx context.Context, interval time.Duration) *Waiter {
	return newWaiter(ctx, interval, &machine)
}

func newWaiter(ctx context.Context, interval time.Duration, src *source) *Waiter {
	if ctx == nil {
		ctx = context.Background()
	}
	w := &Waiter{ctx: ctx, done: ctx.Done(), src: src, interval: max(interval, 0), next: 1, stride: 1}
	w.last = src.counter()
	w.check0 = w.last
	if rate := src.known.Load(); rate != 0 {
		w.every = ticksFor(rate, w.interval)
	} else {
		w.rate, w.start = src.startRate(), src.now()
		w.lastTime = w.start
	}
	return w
}

// ticksFor converts d to counter ticks at rate ticks per second, at
// least one.
func ticksFor(rate uint64, d time.Duration) uint64 {
	return max(uint64(float64(rate)*d.Seconds()), 1)
}

// ErrNilWaiter is what Spin returns for a nil *Waiter: a loop paced by
// none would never end on its context.
var ErrNilWaiter = errors.New("spin: Spin on a nil *Waiter (make one with spin.New)")

// Spin is called on every pass of the loop. It returns ctx's error once
// ctx is done, and nil otherwise, after yielding to the scheduler if the
// interval has passed since the last yield. On a nil *Waiter it returns
// ErrNilWaiter.
func (w *Waiter) Spin() error {
	if w == nil {
		return ErrNilWaiter
	}
	w.calls++
	if w.calls < w.next {
		return nil
	}
	return w.check()
}

// check is Spin's slow path: the context, the counter, maybe a yield.
func (w *Waiter) check() error {
	select {
	case <-w.done:
		return w.ctx.Err()
	default:
	}
	if w.interval == 0 {
		w.next = w.calls + maxStride
		return nil
	}
	if w.every == 0 {
		w.next = w.calls + 1
		if w.calibrate(); w.every == 0 {
			return nil
		}
	}
	now := w.src.counter()
	if now-w.check0 > w.every/stridePace {
		w.stride = 1
	} else if w.stride < maxStride {
		w.stride *= 2
	}
	w.check0, w.next = now, w.calls+w.stride
	if now-w.last >= w.every {
		w.src.yield()
		w.yields++
		w.last = w.src.counter()
	}
	return nil
}

// calibrate yields by the clock until the calibration window has
// passed, then measures the counter's rate.
func (w *Waiter) calibrate() {
	t := w.src.now()
	if t.Sub(w.start) >= calibration {
		if perUsec := w.rate(); perUsec > 0 {
			rate := uint64(perUsec * 1e6)
			w.src.known.CompareAndSwap(0, rate)
			w.every = ticksFor(rate, w.interval)
			return
		}
	}
	if t.Sub(w.lastTime) >= w.interval {
		w.src.yield()
		w.yields++
		w.lastTime, w.last = w.src.now(), w.src.counter()
	}
}

// Yields reports how many times the Waiter has yielded (0 for a nil
// *Waiter).
func (w *Waiter) Yields() uint64 {
	if w == nil {
		return 0
	}
	return w.yields
}
