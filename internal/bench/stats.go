package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// LatencyTail is how many of the largest samples perftest leaves out of
// its statistics (LAT_MEASURE_TAIL in print_report_lat).
const LatencyTail = 2

// Latency summarises latency samples in microseconds the way perftest's
// print_report_lat does.
type Latency struct {
	// Samples is how many samples were summarised, after the
	// LatencyTail largest were left out.
	Samples int `json:"samples"`
	// Min is the smallest sample (t_min).
	Min float64 `json:"min"`
	// Median is perftest's t_typical: the middle sample, or the mean of
	// the two middle ones.
	Median float64 `json:"median"`
	// Avg and Stdev are the mean and population standard deviation
	// (t_avg, t_stdev).
	Avg   float64 `json:"avg"`
	Stdev float64 `json:"stdev"`
	// P99 and P999 are the samples at index ceil(0.99 n) and
	// ceil(0.999 n) of the sorted n (perftest's "99% percentile" and
	// "99.9% percentile").
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	// Max is perftest's t_max: the sample at index n of the sorted
	// samples, so the second largest of all.
	Max float64 `json:"max"`
}

// ErrTooFewSamples is returned when there are not enough samples to
// leave the tail out and keep one.
var ErrTooFewSamples = errors.New("bench: too few latency samples")

// SummarizeLatency computes perftest's latency statistics over samples
// (microseconds). It sorts a copy; samples is not changed. It needs more
// than LatencyTail samples.
func SummarizeLatency(samples []float64) (Latency, error) {
	if len(samples) <= LatencyTail {
		return Latency{}, fmt.Errorf("%w: %d, need at least %d", ErrTooFewSamples, len(samples), LatencyTail+1)
	}
	for _, s := range samples {
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			return Latency{}, fmt.Errorf("bench: latency sample %v is not a duration", s)
		}
	}
	d := slices.Clone(samples)
	slices.Sort(d)
	n := len(d) - LatencyTail
	var sum float64
	for _, v := range d[:n] {
		sum += v
	}
	avg := sum / float64(n)
	var sq float64
	for _, v := range d[:n] {
		sq += (v - avg) * (v - avg)
	}
	return Latency{
		Samples: n,
		Min:     d[0],
		Median:  median(d[:n]),
		Avg:     avg,
		Stdev:   math.Sqrt(sq / float64(n)),
		P99:     d[percentileIndex(n, 0.99)],
		P999:    d[percentileIndex(n, 0.999)],
		Max:     d[n],
	}, nil
}

// median is perftest's get_median over sorted d.
func median(d []float64) float64 {
	n := len(d)
	if n%2 == 0 {
		return (d[n/2] + d[n/2-1]) / 2
	}
	return d[n/2]
}

// percentileIndex is perftest's ceil(n * p), computed in float64 as C
// computes it; it never exceeds n.
func percentileIndex(n int, p float64) int {
	return min(int(math.Ceil(float64(n)*p)), n)
}

// LatencySamples turns the cycle stamps of consecutive iterations into
// samples in microseconds: stamp i+1 minus stamp i, divided by the
// cycles per microsecond and by the test's RTTFactor, as perftest does
// with its tposted stamps.
func LatencySamples(stamps []uint64, cyclesPerUsec float64, rttFactor int) []float64 {
	if len(stamps) < 2 || cyclesPerUsec <= 0 || rttFactor < 1 {
		return nil
	}
	out := make([]float64, len(stamps)-1)
	q := cyclesPerUsec * float64(rttFactor)
	for i := range out {
		out[i] = float64(stamps[i+1]-stamps[i]) / q
	}
	return out
}

// Bandwidth is a stream's throughput, as perftest's print_report_bw
// reports it.
type Bandwidth struct {
	// Seconds is the time from the first post to the last completion.
	Seconds float64 `json:"seconds"`
	// PeakMiBps is perftest's "BW peak": the best rate over any run of
	// consecutive messages that ends with a signalled completion.
	PeakMiBps float64 `json:"peak_mib_per_sec"`
	// MiBps is bytes per second / 2^20: perftest's "BW average[MB/sec]".
	MiBps float64 `json:"avg_mib_per_sec"`
	// Mpps is messages per second / 10^6: perftest's "MsgRate[Mpps]".
	Mpps float64 `json:"msg_rate_mpps"`
}

// maxPeakSpans bounds the work of the peak bandwidth search.
const maxPeakSpans = 2e7

// MiB is the unit perftest's "MB/sec" counts in.
const MiB = 1 << 20

// BWStamps are the cycle stamps of a bandwidth run: Posted[i] when
// message i was posted, Completed[i] when a completion reported message
// i done (zero for messages whose completion was not signalled).
type BWStamps struct {
	Posted, Completed []uint64
}

// SummarizeBandwidth computes perftest's bandwidth, peak bandwidth and
// message rate of size-byte messages from the stamps of a run. cqMod is
// how often a message was signalled (every cqMod-th and the last).
func SummarizeBandwidth(size int, st BWStamps, cqMod int, cyclesPerUsec float64) (Bandwidth, error) {
	n := len(st.Posted)
	if n == 0 || len(st.Completed) != n {
		return Bandwidth{}, fmt.Errorf("bench: %d posted and %d completion stamps", n, len(st.Completed))
	}
	if cqMod < 1 || cyclesPerUsec <= 0 || size < 1 {
		return Bandwidth{}, fmt.Errorf("bench: bad bandwidth parameters: size %d, cq moderation %d, %v cycles/us", size, cqMod, cyclesPerUsec)
	}
	end := st.Completed[n-1]
	if end <= st.Posted[0] {
		return Bandwidth{}, fmt.Errorf("bench: the last completion (%d) is not after the first post (%d)", end, st.Posted[0])
	}
	perSec := cyclesPerUsec * 1e6
	secs := float64(end-st.Posted[0]) / perSec
	b := Bandwidth{
		Seconds: secs,
		MiBps:   float64(size) * float64(n) / secs / MiB,
		Mpps:    float64(n) / secs / 1e6,
	}
	// perftest's peak: the shortest time per message over every span
	// from a post i to a signalled completion j >= i. That is n*n/cqMod
	// spans; past maxPeakSpans the peak is left 0 (perftest -N).
	if float64(n)*float64(n)/float64(cqMod) > maxPeakSpans {
		return b, nil
	}
	best := math.Inf(1)
	span := func(i, j int) {
		if st.Completed[j] > st.Posted[i] {
			best = min(best, float64(st.Completed[j]-st.Posted[i])/float64(j-i+1))
		}
	}
	for i := range n {
		for j := (i+1+cqMod-1)/cqMod*cqMod - 1; j < n; j += cqMod {
			span(i, j)
		}
		if n%cqMod != 0 {
			span(i, n-1)
		}
	}
	if !math.IsInf(best, 1) {
		b.PeakMiBps = float64(size) / (best / perSec) / MiB
	}
	return b, nil
}
