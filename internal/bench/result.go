package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Result is what one side of a run measured (or, on a server of a test
// only the client measures, what the client reported). It is the JSON
// object "purerdma bench -json" prints.
type Result struct {
	Test Test `json:"test"`
	// Role is "client" or "server"; Reporter is the role whose loop took
	// the measurement (a server prints the client's numbers for the
	// tests only the client measures).
	Role     string `json:"role"`
	Reporter string `json:"reporter"`
	Device   string `json:"device"`
	Port     int    `json:"port"`
	GIDIndex int    `json:"gid_index"`
	MTU      int    `json:"mtu"`

	Size       int `json:"size"`
	Iterations int `json:"iterations"`
	Warmup     int `json:"warmup"`
	TxDepth    int `json:"tx_depth"`
	CQMod      int `json:"cq_mod"`
	RxDepth    int `json:"rx_depth,omitempty"`
	OutReads   int `json:"out_reads,omitempty"`

	// CyclesPerUsec is the measured rate of the cycle counter.
	CyclesPerUsec float64 `json:"cycles_per_usec"`
	// GCCycles is how many garbage collections ran during the measured
	// loop.
	GCCycles uint64 `json:"gc_cycles"`

	Latency   *Latency   `json:"latency_usec,omitempty"`
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// MarshalText lets Test appear in JSON by name.
func (t Test) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("bench: unknown test %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses a test name.
func (t *Test) UnmarshalText(b []byte) error {
	v, err := ParseTest(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Validate checks that r holds one finite, non-negative set of numbers
// of the kind its test produces.
func (r *Result) Validate() error {
	if !r.Test.Valid() {
		return fmt.Errorf("bench: result of unknown test %d", uint8(r.Test))
	}
	if r.Size < 1 || r.Iterations < 1 {
		return fmt.Errorf("bench: result with size %d and %d iterations", r.Size, r.Iterations)
	}
	var nums []float64
	switch {
	case r.Test.Latency() && r.Latency != nil && r.Bandwidth == nil:
		l := r.Latency
		nums = []float64{l.Min, l.Median, l.Avg, l.Stdev, l.P99, l.P999, l.Max}
	case !r.Test.Latency() && r.Bandwidth != nil && r.Latency == nil:
		b := r.Bandwidth
		nums = []float64{b.Seconds, b.PeakMiBps, b.MiBps, b.Mpps}
	default:
		return fmt.Errorf("bench: %v result without its numbers", r.Test)
	}
	for _, v := range append(nums, r.CyclesPerUsec) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("bench: %v result holds %v", r.Test, v)
		}
	}
	return nil
}

// WriteJSON writes r as one JSON object on one line.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

const line = "---------------------------------------------------------------------------------------\n"

// Column headings and rows in perftest's layout, so that one parser reads
// both programs' output.
const (
	latHeading = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	latRow     = " %-7d %-10d     %-7.2f        %-7.2f      %-7.2f        %-7.2f        %-7.2f        %-7.2f                %-7.2f\n"
	bwHeading  = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	bwRow      = " %-7d    %-10d       %-7.2f            %-7.2f             %-7.6f\n"
)

// WriteText writes r the way perftest prints a result: a banner naming
// the test and its parameters, the column headings and one row.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(line)
	fmt.Fprintf(&b, "                    purerdma bench %s (%s)\n", r.Test, r.Role)
	fmt.Fprintf(&b, " Device         : %s\t\tPort           : %d\n", r.Device, r.Port)
	fmt.Fprintf(&b, " GID index      : %d\t\tMtu            : %d[B]\n", r.GIDIndex, r.MTU)
	fmt.Fprintf(&b, " TX depth       : %d\t\tCQ Moderation  : %d\n", r.TxDepth, r.CQMod)
	if r.OutReads > 0 {
		fmt.Fprintf(&b, " Outstand reads : %d\n", r.OutReads)
	}
	fmt.Fprintf(&b, " Warm-up iters  : %d\t\tMeasured by    : %s\n", r.Warmup, r.Reporter)
	fmt.Fprintf(&b, " Cycles/usec    : %.2f\t\tGC cycles      : %d\n", r.CyclesPerUsec, r.GCCycles)
	b.WriteString(line)
	switch {
	case r.Latency != nil:
		l := r.Latency
		b.WriteString(latHeading)
		fmt.Fprintf(&b, latRow, r.Size, r.Iterations, l.Min, l.Max, l.Median, l.Avg, l.Stdev, l.P99, l.P999)
	case r.Bandwidth != nil:
		bw := r.Bandwidth
		b.WriteString(bwHeading)
		fmt.Fprintf(&b, bwRow, r.Size, r.Iterations, bw.PeakMiBps, bw.MiBps, bw.Mpps)
	}
	b.WriteString(line)
	_, err := io.WriteString(w, b.String())
	return err
}
