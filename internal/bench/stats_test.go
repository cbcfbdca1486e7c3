package bench

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// seq returns 1, 2, ..., n.
func seq(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i + 1)
	}
	return s
}

func TestSummarizeLatency(t *testing.T) {
	approx := cmpopts.EquateApprox(0, 1e-9)
	tests := []struct {
		name    string
		samples []float64
		want    Latency
	}{{
		// 3 samples: the 2 largest are left out of the statistics, the
		// sample at index n (1) is t_max, as perftest prints it.
		name:    "three",
		samples: []float64{5, 1, 3},
		want:    Latency{Samples: 1, Min: 1, Median: 1, Avg: 1, Stdev: 0, P99: 3, P999: 3, Max: 3},
	}, {
		// 1..102: n = 100 kept; an even count, so the median is the mean
		// of the 50th and 51st; ceil(99) = 99 and ceil(99.9) = 100 are
		// the percentile indexes.
		name:    "1 to 102",
		samples: seq(102),
		want: Latency{Samples: 100, Min: 1, Median: 50.5, Avg: 50.5, Stdev: math.Sqrt((100*100 - 1) / 12.0),
			P99: 100, P999: 101, Max: 101},
	}, {
		// 1..1003 shuffled: n = 1001, odd, the median is the middle one;
		// ceil(990.99) = 991 and ceil(999.999) = 1000.
		name:    "1 to 1003 reversed",
		samples: reversed(seq(1003)),
		want: Latency{Samples: 1001, Min: 1, Median: 501, Avg: 501, Stdev: math.Sqrt((1001*1001 - 1) / 12.0),
			P99: 992, P999: 1001, Max: 1002},
	}, {
		name:    "constant",
		samples: []float64{7, 7, 7, 7, 7, 7},
		want:    Latency{Samples: 4, Min: 7, Median: 7, Avg: 7, P99: 7, P999: 7, Max: 7},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.samples...)
			got, err := SummarizeLatency(tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("SummarizeLatency (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.samples); diff != "" {
				t.Errorf("the samples were changed (-want +got):\n%s", diff)
			}
		})
	}
}

func reversed(s []float64) []float64 {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

func TestSummarizeLatencyErrors(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		tooFew  bool
	}{
		{"none", nil, true},
		{"two", []float64{1, 2}, true},
		{"NaN", []float64{1, math.NaN(), 2}, false},
		{"infinite", []float64{1, math.Inf(1), 2}, false},
		{"negative", []float64{1, -1, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SummarizeLatency(tt.samples)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrTooFewSamples); got != tt.tooFew {
				t.Errorf("errors.Is(%v, ErrTooFewSamples) = %v, want %v", err, got, tt.tooFew)
			}
		})
	}
}

func TestPercentileIndex(t *testing.T) {
	tests := []struct {
		n    int
		p    float64
		want int
	}{
		{1, 0.99, 1}, {100, 0.99, 99}, {101, 0.99, 100}, {1000, 0.999, 999}, {1001, 0.999, 1000}, {7, 0.5, 4},
	}
	for _, tt := range tests {
		if got := percentileIndex(tt.n, tt.p); got != tt.want {
			t.Errorf("percentileIndex(%d, %v) = %d, want %d", tt.n, tt.p, got, tt.want)
		}
	}
}

func TestLatencySamples(t *testing.T) {
	tests := []struct {
		name   string
		stamps []uint64
		rate   float64
		rtt    int
		want   []float64
	}{
		{"round trips", []uint64{1000, 3000, 7000}, 1000, 1, []float64{2, 4}},
		{"ping-pong halves", []uint64{1000, 3000, 7000}, 1000, 2, []float64{1, 2}},
		{"one stamp", []uint64{5}, 1000, 1, nil},
		{"no rate", []uint64{1, 2, 3}, 0, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, LatencySamples(tt.stamps, tt.rate, tt.rtt)); diff != "" {
				t.Errorf("LatencySamples (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeBandwidth(t *testing.T) {
	approx := cmpopts.EquateApprox(1e-12, 0)
	// 1 cycle per microsecond: stamps are microseconds.
	tests := []struct {
		name  string
		size  int
		st    BWStamps
		cqMod int
		want  Bandwidth
	}{{
		// 4 messages of 1 MiB posted at 0, 1, 2, 3 us, every one
		// signalled and done 1 us after its post: 4 MiB in 4 us.
		name:  "every message signalled",
		size:  MiB,
		st:    BWStamps{Posted: []uint64{100, 101, 102, 103}, Completed: []uint64{101, 102, 103, 104}},
		cqMod: 1,
		want:  Bandwidth{Seconds: 4e-6, MiBps: 1e6, Mpps: 1, PeakMiBps: 1e6},
	}, {
		// cq_mod 2: messages 1 and 3 are signalled. The best span is
		// post 2 (at 2) to completion 3 (at 3): 2 messages in 1 us.
		name:  "moderated",
		size:  MiB,
		st:    BWStamps{Posted: []uint64{0, 1, 2, 3}, Completed: []uint64{0, 4, 0, 3}},
		cqMod: 2,
		want:  Bandwidth{Seconds: 3e-6, MiBps: 4e6 / 3, Mpps: 4.0 / 3, PeakMiBps: 2e6},
	}, {
		// 5 messages, cq_mod 2: the last is signalled too (5 % 2 != 0),
		// and the span from its post (50) to its completion (55) is the
		// best.
		name:  "last signalled",
		size:  1024,
		st:    BWStamps{Posted: []uint64{10, 20, 30, 40, 50}, Completed: []uint64{0, 40, 0, 52, 55}},
		cqMod: 2,
		want:  Bandwidth{Seconds: 45e-6, MiBps: 5 * 1024 / 45e-6 / MiB, Mpps: 5 / 45.0, PeakMiBps: 1024 / 5e-6 / MiB},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SummarizeBandwidth(tt.size, tt.st, tt.cqMod, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("SummarizeBandwidth (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeBandwidthErrors(t *testing.T) {
	ok := BWStamps{Posted: []uint64{1, 2}, Completed: []uint64{2, 3}}
	tests := []struct {
		name  string
		size  int
		st    BWStamps
		cqMod int
		rate  float64
	}{
		{"no stamps", 8, BWStamps{}, 1, 1},
		{"lengths differ", 8, BWStamps{Posted: []uint64{1}, Completed: []uint64{1, 2}}, 1, 1},
		{"zero size", 0, ok, 1, 1},
		{"zero cq_mod", 8, ok, 0, 1},
		{"no rate", 8, ok, 1, 0},
		{"end before start", 8, BWStamps{Posted: []uint64{5, 6}, Completed: []uint64{0, 4}}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := SummarizeBandwidth(tt.size, tt.st, tt.cqMod, tt.rate); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestSummarizeBandwidthNoPeak: past maxPeakSpans the peak is skipped,
// the averages are not.
func TestSummarizeBandwidthNoPeak(t *testing.T) {
	const n = 20000
	st := BWStamps{Posted: make([]uint64, n), Completed: make([]uint64, n)}
	for i := range n {
		st.Posted[i], st.Completed[i] = uint64(i), uint64(i+1)
	}
	got, err := SummarizeBandwidth(64, st, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.PeakMiBps != 0 || got.Mpps != 1 {
		t.Errorf("SummarizeBandwidth of %d spans = %+v, want no peak and 1 Mpps", n*n, got)
	}
}
