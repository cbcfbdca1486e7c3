package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/rpma"
)

func TestParseRpmaBenchArgs(t *testing.T) {
	lat := rpmaBenchConfig{size: 64, iters: 1000, warmup: 100, txDepth: 1, port: 18516,
		yield: 5 * time.Millisecond, timeout: 10 * time.Second}
	with := func(c rpmaBenchConfig, f func(*rpmaBenchConfig)) rpmaBenchConfig {
		f(&c)
		return c
	}
	tests := []struct {
		args []string
		want rpmaBenchConfig
	}{
		{[]string{"write_lat", "-b", "198.18.0.1"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.flushEvery, c.bind = rpmaWriteLat, 1, "198.18.0.1"
		})},
		// Flags may follow the server.
		{[]string{"read_lat", "198.18.0.1", "-s", "4096", "-n", "20", "-w", "0", "-json", "-flush", "emulated"},
			with(lat, func(c *rpmaBenchConfig) {
				c.test, c.server, c.size, c.iters, c.warmup, c.json, c.flush, c.flushGiven =
					rpmaReadLat, "198.18.0.1", 4096, 20, 0, true, rpma.FlushEmulated, true
			})},
		{[]string{"send_lat", "-p", "7204", "-yield", "0", "-connect-timeout", "3s", "host"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.port, c.yield, c.timeout, c.server = rpmaSendLat, 7204, 0, 3*time.Second, "host"
		})},
		// write_bw: 128 writes in flight, a flush every 32; the warm-up
		// is one window.
		{[]string{"write_bw", "-s", "65536", "host", "-flush", "native"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.size, c.server, c.txDepth, c.flushEvery, c.warmup, c.flush, c.flushGiven =
				rpmaWriteBW, 65536, "host", 128, 32, 128, rpma.FlushNative, true
		})},
		// The default flush interval never exceeds the depth.
		{[]string{"write_bw", "-t", "8", "host"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.server, c.txDepth, c.flushEvery, c.warmup = rpmaWriteBW, "host", 8, 8, 8
		})},
		{[]string{"write_bw", "-t", "10", "-f", "1", "-w", "3", "-b", "a"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.bind, c.txDepth, c.flushEvery, c.warmup = rpmaWriteBW, "a", 10, 1, 3
		})},
		{[]string{"write_lat", "-verify", "host"}, with(lat, func(c *rpmaBenchConfig) {
			c.test, c.flushEvery, c.server, c.verify = rpmaWriteLat, 1, "host", true
		})},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseRpmaBenchArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rpmaBenchConfig{})); diff != "" {
				t.Errorf("parseRpmaBenchArgs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRpmaBenchArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error
	}{
		{nil, "needs a test"},
		{[]string{"atomic_lat", "h"}, `unknown rpma test "atomic_lat"`},
		{[]string{"write_lat"}, "-b ADDR to serve or SERVER"},
		{[]string{"write_lat", "-b", "a", "b"}, "not both"},
		{[]string{"write_lat", "a", "b"}, "one server address"},
		{[]string{"write_lat", "-b", "a", "-flush", "native"}, "-flush is the client's choice"},
		{[]string{"write_lat", "-b", "a", "-verify"}, "-verify is the client's"},
		{[]string{"write_lat", "h", "-flush", "sometimes"}, `flush method "sometimes"`},
		{[]string{"read_lat", "h", "-t", "4"}, "-t and -f are for write_bw"},
		{[]string{"write_lat", "h", "-f", "4"}, "-t and -f are for write_bw"},
		{[]string{"write_bw", "h", "-t", "0"}, "depth 0"},
		{[]string{"write_bw", "h", "-t", "5000"}, "depth 5000"},
		{[]string{"write_bw", "h", "-t", "8", "-f", "9"}, "a flush every 9 writes"},
		{[]string{"write_bw", "h", "-f", "0"}, "a flush every 0 writes"},
		{[]string{"send_lat", "h", "-s", "0"}, "size 0"},
		{[]string{"send_lat", "h", "-n", "4"}, "4 iterations"},
		{[]string{"send_lat", "h", "-w", "100000000"}, "warm-up"},
		{[]string{"send_lat", "h", "-p", "70000"}, "port 70000"},
		{[]string{"send_lat", "h", "-yield", "20ms"}, "yield interval 20ms"},
		{[]string{"send_lat", "h", "-connect-timeout", "0s"}, "connect timeout 0s"},
		{[]string{"send_lat", "h", "-n"}, "flag needs an argument"},
		{[]string{"send_lat", "h", "-d", "rxe0"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseRpmaBenchArgs(tt.args)
			if !errors.Is(err, cli.ErrUsage) {
				t.Fatalf("parseRpmaBenchArgs = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseRpmaBenchArgs = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestBenchRpmaUsage: bench rpma is in the usage, and a bad command
// line exits 2.
func TestBenchRpmaUsage(t *testing.T) {
	code, stdout, stderr := runArgs("bench", "rpma", "write_lat", "-s", "0", "h")
	if code != 2 || stdout != "" {
		t.Errorf("bench rpma -s 0 = %d, stdout %q; want 2 and nothing", code, stdout)
	}
	for _, want := range []string{"purerdma: bench rpma write_lat: size 0", "bench rpma TEST [-s SIZE]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

func TestRpmaConfigSizes(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		sq, rx   int
		total    int
		flushing bool
	}{
		{[]string{"write_lat", "h", "-n", "10", "-w", "0"}, 2, 0, 10, true},
		{[]string{"read_lat", "h", "-n", "10"}, 2, 0, 110, false},
		{[]string{"send_lat", "h", "-n", "10", "-w", "5"}, 2, 15, 15, false},
		{[]string{"send_lat", "h", "-n", "1000"}, 2, rpmaRxDepth, 1100, false},
		// 128 writes and the flushes after each 32 of them, and one more.
		{[]string{"write_bw", "h"}, 128 + 4 + 1, 0, 1128, true},
		{[]string{"write_bw", "h", "-t", "10", "-f", "3"}, 10 + 4 + 1, 0, 1010, true},
	} {
		c, err := parseRpmaBenchArgs(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if sq, rx, total := c.sqSize(), c.rxDepth(), c.total(); sq != tt.sq || rx != tt.rx || total != tt.total || c.test.flushes() != tt.flushing {
			t.Errorf("%q: sq %d, rx %d, total %d, flushes %v; want %d, %d, %d, %v", tt.args, sq, rx, total, c.test.flushes(), tt.sq, tt.rx, tt.total, tt.flushing)
		}
	}
}

func TestRpmaHello(t *testing.T) {
	h := rpmaHello{Test: rpmaSendLat, Size: 65536, Iters: 300, Warmup: 100}
	b := h.encode()
	want := []byte{'R', 'P', 'M', 'B', 1, 3, 0, 0, 0, 0, 1, 0, 44, 1, 0, 0, 100, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("encode = %v, want %v", b, want)
	}
	// The transport pads private data with zeros.
	got, err := decodeRpmaHello(append(b, make([]byte, 36)...))
	if err != nil || got != h {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, h)
	}
	for name, bad := range map[string][]byte{
		"short":   b[:19],
		"magic":   append([]byte("RPMA"), b[4:]...),
		"version": append(append([]byte{}, b[:4]...), append([]byte{2}, b[5:]...)...),
		"test":    append(append([]byte{}, b[:5]...), append([]byte{9}, b[6:]...)...),
		"zeros":   make([]byte, 56),
	} {
		if _, err := decodeRpmaHello(bad); !errors.Is(err, errRpmaWire) {
			t.Errorf("%s: decode = %v, want errRpmaWire", name, err)
		}
	}
}

func TestRpmaHelloCheck(t *testing.T) {
	srv, err := parseRpmaBenchArgs([]string{"send_lat", "-b", "a", "-s", "64", "-n", "100", "-w", "10"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.check(rpmaHello{Test: rpmaSendLat, Size: 64, Iters: 100, Warmup: 10}); err != nil {
		t.Errorf("the same run: %v", err)
	}
	err = srv.check(rpmaHello{Test: rpmaWriteLat, Size: 128, Iters: 5, Warmup: 0})
	for _, want := range []string{"test write_lat, this side send_lat", "-s 128, this side -s 64", "-n 5 -w 0, this side -n 100 -w 10"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check = %v, want it to say %q", err, want)
		}
	}
	// Only send_lat's server runs a loop of its own: the others take
	// any iteration count.
	rd, _ := parseRpmaBenchArgs([]string{"read_lat", "-b", "a"})
	if err := rd.check(rpmaHello{Test: rpmaReadLat, Size: 64, Iters: 7, Warmup: 0}); err != nil {
		t.Errorf("read_lat with other counts: %v", err)
	}
}

func TestRpmaCommonData(t *testing.T) {
	mr := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0, 0x10, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0x1b}
	d := rpmaCommonData{DataOffset: 0x102, MRDesc: mr, PCfgDesc: []byte{0, 1}}
	b, err := d.encode()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{2, 1, 21, 2}, mr...), 0, 1, 0)
	if !bytes.Equal(b, want) {
		t.Fatalf("encode = %v, want %v", b, want)
	}
	got, err := decodeRpmaCommonData(append(b, make([]byte, 168)...)) // an accept's padding
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("decode (-want +got):\n%s", diff)
	}
	// C librpma 1.2's peer configuration descriptor is one byte.
	d.PCfgDesc = []byte{1}
	b, _ = d.encode()
	if got, err := decodeRpmaCommonData(b); err != nil || !bytes.Equal(got.PCfgDesc, []byte{1}) || !bytes.Equal(got.MRDesc, mr) {
		t.Errorf("decode of a C server's data = %+v, %v", got, err)
	}
	if _, err := (&rpmaCommonData{MRDesc: mr, PCfgDesc: make([]byte, 4)}).encode(); err == nil {
		t.Error("encode of 25 bytes of descriptors succeeded")
	}
	if _, err := decodeRpmaCommonData(b[:27]); !errors.Is(err, errRpmaWire) {
		t.Errorf("27 bytes: %v, want errRpmaWire", err)
	}
	b[2], b[3] = 21, 4
	if _, err := decodeRpmaCommonData(b); !errors.Is(err, errRpmaWire) {
		t.Errorf("descriptor sizes 21 + 4: %v, want errRpmaWire", err)
	}
}

func FuzzRpmaPrivateData(f *testing.F) {
	f.Add(rpmaHello{Test: rpmaWriteLat, Size: 64, Iters: 10}.encode())
	d, _ := (&rpmaCommonData{MRDesc: make([]byte, 21), PCfgDesc: []byte{0}}).encode()
	f.Add(d)
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeRpmaHello(b); err == nil {
			if back, err := decodeRpmaHello(h.encode()); err != nil || back != h {
				t.Errorf("hello %+v does not survive encoding: %+v, %v", h, back, err)
			}
		}
		if d, err := decodeRpmaCommonData(b); err == nil {
			e, err := d.encode()
			if err != nil {
				t.Fatalf("common data %+v does not encode: %v", d, err)
			}
			if back, err := decodeRpmaCommonData(e); err != nil || !cmp.Equal(back, d) {
				t.Errorf("common data %+v does not survive encoding: %+v, %v", d, back, err)
			}
		}
	})
}

func TestRpmaResultText(t *testing.T) {
	r := &rpmaResult{Test: "write_lat", Library: "purerdma", Role: "client", Size: 64, Iterations: 1000, Warmup: 100,
		TxDepth: 1, FlushEvery: 1, Flush: "emulated", CyclesPerUsec: 2400,
		Latency: &perf.Latency{Samples: 997, Min: 20.5, Median: 31.25, Avg: 33, Stdev: 4.5, P99: 61.5, P999: 80, Max: 95}}
	var b strings.Builder
	if err := r.writeText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"bench rpma write_lat: write + flush latency (client, purerdma)\n",
		" Library        : purerdma\t\tFlush          : emulated\n",
		" #bytes #iterations    t_min[usec]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text does not hold %q:\n%s", want, out)
		}
	}
	// scripts/bench-rpma reads the first row of numbers: t_typical is
	// column 5, the 99th percentile column 8, as in perftest's output.
	row := rpmaFirstRow(t, out)
	if len(row) != 9 || row[0] != "64" || row[1] != "1000" || row[4] != "31.25" || row[7] != "61.50" {
		t.Errorf("latency row %q", row)
	}
	if strings.Contains(out, "Verified") {
		t.Errorf("text of a run without -verify says Verified:\n%s", out)
	}
	r.Verified = true
	b.Reset()
	if err := r.writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " Verified       : 64 B written, flushed and read back equal\n") {
		t.Errorf("text of a verified run does not say so:\n%s", b.String())
	}
	if row := rpmaFirstRow(t, b.String()); len(row) != 9 || row[4] != "31.25" {
		t.Errorf("latency row of a verified run %q", row)
	}
	r.Verified = false

	r = &rpmaResult{Test: "write_bw", Library: "purerdma", Role: "client", Size: 4096, Iterations: 5000, TxDepth: 128,
		FlushEvery: 32, Flush: "native", Bandwidth: &perf.Bandwidth{Seconds: 0.5, PeakMiBps: 50.5, MiBps: 39.0625, Mpps: 0.01}}
	b.Reset()
	if err := r.writeText(&b); err != nil {
		t.Fatal(err)
	}
	// Average MiB/s column 4, the message rate column 5.
	if row := rpmaFirstRow(t, b.String()); len(row) != 5 || row[0] != "4096" || row[3] != "39.06" || row[4] != "0.010000" {
		t.Errorf("bandwidth row %q", row)
	}
	if !strings.Contains(b.String(), "Flush every    : 32\n") {
		t.Errorf("text does not say the flush interval:\n%s", b.String())
	}

	r = &rpmaResult{Test: "send_lat", Library: "purerdma", Role: "client", Size: 8, Iterations: 10}
	if err := r.writeText(&b); err == nil {
		t.Error("a result without numbers was written")
	}
}

