package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/testenv"
)

// benchPair runs "purerdma bench" as a server on the first device and a
// client on the second, in this process, and returns both outputs. The
// two talk TCP over loopback.
func benchPair(t *testing.T, serverArgs, clientArgs []string) (srvOut, cliOut string, srvErr, cliErr error) {
	t.Helper()
	devs := testenv.Devices(t, 2)
	common := []string{"-p", strconv.Itoa(freePort(t))}
	return benchRunPair(t, append(append(append([]string{}, serverArgs...), common...), "-d", devs[0].Name),
		append(append(append([]string{}, clientArgs...), common...), "-d", devs[1].Name, "127.0.0.1"))
}

// benchRunPair runs the server and the client command lines (after
// "bench") in this process and returns both outputs.
func benchRunPair(t *testing.T, serverArgs, clientArgs []string) (srvOut, cliOut string, srvErr, cliErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type out struct {
		s   string
		err error
	}
	srvc := make(chan out, 1)
	go func() {
		var b, e bytes.Buffer
		err := benchCmd(ctx, serverArgs, &b, &e)
		srvc <- out{b.String(), err}
	}()
	var b, e bytes.Buffer
	cliErr = benchCmd(ctx, clientArgs, &b, &e)
	var s out
	select {
	case s = <-srvc:
	case <-time.After(time.Minute):
		cancel() // the server should have seen the client go by now
		s = <-srvc
		t.Errorf("the server did not end within a minute of the client (client: %v)", cliErr)
	}
	return s.s, b.String(), s.err, cliErr
}

// freePort is clitest.FreePort.
func freePort(t *testing.T) int { return clitest.FreePort(t) }

// TestBenchPairs runs every test once with few iterations, both sides in
// JSON, and checks that the results parse and hold positive numbers. It
// asserts nothing about performance.
func TestBenchPairs(t *testing.T) {
	for _, test := range perf.Tests() {
		t.Run(test.String(), func(t *testing.T) {
			args := []string{test.String(), "-n", "40", "-w", "5", "-json"}
			if test != perf.AtomicLat {
				args = append(args, "-s", "100")
			}
			srvOut, cliOut, srvErr, cliErr := benchPair(t, args, args)
			if srvErr != nil || cliErr != nil {
				t.Fatalf("server: %v\nclient: %v", srvErr, cliErr)
			}
			cli := checkBenchJSON(t, "client", cliOut, test)
			srv := checkBenchJSON(t, "server", srvOut, test)
			if cli.Role != "client" || cli.Reporter != "client" || srv.Role != "server" {
				t.Errorf("roles: client %q/%q, server %q", cli.Role, cli.Reporter, srv.Role)
			}
			// Only the ping-pong tests measure on the server too.
			wantReporter := "client"
			if test.PingPong() {
				wantReporter = "server"
			}
			if srv.Reporter != wantReporter {
				t.Errorf("server output reported by %q, want %q", srv.Reporter, wantReporter)
			}
			if cli.GCCycles != 0 {
				t.Logf("%d garbage collections during the loop", cli.GCCycles)
			}
		})
	}
}

// checkBenchJSON parses one side's output and checks that its numbers
// are there and positive.
func checkBenchJSON(t *testing.T, side, out string, test perf.Test) *perf.Result {
	t.Helper()
	var r perf.Result
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s output %q: %v", side, out, err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("%s result: %v", side, err)
	}
	wantSize := 100
	if test == perf.AtomicLat {
		wantSize = 8
	}
	if r.Test != test || r.Size != wantSize || r.Iterations != 40 || r.Warmup != 5 || r.MTU <= 0 || r.CyclesPerUsec <= 0 {
		t.Errorf("%s result %+v: want %v, %d bytes, 40 iterations after 5", side, r, test, wantSize)
	}
	if test.Latency() {
		l := r.Latency
		if l.Samples != 40-1-perf.LatencyTail || l.Min <= 0 || l.Median < l.Min || l.P99 < l.Median || l.Max < l.P99 {
			t.Errorf("%s latency %+v: want 37 samples, 0 < min <= median <= p99 <= max", side, *l)
		}
	} else {
		b := r.Bandwidth
		if b.Seconds <= 0 || b.MiBps <= 0 || b.Mpps <= 0 || b.PeakMiBps < 0 {
			t.Errorf("%s bandwidth %+v: want positive numbers", side, *b)
		}
	}
	return &r
}

// TestBenchText: without -json both sides print perftest's layout.
func TestBenchText(t *testing.T) {
	args := []string{"send_lat", "-n", "20", "-w", "2"}
	srvOut, cliOut, srvErr, cliErr := benchPair(t, args, args)
	if srvErr != nil || cliErr != nil {
		t.Fatalf("server: %v\nclient: %v", srvErr, cliErr)
	}
	for side, out := range map[string]string{"server": srvOut, "client": cliOut} {
		i := strings.Index(out, " #bytes #iterations    t_min[usec]")
		if i < 0 {
			t.Fatalf("%s output has no latency heading:\n%s", side, out)
		}
		row := strings.Fields(strings.SplitN(out[i:], "\n", 3)[1])
		if len(row) != 9 || row[0] != "2" || row[1] != "20" {
			t.Errorf("%s row %q: want 9 columns, 2 bytes, 20 iterations", side, row)
		}
		for _, f := range row[2:] {
			if v, err := strconv.ParseFloat(f, 64); err != nil || v <= 0 {
				t.Errorf("%s row %q: %q is not a positive number", side, row, f)
			}
		}
	}
}

// TestBenchMismatch: sides that disagree on the run both fail, saying
// how.
func TestBenchMismatch(t *testing.T) {
	_, _, srvErr, cliErr := benchPair(t, []string{"write_lat", "-n", "20"}, []string{"write_lat", "-n", "30"})
	for side, err := range map[string]error{"server": srvErr, "client": cliErr} {
		if err == nil || !strings.Contains(err.Error(), "-n 20") || !strings.Contains(err.Error(), "-n 30") {
			t.Errorf("%s: %v, want an error naming both iteration counts", side, err)
		}
	}
}

// TestBenchCM runs the tests iWARP can run with -R, the QPs connected
// through the rdma_cm between the fabric's two addresses (on siw, the
// only way; make vmtest runs it there too), both sides in JSON.
func TestBenchCM(t *testing.T) {
	f := testenv.NeedFabric(t)
	for _, test := range []perf.Test{perf.WriteLat, perf.ReadLat, perf.SendLat, perf.WriteBW, perf.ReadBW, perf.SendBW} {
		t.Run(test.String(), func(t *testing.T) {
			args := []string{test.String(), "-R", "-n", "40", "-w", "5", "-s", "100", "-json", "-p", strconv.Itoa(freePort(t))}
			srvOut, cliOut, srvErr, cliErr := benchRunPair(t, append(append([]string{}, args...), "-b", f.Addrs[0].String()),
				append(append([]string{}, args...), "-b", f.Addrs[1].String(), f.Addrs[0].String()))
			if srvErr != nil || cliErr != nil {
				t.Fatalf("server: %v\nclient: %v", srvErr, cliErr)
			}
			cli := checkBenchJSON(t, "client", cliOut, test)
			srv := checkBenchJSON(t, "server", srvOut, test)
			// The server of a one-way test prints the client's result.
			wantSrv := f.Devs[1]
			if test.PingPong() {
				wantSrv = f.Devs[0]
			}
			if cli.Device != f.Devs[1] || srv.Device != wantSrv {
				t.Errorf("devices: client %q, server %q; want %s and %s (the addresses' devices)", cli.Device, srv.Device, f.Devs[1], wantSrv)
			}
		})
	}
}
