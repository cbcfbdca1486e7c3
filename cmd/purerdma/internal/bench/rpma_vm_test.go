package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
)

// rpmaBenchPair runs "purerdma bench rpma" as a server on the VM's
// first address and a client through the second device, in this
// process, and returns the client's output and both errors.
func rpmaBenchPair(t *testing.T, serverArgs, clientArgs []string) (cliOut string, srvErr, cliErr error) {
	t.Helper()
	testenv.Devices(t, 2)
	const addr = "198.18.0.1"
	port := strconv.Itoa(20000 + rand.IntN(20000))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvc := make(chan error, 1)
	go func() {
		var b, e bytes.Buffer
		args := append(append([]string{}, serverArgs...), "-p", port, "-b", addr)
		srvc <- runBenchRpma(ctx, args, &b, &e)
	}()
	var b, e bytes.Buffer
	args := append(append([]string{}, clientArgs...), "-p", port, addr)
	cliErr = runBenchRpma(ctx, args, &b, &e)
	select {
	case srvErr = <-srvc:
	case <-time.After(time.Minute):
		cancel() // the server should have seen the client go by now
		srvErr = <-srvc
		t.Errorf("the server did not end within a minute of the client (client: %v)", cliErr)
	}
	return b.String(), srvErr, cliErr
}

// TestBenchRpmaPairs runs each test once with few iterations, Go
// against Go, and checks that the client's JSON holds what it ran and
// positive numbers. It asserts nothing about performance. The 5000-byte
// runs add -verify: the client's pattern, written and flushed after the
// loop, must read back equal.
func TestBenchRpmaPairs(t *testing.T) {
	for _, test := range []string{"write_lat", "read_lat", "send_lat", "write_bw"} {
		for _, size := range []string{"64", "5000"} {
			t.Run(test+"/"+size, func(t *testing.T) {
				args := []string{test, "-s", size, "-n", "40", "-w", "5"}
				cli := append(append([]string{}, args...), "-json")
				if test == "write_bw" {
					cli = append(cli, "-t", "8", "-f", "3")
				}
				verify := size == "5000"
				if verify {
					cli = append(cli, "-verify")
				}
				out, srvErr, cliErr := rpmaBenchPair(t, args, cli)
				if srvErr != nil || cliErr != nil {
					t.Fatalf("server: %v\nclient: %v", srvErr, cliErr)
				}
				var r rpmaResult
				dec := json.NewDecoder(strings.NewReader(out))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&r); err != nil {
					t.Fatalf("client output %q: %v", out, err)
				}
				if r.Test != test || strconv.Itoa(r.Size) != size || r.Iterations != 40 || r.Warmup != 5 ||
					r.Library != "purerdma" || r.CyclesPerUsec <= 0 {
					t.Errorf("result %+v: want %s, %s bytes, 40 iterations after 5", r, test, size)
				}
				if r.Verified != verify {
					t.Errorf("verified %v, want %v (-verify given: %v)", r.Verified, verify, verify)
				}
				wantFlush := test == "write_lat" || test == "write_bw"
				if wantFlush != (r.Flush == "native" || r.Flush == "emulated") || !wantFlush && r.Flush != "" {
					t.Errorf("flush %q for %s", r.Flush, test)
				}
				if test == "write_bw" {
					b := r.Bandwidth
					if b == nil || r.Latency != nil || b.Seconds <= 0 || b.MiBps <= 0 || b.Mpps <= 0 || r.TxDepth != 8 || r.FlushEvery != 3 {
						t.Errorf("bandwidth result %+v (%+v): want positive numbers, depth 8, a flush every 3", r, b)
					}
					return
				}
				l := r.Latency
				if l == nil || r.Bandwidth != nil || l.Samples != 40-1-2 || l.Min <= 0 || l.Median < l.Min || l.P99 < l.Median || l.Max < l.P99 {
					t.Errorf("latency result %+v (%+v): want 37 samples, 0 < min <= median <= p99 <= max", r, l)
				}
			})
		}
	}
}

// TestBenchRpmaFlushMethods: on a device with native flush the client
// flushes natively against a purerdma server unless told to emulate;
// without it, it emulates either way, and FlushNative fails.
func TestBenchRpmaFlushMethods(t *testing.T) {
	native := rpmaDeviceFlushes(t)
	for _, tc := range []struct {
		flag string
		want string
	}{
		{"auto", map[bool]string{true: "native", false: "emulated"}[native]},
		{"emulated", "emulated"},
		{"native", map[bool]string{true: "native", false: ""}[native]},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			args := []string{"write_lat", "-n", "20", "-w", "2"}
			out, srvErr, cliErr := rpmaBenchPair(t, args, append(append([]string{}, args...), "-flush", tc.flag, "-verify"))
			if tc.want == "" {
				if cliErr == nil || !strings.Contains(cliErr.Error(), "FlushNative") {
					t.Errorf("client: %v, want FlushNative's refusal", cliErr)
				}
				return
			}
			if srvErr != nil || cliErr != nil {
				t.Fatalf("server: %v\nclient: %v", srvErr, cliErr)
			}
			// The text layout, which scripts/bench-rpma reads.
			if !strings.Contains(out, "Flush          : "+tc.want+"\n") || !strings.Contains(out, " #bytes #iterations    t_min[usec]") {
				t.Errorf("client output does not show flush %s and the latency columns:\n%s", tc.want, out)
			}
			// -verify: what the flush method flushed read back equal.
			if !strings.Contains(out, " Verified       : 64 B written, flushed and read back equal\n") {
				t.Errorf("client output does not say the read-back was verified:\n%s", out)
			}
		})
	}
}

// TestBenchRpmaMismatch: a server asked for another run rejects the
// request and says how the runs differ; the client fails too.
func TestBenchRpmaMismatch(t *testing.T) {
	_, srvErr, cliErr := rpmaBenchPair(t, []string{"read_lat", "-s", "64"},
		[]string{"read_lat", "-s", "128", "-connect-timeout", "1s"})
	if srvErr == nil || !strings.Contains(srvErr.Error(), "-s 128, this side -s 64") {
		t.Errorf("server: %v, want an error naming both sizes", srvErr)
	}
	if cliErr == nil || !strings.Contains(cliErr.Error(), "rejected") {
		t.Errorf("client: %v, want the rejection", cliErr)
	}
}

// rpmaDeviceFlushes reports whether the client's device executes native
// FLUSH.
func rpmaDeviceFlushes(t *testing.T) bool {
	t.Helper()
	testenv.Devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := rpma.DeviceContext(ctx, "198.18.0.1", rpma.Remote)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	p, err := rpma.NewPeer(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	return p.NativeFlush()
}