// rpmaFirstRow is the first row of numbers after the column headings,
// as the scripts find it.
func rpmaFirstRow(t *testing.T, out string) []string {
	t.Helper()
	_, after, ok := strings.Cut(out, "#bytes")
	if !ok {
		t.Fatalf("no column headings:\n%s", out)
	}
	for _, line := range strings.Split(after, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				return f
			}
		}
	}
	t.Fatalf("no row of numbers:\n%s", out)
	return nil
}

func TestRpmaResultJSON(t *testing.T) {
	r := &rpmaResult{Test: "read_lat", Library: "purerdma", Role: "client", Size: 64, Iterations: 10, TxDepth: 1,
		CyclesPerUsec: 1, Latency: &perf.Latency{Median: 2}}
	var b bytes.Buffer
	if err := r.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["flush"]; ok {
		t.Errorf("read_lat's JSON names a flush method: %s", b.String())
	}
	if l, ok := m["latency_usec"].(map[string]any); !ok || l["median"] != 2.0 || m["test"] != "read_lat" {
		t.Errorf("JSON %s", b.String())
	}
}

// TestBenchHelpFlags: -h anywhere in a bench command line prints bench's
// help to stdout and exits 0, as every purerdma command does.
func TestBenchHelpFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-h"},
		{"bench", "write_lat", "-h"},
		{"bench", "connect", "-h"},
		{"bench", "connect", "-s", "h", "--help"},
		{"bench", "rpma", "-h"},
		{"bench", "rpma", "--help"},
		{"bench", "rpma", "write_lat", "-h"},
		{"bench", "rpma", "write_bw", "h", "-t", "4", "-help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(args...)
			if code != 0 || stderr != "" {
				t.Errorf("exit status %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if want := Command.HelpText(); stdout != want {
				t.Errorf("stdout is not bench's help:\n%s", stdout)
			}
		})
	}
}
