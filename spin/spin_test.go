package spin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/cycles"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// spinFor calls w.Spin for d of wall time and returns the time it took.
func spinFor(t *testing.T, w *Waiter, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if err := w.Spin(); err != nil {
			t.Fatalf("Spin: %v", err)
		}
	}
	return time.Since(start)
}

// checkYields fails unless a Waiter with interval yielded at least once
// and at most once per interval over elapsed. How often it yields at
// least depends on how much CPU the loop got, which a loaded machine
// (CI with VMs booting beside it) does not promise: no lower bound
// past one is asserted.
func checkYields(t *testing.T, w *Waiter, interval, elapsed time.Duration) {
	t.Helper()
	most := uint64(elapsed/interval) + 1
	least := uint64(1)
	if y := w.Yields(); y < least || y > most {
		t.Errorf("%d yields in %v at one per %v, want %d-%d", y, elapsed, interval, least, most)
	}
}

func TestSpinYieldsOnSchedule(t *testing.T) {
	// The first Waiter of the process yields by the clock while it
	// measures the counter, then by the counter.
	const interval = 2 * time.Millisecond
	w := New(context.Background(), interval)
	checkYields(t, w, interval, spinFor(t, w, 100*time.Millisecond))
	if ticksPerSecond.Load() == 0 {
		t.Fatal("no counter rate after 100 ms of spinning")
	}

	// Later Waiters take the measured rate and never read the clock.
	w = New(context.Background(), interval)
	if w.every == 0 {
		t.Fatal("a second Waiter is calibrating again")
	}
	checkYields(t, w, interval, spinFor(t, w, 50*time.Millisecond))
}

// TestCounterRate compares the rate a Waiter measured with one taken
// over a sleep: a wrong rate would make every later Waiter yield too
// often or too rarely.
func TestCounterRate(t *testing.T) {
	w := New(context.Background(), DefaultInterval)
	spinFor(t, w, calibration+10*time.Millisecond)
	got := float64(ticksPerSecond.Load())
	c0, t0 := cycles.Read(), time.Now()
	time.Sleep(50 * time.Millisecond)
	want := float64(cycles.Read()-c0) / time.Since(t0).Seconds()
	if got < want/2 || got > want*2 {
		t.Errorf("measured %.3g ticks/s, a 50 ms sleep says %.3g", got, want)
	}
}

// TestSpinSlowCalls spins fast until the stride is at its longest, then
// makes every call take 1 ms: the yields must keep their schedule.
func TestSpinSlowCalls(t *testing.T) {
	const interval = 5 * time.Millisecond
	w := New(context.Background(), interval)
	spinFor(t, w, calibration+10*time.Millisecond)
	if w.stride != maxStride {
		t.Fatalf("stride %d after fast calls, want %d", w.stride, maxStride)
	}
	y0, start := w.Yields(), time.Now()
	for time.Since(start) < 100*time.Millisecond {
		time.Sleep(time.Millisecond)
		if err := w.Spin(); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if w.stride != 1 {
		t.Errorf("stride %d after 1 ms calls, want 1", w.stride)
	}
	// One interval may be lost to the last long stride. At least one
	// yield, not a rate: see checkYields.
	most := uint64(elapsed/interval) + 1
	if y := w.Yields() - y0; y < 1 || y > most {
		t.Errorf("%d yields in %v of 1 ms calls at one per %v, want 1-%d", y, elapsed, interval, most)
	}
}

func TestSpinNeverYields(t *testing.T) {
	for _, interval := range []time.Duration{0, -time.Second} {
		w := New(context.Background(), interval)
		spinFor(t, w, 30*time.Millisecond)
		if y := w.Yields(); y != 0 {
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
	w := New(nil, time.Millisecond)
	spinFor(t, w, 5*time.Millisecond)
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
