package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func latResult() *Result {
	return &Result{Test: WriteLat, Role: "client", Reporter: "client", Device: "rxe1", Port: 1, GIDIndex: 1,
		MTU: 1024, Size: 64, Iterations: 1000, Warmup: 100, TxDepth: 1, CQMod: 1, CyclesPerUsec: 2600,
		Latency: &Latency{Samples: 997, Min: 15.21, Median: 15.59, Avg: 16.02, Stdev: 1.5, P99: 40.12, P999: 150.5, Max: 4051.88}}
}

func bwResult() *Result {
	return &Result{Test: SendBW, Role: "server", Reporter: "client", Device: "rxe1", Port: 1, GIDIndex: 1,
		MTU: 1024, Size: 65536, Iterations: 500, Warmup: 128, TxDepth: 128, CQMod: 1, RxDepth: 512,
		CyclesPerUsec: 2600, Bandwidth: &Bandwidth{Seconds: 2.2, PeakMiBps: 48.23, MiBps: 14.43, Mpps: 0.000231}}
}

// TestResultJSON pins the JSON object's shape: field names and nesting
// are what scripts read.
func TestResultJSON(t *testing.T) {
	tests := []struct {
		name string
		r    *Result
		want string
	}{{
		name: "latency",
		r:    latResult(),
		want: `{"test":"write_lat","role":"client","reporter":"client","device":"rxe1","port":1,"gid_index":1,"mtu":1024,` +
			`"size":64,"iterations":1000,"warmup":100,"tx_depth":1,"cq_mod":1,"cycles_per_usec":2600,"gc_cycles":0,` +
			`"latency_usec":{"samples":997,"min":15.21,"median":15.59,"avg":16.02,"stdev":1.5,"p99":40.12,"p99_9":150.5,"max":4051.88}}`,
	}, {
		name: "bandwidth",
		r:    bwResult(),
		want: `{"test":"send_bw","role":"server","reporter":"client","device":"rxe1","port":1,"gid_index":1,"mtu":1024,` +
			`"size":65536,"iterations":500,"warmup":128,"tx_depth":128,"cq_mod":1,"rx_depth":512,"cycles_per_usec":2600,"gc_cycles":0,` +
			`"bandwidth":{"seconds":2.2,"peak_mib_per_sec":48.23,"avg_mib_per_sec":14.43,"msg_rate_mpps":0.000231}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.r.WriteJSON(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want+"\n", b.String()); diff != "" {
				t.Errorf("WriteJSON (-want +got):\n%s", diff)
			}
			got, err := DecodeDone(b.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.r, got); diff != "" {
				t.Errorf("DecodeDone(WriteJSON) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResultText: the row is in perftest's columns, so one parser reads
// both programs.
func TestResultText(t *testing.T) {
	tests := []struct {
		name    string
		r       *Result
		heading string
		fields  []string
	}{
		{"latency", latResult(), " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]",
			[]string{"64", "1000", "15.21", "4051.88", "15.59", "16.02", "1.50", "40.12", "150.50"}},
		{"bandwidth", bwResult(), " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
			[]string{"65536", "500", "48.23", "14.43", "0.000231"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(b.String(), "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, tt.heading) {
					if diff := cmp.Diff(tt.fields, strings.Fields(lines[i+1])); diff != "" {
						t.Errorf("result row (-want +got):\n%s", diff)
					}
					return
				}
			}
			t.Errorf("no heading %q in\n%s", tt.heading, b.String())
		})
	}
}

func TestResultValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Result)
		ok   bool
	}{
		{"latency", func(*Result) {}, true},
		{"unknown test", func(r *Result) { r.Test = 0 }, false},
		{"no size", func(r *Result) { r.Size = 0 }, false},
		{"no numbers", func(r *Result) { r.Latency = nil }, false},
		{"wrong kind", func(r *Result) { r.Bandwidth = &Bandwidth{} }, false},
		{"NaN", func(r *Result) { r.Latency.Median = math.NaN() }, false},
		{"negative", func(r *Result) { r.Latency.Min = -1 }, false},
		{"infinite rate", func(r *Result) { r.CyclesPerUsec = math.Inf(1) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := latResult()
			tt.edit(r)
			if err := r.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
	if err := bwResult().Validate(); err != nil {
		t.Errorf("Validate of a bandwidth result = %v", err)
	}
}

func TestTestNames(t *testing.T) {
	for _, tt := range Tests() {
		got, err := ParseTest(tt.String())
		if err != nil || got != tt {
			t.Errorf("ParseTest(%q) = %v, %v", tt.String(), got, err)
		}
		b, _ := json.Marshal(tt)
		var back Test
		if err := json.Unmarshal(b, &back); err != nil || back != tt {
			t.Errorf("JSON round trip of %v: %s -> %v, %v", tt, b, back, err)
		}
	}
	if got, err := ParseTest("ib_read_bw"); err != nil || got != ReadBW {
		t.Errorf(`ParseTest("ib_read_bw") = %v, %v`, got, err)
	}
	if _, err := ParseTest("flush_lat"); err == nil {
		t.Error(`ParseTest("flush_lat") succeeded`)
	}
	if _, err := json.Marshal(Test(9)); err == nil {
		t.Error("Test(9) marshalled")
	}
	if s := Test(9).String(); s != "Test(9)" {
		t.Errorf("Test(9).String() = %q", s)
	}
	kinds := map[Test][3]any{WriteLat: {true, true, 2}, SendLat: {true, true, 2}, ReadLat: {true, false, 1},
		AtomicLat: {true, false, 1}, WriteBW: {false, false, 1}, SendBW: {false, false, 1}}
	for tt, k := range kinds {
		if got := [3]any{tt.Latency(), tt.PingPong(), tt.RTTFactor()}; got != k {
			t.Errorf("%v: Latency, PingPong, RTTFactor = %v, want %v", tt, got, k)
		}
	}
}
