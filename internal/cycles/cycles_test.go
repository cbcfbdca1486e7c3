package cycles

import (
	"math"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// TestReadAdvances checks that the counter moves forward with time: at
// least one tick per microsecond (every counter this package reads runs
// at MHz rates or more), never backwards on one goroutine.
func TestReadAdvances(t *testing.T) {
	a := Read()
	time.Sleep(5 * time.Millisecond)
	b := Read()
	if b <= a {
		t.Fatalf("counter went from %d to %d over 5 ms", a, b)
	}
	if b-a < 5000 {
		t.Errorf("counter advanced %d over at least 5 ms: slower than 1 MHz", b-a)
	}
}

func TestClock(t *testing.T) {
	c := StartClock()
	if r := c.Rate(); r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		t.Fatalf("Rate = %v", r)
	}
	if e := c.Estimate(); e <= 0 {
		t.Fatalf("Estimate = %v", e)
	}
}

func BenchmarkRead(b *testing.B) {
	for b.Loop() {
		Read()
	}
}
