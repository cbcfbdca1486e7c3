package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	perf "github.com/purerdma/rdma/internal/bench"
)

func TestParseBenchArgs(t *testing.T) {
	lat := benchConfig{port: 1, gidIndex: -1, size: 2, iters: 1000, warmup: 100, txDepth: 1, cqMod: 1,
		tcpPort: 18515, yield: 5 * time.Millisecond}
	bw := benchConfig{port: 1, gidIndex: -1, size: 65536, iters: 1000, warmup: 128, txDepth: 128, cqMod: 1,
		tcpPort: 18515, yield: 5 * time.Millisecond}
	with := func(c benchConfig, f func(*benchConfig)) benchConfig {
		f(&c)
		return c
	}
	tests := []struct {
		args []string
		want benchConfig
	}{
		{[]string{"write_lat"}, with(lat, func(c *benchConfig) { c.test = perf.WriteLat })},
		{[]string{"ib_send_lat", "-s", "64", "198.18.0.1"}, with(lat, func(c *benchConfig) {
			c.test, c.size, c.server = perf.SendLat, 64, "198.18.0.1"
		})},
		{[]string{"atomic_lat", "-d", "rxe1", "-i", "1", "-x", "1", "-n", "50", "-w", "0", "-p", "20000", "-json", "host"},
			with(lat, func(c *benchConfig) {
				c.test, c.size, c.dev, c.gidIndex, c.iters, c.warmup, c.tcpPort, c.json, c.server =
					perf.AtomicLat, 8, "rxe1", 1, 50, 0, 20000, true, "host"
			})},
		// Flags may follow the server, as perftest's do.
		{[]string{"read_lat", "host", "-n", "20", "-yield", "0"}, with(lat, func(c *benchConfig) {
			c.test, c.server, c.iters, c.yield = perf.ReadLat, "host", 20, 0
		})},
		// ib_write_bw runs 5000 iterations; messages up to 8 KiB are
		// signalled every 100th.
		{[]string{"write_bw", "-s", "4096"}, with(bw, func(c *benchConfig) {
			c.test, c.size, c.iters, c.cqMod = perf.WriteBW, 4096, 5000, 100
		})},
		{[]string{"read_bw"}, with(bw, func(c *benchConfig) { c.test = perf.ReadBW })},
		// CQ moderation never exceeds the tx depth.
		{[]string{"send_bw", "-s", "8", "-t", "64", "-Q", "200", "-cpuprofile", "/tmp/p"}, with(bw, func(c *benchConfig) {
			c.test, c.size, c.txDepth, c.cqMod, c.warmup, c.cpuProfile = perf.SendBW, 8, 64, 64, 64, "/tmp/p"
		})},
		{[]string{"read_bw", "-allocprofile", "/tmp/a"}, with(bw, func(c *benchConfig) { c.test, c.allocProfile = perf.ReadBW, "/tmp/a" })},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseBenchArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(benchConfig{})); diff != "" {
				t.Errorf("parseBenchArgs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBenchArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error
	}{
		{nil, "needs a test"},
		{[]string{"write"}, `unknown test "write"`},
		{[]string{"atomic_lat", "-s", "16"}, "atomics are 8 bytes"},
		{[]string{"write_lat", "-s", "0"}, "size 0"},
		{[]string{"write_lat", "-s", "2000000000"}, "size 2000000000"},
		{[]string{"write_lat", "-n", "4"}, "4 iterations"},
		{[]string{"write_lat", "-t", "16"}, "-t and -Q are for the bandwidth tests"},
		{[]string{"send_lat", "-Q", "1"}, "-t and -Q are for the bandwidth tests"},
		{[]string{"write_bw", "-t", "0"}, "tx depth 0"},
		{[]string{"write_bw", "-Q", "0"}, "CQ moderation 0"},
		{[]string{"write_bw", "-w", "100000000"}, "warm-up"},
		{[]string{"write_bw", "-i", "0"}, "port 0"},
		{[]string{"write_bw", "-x", "256"}, "GID index 256"},
		{[]string{"write_bw", "-p", "0"}, "TCP port 0"},
		{[]string{"write_bw", "-yield", "20ms"}, "yield interval 20ms"},
		{[]string{"write_bw", "-n"}, "flag needs an argument"},
		{[]string{"write_bw", "-bogus"}, "flag provided but not defined"},
		{[]string{"write_bw", "a", "b"}, "one server address"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseBenchArgs(tt.args)
			if !errors.Is(err, cli.ErrUsage) {
				t.Fatalf("parseBenchArgs = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseBenchArgs = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestBenchUsage: a bad bench command line exits 2 with the usage, which
// lists bench.
func TestBenchUsage(t *testing.T) {
	code, stdout, stderr := runArgs("bench", "write_lat", "-n", "1")
	if code != 2 || stdout != "" {
		t.Errorf("bench -n 1 = %d, stdout %q; want 2 and nothing", code, stdout)
	}
	for _, want := range []string{"purerdma: bench write_lat: 1 iterations", "bench TEST [-d DEV]", "write_lat"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}
