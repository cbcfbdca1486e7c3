package spin

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// fakeTime is a source whose counter and clock move only when the test
// says: one tick a nanosecond. What the tests below assert follows from
// the calls they make, so a loaded machine cannot change it.
type fakeTime struct {
	ticks  uint64 // the counter, which is the clock too
	yields int
	known  atomic.Uint64
	nows   int // clock reads
}

const fakeTicksPerUsec = 1000

func (f *fakeTime) source() *source {
	base := time.Unix(1e9, 0)
	return &source{
		counter: func() uint64 { return f.ticks },
		now:     func() time.Time { f.nows++; return base.Add(time.Duration(f.ticks)) },
		startRate: func() func() float64 {
			t0 := f.ticks
			return func() float64 {
				if f.ticks == t0 {
					return 0
				}
				return fakeTicksPerUsec
			}
		},
		yield: func() { f.yields++ },
		known: &f.known,
	}
}

// spin calls w.Spin n times, moving the clock by step before each.
func (f *fakeTime) spin(t *testing.T, w *Waiter, n int, step time.Duration) {
	t.Helper()
	for range n {
		f.ticks += uint64(step)
		if err := w.Spin(); err != nil {
			t.Fatalf("Spin: %v", err)
		}
	}
}

// TestSpinYieldsOnSchedule: the first Waiter of a process yields by the
// clock while it measures the counter's rate, then by the counter, once
// per interval; later Waiters take the measured rate and never read the
// clock.
func TestSpinYieldsOnSchedule(t *testing.T) {
	const interval = 2 * time.Millisecond
	var f fakeTime
	w := newWaiter(context.Background(), interval, f.source())
	// 1000 calls 100 µs apart: 100 ms, 20 of them calibrating.
	f.spin(t, w, 1000, 100*time.Microsecond)
	if got, want := f.known.Load(), uint64(fakeTicksPerUsec*1e6); got != want {
		t.Fatalf("measured rate %d ticks/s, want %d", got, want)
	}
	if w.every != uint64(interval) {
		t.Errorf("%d ticks per interval, want %d", w.every, uint64(interval))
	}
	// One yield per 2 ms of the 100 ms: the first at 2 ms.
	if got := f.yields; got != 50 || w.Yields() != 50 {
		t.Errorf("%d yields (Yields %d) in 100 ms at one per %v, want 50", got, w.Yields(), interval)
	}

	nows := f.nows
	f.yields = 0
	w = newWaiter(context.Background(), interval, f.source())
	if w.every == 0 {
		t.Fatal("a second Waiter is calibrating again")
	}
	f.spin(t, w, 500, 100*time.Microsecond)
	if f.nows != nows {
		t.Errorf("a second Waiter read the clock %d times", f.nows-nows)
	}
	if f.yields != 25 {
		t.Errorf("second Waiter: %d yields in 50 ms at one per %v, want 25", f.yields, interval)
	}
}

// TestSpinSlowCalls spins fast until the stride is at its longest, then
// makes every call take 1 ms: the stride drops to 1 at the next check
// and the yields keep their schedule, losing at most the one interval
// the last long stride spans.
func TestSpinSlowCalls(t *testing.T) {
	const interval = 5 * time.Millisecond
	var f fakeTime
	f.known.Store(fakeTicksPerUsec * 1e6)
	w := newWaiter(context.Background(), interval, f.source())
	// 10 ns calls: each check finds less than interval/stridePace passed.
	f.spin(t, w, 200, 10*time.Nanosecond)
	if w.stride != maxStride {
		t.Fatalf("stride %d after fast calls, want %d", w.stride, maxStride)
	}
	if f.yields != 0 {
		t.Fatalf("%d yields in 2 µs", f.yields)
	}
	// 100 calls of 1 ms: 100 ms, one yield per 5 ms, the first delayed
	// by at most the maxStride-call stride in force.
	f.spin(t, w, 100, time.Millisecond)
	if w.stride != 1 {
		t.Errorf("stride %d after 1 ms calls, want 1", w.stride)
	}
	if f.yields < 19 || f.yields > 20 {
		t.Errorf("%d yields in 100 ms of 1 ms calls at one per %v, want 19-20", f.yields, interval)
	}
}

// TestSpinMachineSource runs the real counter and clock: a Waiter of
// the process calibrates, and Spin neither fails nor stops. How often
// it yields depends on the CPU the loop got and is not asserted (the
// fake-time tests above pin the schedule).
func TestSpinMachineSource(t *testing.T) {
	w := New(context.Background(), time.Millisecond)
	// Calibration takes 20 ms of the clock; a minute is only there so
	// that a broken clock fails here instead of hanging the run.
	giveUp := time.Now().Add(time.Minute)
	for i := 0; w.every == 0; i++ {
		if err := w.Spin(); err != nil {
			t.Fatalf("Spin: %v", err)
		}
		if i%1000 == 999 {
			if time.Now().After(giveUp) {
				t.Fatalf("the counter's rate was not measured after %d calls", i+1)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if ticksPerSecond.Load() == 0 {
		t.Fatal("the measured rate was not kept for later Waiters")
	}
}

func TestSpinNeverYields(t *testing.T) {
	for _, interval := range []time.Duration{0, -time.Second} {
		var f fakeTime
		w := newWaiter(context.Background(), interval, f.source())
		f.spin(t, w, 100, time.Millisecond)
		if y := w.Yields(); y != 0 || f.yields != 0 {
			t.Errorf("interval %v: %d yields, want none", interval, y)
		}
	}
}

func TestSpinEndsWithContext(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		interval time.Duration
		want     error
	}{
		{"canceled", canceled, DefaultInterval, context.Canceled},
		{"deadline", expired, DefaultInterval, context.DeadlineExceeded},
		{"canceled, never yielding", canceled, 0, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(tc.ctx, tc.interval)
			var err error
			calls := 0
			for err == nil && calls < maxStride {
				calls++
				err = w.Spin()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("after %d calls Spin = %v, want %v", calls, err, tc.want)
			}
		})
	}
}

func TestSpinNilContext(t *testing.T) {
	var f fakeTime
	w := newWaiter(nil, time.Millisecond, f.source())
	f.spin(t, w, 100, 100*time.Microsecond)
	if f.yields == 0 {
		t.Error("no yield in 10 ms of fake time with a nil context")
	}
}

func TestSpinAllocs(t *testing.T) {
	// A 1 ns interval: every check yields, so the slow path is measured
	// as well.
	for _, interval := range []time.Duration{DefaultInterval, time.Nanosecond} {
		w := New(context.Background(), interval)
		if n := testing.AllocsPerRun(10000, func() { _ = w.Spin() }); n != 0 {
			t.Errorf("interval %v: %v allocations per Spin", interval, n)
		}
		if interval == time.Nanosecond && w.Yields() == 0 {
			t.Errorf("interval %v: no yield in 10000 calls", interval)
		}
	}
}

func BenchmarkSpin(b *testing.B) {
	w := New(context.Background(), DefaultInterval)
	for b.Loop() {
		_ = w.Spin()
	}
}

// TestSpinNilWaiter: a nil *Waiter is an error, not a panic.
func TestSpinNilWaiter(t *testing.T) {
	var w *Waiter
	if err := w.Spin(); !errors.Is(err, ErrNilWaiter) {
		t.Errorf("Spin on a nil Waiter = %v, want ErrNilWaiter", err)
	}
	if n := w.Yields(); n != 0 {
		t.Errorf("Yields of a nil Waiter = %d", n)
	}
}
