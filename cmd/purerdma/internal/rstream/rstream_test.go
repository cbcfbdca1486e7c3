package rstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// rpPorts gives each run of the rstream and riostream tests its own
// port, so that no run meets another's listener.
var rpPorts atomic.Int32

func rpNextPort() int { return 7300 + int(rpPorts.Add(1)) }

// rsDefaults is the options of a command line without flags.
var rsDefaults = rsOptions{tool: "rstream", format: "name", port: 7471, size: 1000, count: 1000, iters: 1, inline: 64}

func TestRstreamArgs(t *testing.T) {
	with := func(f func(*rsOptions)) rsOptions {
		o := rsDefaults
		f(&o)
		return o
	}
	for _, tt := range []struct {
		args []string
		want rsOptions
	}{
		{nil, rsDefaults},
		{[]string{"-s", "198.18.0.1", "-b", "198.18.0.2"}, with(func(o *rsOptions) { o.dst, o.src = "198.18.0.1", "198.18.0.2" })},
		{[]string{"-s198.18.0.1", "-p7000"}, with(func(o *rsOptions) { o.dst, o.port = "198.18.0.1", 7000 })},
		{[]string{"-S", "64"}, with(func(o *rsOptions) { o.custom, o.size = true, 64 })},
		{[]string{"-S", "all"}, with(func(o *rsOptions) { o.all = true })},
		{[]string{"-S", "ALL", "-C", "5"}, with(func(o *rsOptions) { o.all, o.custom, o.count = true, true, 5 })},
		{[]string{"-I", "3"}, with(func(o *rsOptions) { o.custom, o.iters = true, 3 })},
		{[]string{"-C", "1", "-I", "1", "-S", "1073741824"}, with(func(o *rsOptions) { o.custom, o.count, o.iters, o.size = true, 1, 1, 1<<30 })},
		{[]string{"-B", "65536", "-i", "0"}, with(func(o *rsOptions) { o.buffer, o.inline = 65536, 0 })},
		{[]string{"-B", "0", "-i", "256"}, with(func(o *rsOptions) { o.buffer, o.inline = 0, 256 })},
		{[]string{"-k", "10"}, with(func(o *rsOptions) { o.keepalive = 10 })},
		{[]string{"-T", "s", "-T", "v"}, with(func(o *rsOptions) { o.tcp, o.verify = true, true })},
		{[]string{"-Tsockets", "-T", "Verify"}, with(func(o *rsOptions) { o.tcp, o.verify = true, true })},
		{[]string{"-T", "b", "-T", "n", "-T", "a", "-T", "r"}, with(func(o *rsOptions) { o.block = true })},
		{[]string{"-T", "blocking", "-T", "nonblocking", "-T", "async", "-T", "resolve"}, with(func(o *rsOptions) { o.block = true })},
		{[]string{"-T", "b", "-T", "n"}, rsDefaults},
		{[]string{"-f", "ip", "-s", "fd00:198:18::1", "-b", "fd00:198:18::2"}, with(func(o *rsOptions) {
			o.format, o.dst, o.src = "ip", "fd00:198:18::1", "fd00:198:18::2"
		})},
		{[]string{"-f", "IPv6", "-s", "10.0.0.1"}, with(func(o *rsOptions) { o.format, o.dst = "ipv6", "10.0.0.1" })},
		{[]string{"-f", "name", "-s", "localhost"}, with(func(o *rsOptions) { o.dst = "localhost" })},
		{[]string{"-json", "-s", "h"}, with(func(o *rsOptions) { o.json, o.dst = true, "h" })},
		{[]string{"--json", "--"}, with(func(o *rsOptions) { o.json = true })},
		// getopt takes the next argument as the value, whatever it is.
		{[]string{"-s", "-x"}, with(func(o *rsOptions) { o.dst = "-x" })},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseRstreamArgs(tt.args)
			if err != nil {
				t.Fatalf("parseRstreamArgs: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rsOptions{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRstreamArgsErrors: bad command lines exit 2 with a message naming
// the problem and the usage, before anything is opened.
func TestRstreamArgsErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-x", "1"}, "unknown flag -x"},
		{[]string{"-S"}, "-S needs a value"},
		{[]string{"-S", "4k"}, `-S "4k": not a decimal number`},
		{[]string{"-S", "0"}, "-S 0: out of range (1 to 1073741824)"},
		{[]string{"-S", "1073741825"}, "out of range"},
		{[]string{"-C", "0"}, "-C 0: out of range"},
		{[]string{"-I", "-1"}, "-I -1: out of range"},
		{[]string{"-p", "0"}, "-p 0: out of range (1 to 65535)"},
		{[]string{"-p", "http"}, "not a decimal number"},
		{[]string{"-B", "-1"}, "-B -1: out of range"},
		{[]string{"-B", "536870912"}, "-B 536870912: out of range (0 to 536870911)"},
		{[]string{"-i", "65536"}, "-i 65536: out of range"},
		{[]string{"-k", "-1"}, "-k -1: out of range"},
		{[]string{"-T", "x"}, `-T "x": unknown test option`},
		{[]string{"-T", "sock"}, `-T "sock": unknown test option`},
		{[]string{"-T", "f"}, "fork is not supported"},
		{[]string{"-T", "fork"}, "fork is not supported"},
		{[]string{"-f", "gid"}, "-f gid: InfiniBand (AF_IB) addresses are not supported"},
		{[]string{"-f", "GID"}, "-f gid: InfiniBand"},
		{[]string{"-f", "mac"}, `-f "mac": unknown address format`},
		{[]string{"-f", "ip", "-s", "localhost"}, `-s "localhost": not a numeric address (-f ip)`},
		{[]string{"-f", "ipv6", "-b", "host"}, `-b "host": not a numeric address (-f ipv6)`},
		{[]string{"-s", ""}, "empty address"},
		{[]string{"198.18.0.1"}, `unexpected argument "198.18.0.1"`},
		{[]string{"--", "x"}, `unexpected argument "x"`},
		{[]string{"-S", "1073741824", "-C", "2147483647", "-I", "2147483647"}, "more bytes than a 64-bit count holds"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(append([]string{"rstream"}, tt.args...)...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != 2 || stdout != "" || !strings.HasPrefix(first, "purerdma: rstream: ") || !strings.Contains(first, tt.msg) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, first, tt.msg)
			}
			if !strings.Contains(stderr, usage()) {
				t.Errorf("stderr lacks the usage:\n%s", stderr)
			}
		})
	}
	for _, args := range [][]string{{"-h"}, {"-s", "x", "--help"}, {"-S", "64", "-help"}} {
		code, stdout, _ := runArgs(append([]string{"rstream"}, args...)...)
		if code != 0 || stdout != Command.HelpText() {
			t.Errorf("%q = %d, stdout %q; want 0 and the help", args, code, stdout)
		}
	}
}

// The expected strings below follow common.c's size_str, cnt_str and
// size_to_count by hand: binary k/m/g with one decimal below 10 of
// them, rounded down; decimal k/m/b counts, rounded down.
func TestRstreamSizeStr(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1, "1"}, {64, "64"}, {192, "192"}, {999, "999"}, {1023, "1023"},
		{1024, "1k"}, {1536, "1.5k"}, {1600, "1.5k"}, {2047, "1.9k"}, {6144, "6k"}, {10239, "9.9k"},
		{10240, "10k"}, {12288, "12k"}, {65536, "64k"}, {98304, "96k"}, {819200, "800k"},
		{1048575, "1023k"}, {1 << 20, "1m"}, {1572864, "1.5m"}, {6291456, "6m"},
		{12800000, "12m"}, {81920000, "78m"}, {131072000, "125m"}, {209715200, "200m"}, {1073741823, "1023m"},
		{1 << 30, "1g"}, {3 << 29, "1.5g"}, {12 << 30, "12g"}, {1 << 40, "1024g"},
	} {
		if got := SizeStr(tt.n); got != tt.want {
			t.Errorf("SizeStr(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestRstreamCntStr(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1, "1"}, {999, "999"}, {1000, "1k"}, {1999, "1k"}, {10000, "10k"}, {100000, "100k"},
		{999999, "999k"}, {1000000, "1m"}, {999999999, "999m"}, {1000000000, "1b"}, {2147483647, "2b"},
	} {
		if got := CntStr(tt.n); got != tt.want {
			t.Errorf("CntStr(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestRstreamSizeToCount(t *testing.T) {
	for _, tt := range []struct{ size, want int }{
		{1, 100000}, {64, 100000}, {1023, 100000}, {1024, 10000}, {4096, 10000}, {65535, 10000},
		{65536, 1000}, {98304, 1000}, {1048575, 1000}, {1048576, 100}, {6291456, 100},
	} {
		if got := sizeToCount(tt.size); got != tt.want {
			t.Errorf("sizeToCount(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
}

// TestRstreamPlan: the default run's tests and their order, with and
// without -S all, and the custom test.
func TestRstreamPlan(t *testing.T) {
	names := func(p rsPhase) []string {
		var s []string
		for _, t := range p.tests {
			s = append(s, fmt.Sprintf("%s %d %d %d", t.name, t.size, t.count, t.iters))
		}
		return s
	}
	o := rsDefaults
	plan := rstreamPlan(&o)
	if len(plan) != 2 {
		t.Fatalf("%d connections, want 2", len(plan))
	}
	wantLat := []string{"64_lat 64 1 100000", "4k_lat 4096 1 10000", "64k_lat 65536 1 1000", "1m_lat 1048576 1 100"}
	wantBW := []string{"64_bw 64 100000 1", "4k_bw 4096 10000 1", "64k_bw 65536 1000 1", "1m_bw 1048576 100 1"}
	if diff := cmp.Diff(wantLat, names(plan[0])); diff != "" {
		t.Errorf("latency tests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantBW, names(plan[1])); diff != "" {
		t.Errorf("bandwidth tests (-want +got):\n%s", diff)
	}
	if plan[0].inline != 64 || plan[1].inline != -1 {
		t.Errorf("inline %d, %d; want 64 (-i) and -1 (none: C's 0)", plan[0].inline, plan[1].inline)
	}
	o.inline = 0
	if plan := rstreamPlan(&o); plan[0].inline != -1 {
		t.Errorf("-i 0: inline %d, want -1 (none)", plan[0].inline)
	}

	o = rsDefaults
	o.all = true
	plan = rstreamPlan(&o)
	lat, bw := names(plan[0]), names(plan[1])
	if len(lat) != 33 || len(bw) != 33 {
		t.Fatalf("-S all: %d and %d tests, want 33 each", len(lat), len(bw))
	}
	for i, want := range map[int]string{0: "64_lat 64 1 100000", 1: "128_lat 128 1 100000", 2: "192_lat 192 1 100000",
		8: "1.5k_lat 1536 1 10000", 12: "6k_lat 6144 1 10000", 20: "96k_lat 98304 1 1000",
		28: "1.5m_lat 1572864 1 100", 32: "6m_lat 6291456 1 100"} {
		if lat[i] != want {
			t.Errorf("-S all: latency test %d is %q, want %q", i, lat[i], want)
		}
	}
	if bw[32] != "6m_bw 6291456 100 1" || bw[7] != "1k_bw 1024 10000 1" {
		t.Errorf("-S all: bandwidth tests %q, %q", bw[7], bw[32])
	}

	o = rsDefaults
	o.custom, o.all, o.size, o.count = true, true, 100, 7
	plan = rstreamPlan(&o)
	if len(plan) != 1 || plan[0].inline != 0 {
		t.Fatalf("custom: %+v, want one connection with the default inline", plan)
	}
	if diff := cmp.Diff([]string{"custom 100 7 1"}, names(plan[0])); diff != "" {
		t.Errorf("custom test (-want +got):\n%s", diff)
	}
}

// TestRstreamConfig: rsocket gets twice -B (rsetsockopt's doubling; a
// send buffer that would be below 2048 bytes is 4096, as rsetsockopt
// makes it), the phase's inline size, and busy polling unless -T b or
// -T a (C's non-blocking default spins).
func TestRstreamConfig(t *testing.T) {
	for _, tt := range []struct {
		buffer, inline int
		want           rsocket.Config
	}{
		{0, 64, rsocket.Config{SendBuffer: 1 << 20, RecvBuffer: 1 << 20, Inline: 64}},
		{65536, 1, rsocket.Config{SendBuffer: 131072, RecvBuffer: 131072, Inline: 1}},
		{1000, 0, rsocket.Config{SendBuffer: 2048 * 2, RecvBuffer: 2000}},
		{1023, 0, rsocket.Config{SendBuffer: 4096, RecvBuffer: 2046}},
		{1024, 0, rsocket.Config{SendBuffer: 2048, RecvBuffer: 2048}},
		{2047, 0, rsocket.Config{SendBuffer: 4094, RecvBuffer: 4094}},
		{2048, 0, rsocket.Config{SendBuffer: 4096, RecvBuffer: 4096}},
		{2049, 0, rsocket.Config{SendBuffer: 4098, RecvBuffer: 4098}},
		{1, 0, rsocket.Config{SendBuffer: 4096, RecvBuffer: 2}},
	} {
		o := rsDefaults
		o.buffer = tt.buffer
		r := rstreamRun{o: &o}
		tt.want.BusyPoll = true
		if got := r.config(rsPhase{inline: tt.inline}); got != tt.want {
			t.Errorf("-B %d inline %d: %+v, want %+v", tt.buffer, tt.inline, got, tt.want)
		}
	}
	for _, opt := range []string{"b", "a", "block", "async"} {
		o, err := parseRstreamArgs([]string{"-T", opt})
		if err != nil {
			t.Fatal(err)
		}
		r := rstreamRun{o: &o}
		if r.config(rsPhase{}).BusyPoll {
			t.Errorf("-T %s: BusyPoll, want blocking calls", opt)
		}
	}
	o, err := parseRstreamArgs([]string{"-T", "b", "-T", "n"})
	if err != nil {
		t.Fatal(err)
	}
	if r := (rstreamRun{o: &o}); !r.config(rsPhase{}).BusyPoll {
		t.Error("-T b -T n: blocking, want BusyPoll (the last one wins)")
	}
}

// TestRstreamVerifier: format_buf's and verify_buf's counters run on
// across calls, wrap at 256, and a mismatch names the byte's position in
// everything received.
func TestRstreamVerifier(t *testing.T) {
	var tx, rx rsVerifier
	var sent []byte
	for _, n := range []int{16, 1, 255, 300, 16, 4096} {
		b := make([]byte, n)
		tx.fill(b)
		sent = append(sent, b...)
	}
	for i, c := range sent {
		if c != byte(i) {
			t.Fatalf("byte %d sent is %d, want %d", i, c, byte(i))
		}
	}
	// The receiver checks in other pieces.
	for len(sent) > 0 {
		n := min(len(sent), 777)
		if err := rx.check(sent[:n]); err != nil {
			t.Fatalf("check: %v", err)
		}
		sent = sent[n:]
	}
	if rx.checked != 16+1+255+300+16+4096 || rx.want != tx.next {
		t.Errorf("checked %d, next %d; want %d and %d", rx.checked, rx.want, 16+1+255+300+16+4096, tx.next)
	}

	var v rsVerifier
	b := make([]byte, 16) // zeros, as a peer without -T v sends
	if err := v.check(b[:1]); err != nil {
		t.Fatalf("byte 0 is 0: %v", err)
	}
	err := v.check(b)
	if err == nil || err.Error() != "data verification failed byte 1" {
		t.Errorf("check = %v, want data verification failed byte 1", err)
	}
	b = []byte{2, 3, 4, 0}
	if err := v.check(b); err == nil || err.Error() != "data verification failed byte 4" {
		t.Errorf("check after a failure = %v, want byte 4 (the counter moved past the failed byte, as C's)", err)
	}
}

// TestRstreamRowText: show_perf's format and arithmetic. The expected
// rows come from show_perf's printf and expressions compiled with gcc
// (a float of whole microseconds: 16777217 us is 16777216 there).
func TestRstreamRowText(t *testing.T) {
	for _, tt := range []struct {
		t    rsTest
		us   int64
		want string
	}{
		{rsTest{"custom", 4096, 10, 10}, 1234567, "custom    4k      10      10      800k        1.23s      0.01    6172.83\n"},
		{rsTest{"64_lat", 64, 1, 100000}, 970123, "64_lat    64      1       100k    12m         0.97s      0.11       4.85\n"},
		{rsTest{"64_bw", 64, 100000, 1}, 812345, "64_bw     64      100k    1       12m         0.81s      0.13       4.06\n"},
		{rsTest{"1m_bw", 1048576, 100, 1}, 183457, "1m_bw     1m      100     1       200m        0.18s      9.15     917.28\n"},
		{rsTest{"custom", 1, 1, 1}, 0, "custom    1       1       1       2           0.00s       inf       0.00\n"},
		{rsTest{"custom", 100, 7, 3}, 16777217, "custom    100     7       3       4.1k       16.78s      0.00  399457.53\n"},
		{rsTest{"64k_bw", 65536, 1000, 1}, 123456789, "64k_bw    64k     1k      1       125m      123.46s      0.01   61728.39\n"},
	} {
		got := rstreamRowText(tt.t, time.Duration(tt.us)*time.Microsecond+999*time.Nanosecond)
		if got != tt.want {
			t.Errorf("%+v in %d us:\n got %q\nwant %q", tt.t, tt.us, got, tt.want)
		}
	}
}

// TestRstreamWithoutDevices: over rsocket, both sides fail at once on a
// machine without RDMA devices, saying how to add one.
func TestRstreamWithoutDevices(t *testing.T) {
	devstest.UseDevices(t, nil, nil)
	dir := devstest.UseDir(t, false)
	none := "purerdma: rstream: no RDMA device: " + dir + " does not exist (no RDMA driver is loaded); " + linkAddHint + "\n"
	runChecked(t, []string{"rstream"}, none)
	runChecked(t, []string{"rstream", "-s", "198.18.0.1", "-S", "64"}, none)
}

// The run helpers, for the host's TCP tests and the VM's rsocket tests.

// rsHeader is rstream's first line.
const rsHeader = "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n"

// rsEnd is one end of a run: this command (in the test process) or,
// with c, rdma-core's rstream.
type rsEnd struct {
	c    bool
	args []string
	tool string // "" for rstream, or riostream
}

func (e rsEnd) name() string {
	if e.tool == "" {
		return "rstream"
	}
	return e.tool
}

func (e rsEnd) String() string {
	n := "go"
	if e.c {
		n = "C"
	}
	return n + " " + e.name() + " " + strings.Join(e.args, " ")
}

// rsStart starts one end under ctx and returns its pid and where its
// result arrives.
func rsStart(t *testing.T, ctx context.Context, rstream string, e rsEnd) (int, <-chan toolrun.Result) {
	t.Helper()
	return toolrun.Start(t, ctx, runContext, e.name(), rstream, e.c, e.args, e)
}

// rsWaitFunc waits until the server started as pid listens on port; it
// fails the test if the server ends first or ctx does.
type rsWaitFunc func(t *testing.T, ctx context.Context, cancel func(), port, pid int, done <-chan toolrun.Result)

// rsPair runs a server and then, once it listens, a client, each with
// "-p port", under one timeout, and returns both results. The server is
// ended if the client fails; a run that outlives the timeout is killed
// and fails the test. On siw, a run that siw's accept race stranded
// (toolrun.Watchdog) is ended and run again on the next port, up to
// toolrun.MaxAttempts times, and so is a run in which rdma-core's
// rstream client did not end after the Go server had ended well, which
// it does against its own server on siw too (docs/testing.md,
// "rdma-core's rstream client on siw"), or in which the Go client's
// dial to rdma-core's server lost siw's connect race
// (toolrun.ConnectRaced).
func rsPair(t *testing.T, server, client rsEnd, port int, timeout time.Duration, wait rsWaitFunc) (sr, cr toolrun.Result) {
	t.Helper()
	strands := testenv.CurrentFabric().IWARP
	toolrun.RunAttempts(t, fmt.Sprintf("%v and %v", server, client), timeout, func() (*toolrun.Watchdog, string, string) {
		var dog *toolrun.Watchdog
		sr, cr, dog = rsPairOnce(t, server, client, port, timeout, wait, strands)
		port = rpNextPort() // a stranded run is run again on the next
		results := fmt.Sprintf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
		lost := ""
		if strands && server.c && !client.c {
			lost = toolrun.ConnectRaced(cr)
		}
		if strands && dog.TimedOut() && dog.Stranded() == nil && !server.c && client.c && client.name() == "rstream" && sr.Code == 0 {
			lost = fmt.Sprintf("the Go server ended well and rdma-core's client did not end within %v, "+
				"a hang rdma-core's client has against its own server on siw too (docs/testing.md, \"rdma-core's rstream client on siw\"); the client when it was ended: %s",
				timeout, cr.Stderr)
		}
		return dog, results, lost
	})
	return sr, cr
}

// rsPairOnce is one attempt of rsPair.
func rsPairOnce(t *testing.T, server, client rsEnd, port int, timeout time.Duration, wait rsWaitFunc, strands bool) (sr, cr toolrun.Result, dog *toolrun.Watchdog) {
	t.Helper()
	rstream := ""
	if server.c || client.c {
		rstream = toolrun.Tool(t, server.name())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dog = toolrun.Watch(timeout, port, strands, cancel)
	defer dog.Stop()
	p := []string{"-p", strconv.Itoa(port)}
	server.args = append(append([]string{}, server.args...), p...)
	client.args = append(append([]string{}, client.args...), p...)
	pid, sdone := rsStart(t, ctx, rstream, server)
	wait(t, ctx, cancel, port, pid, sdone)
	_, cdone := rsStart(t, ctx, rstream, client)
	cr = <-cdone
	if cr.Code != 0 {
		cancel() // the server may wait for a client that is gone
	}
	sr = <-sdone
	return sr, cr, dog
}

// rsWaitTCP is an rsWaitFunc for TCP servers: it polls the kernel's
// socket tables (a probe connection would use up the server's accept).
func rsWaitTCP(t *testing.T, ctx context.Context, cancel func(), port, _ int, done <-chan toolrun.Result) {
	t.Helper()
	for {
		if tcpListening(t, port) {
			return
		}
		select {
		case r := <-done:
			t.Fatalf("the server exited before it listened on %d: %v", port, r)
		case <-ctx.Done():
			t.Fatalf("the server did not listen on %d: %v", port, <-done)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tcpListening reports whether a TCP socket of this network namespace
// listens on port, from /proc/net/tcp and tcp6.
func tcpListening(t *testing.T, port int) bool {
	t.Helper()
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) { // no IPv6
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// sl local_address rem_address st ...: "0100007F:1D2F 00000000:0000 0A"
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || fs[3] != "0A" {
				continue
			}
			_, p, ok := strings.Cut(fs[1], ":")
			if pb, err := hex.DecodeString(p); ok && err == nil && len(pb) == 2 && int(pb[0])<<8|int(pb[1]) == port {
				return true
			}
		}
	}
	return false
}

// rsRunName names a subtest by its flags: "default" without any.
func rsRunName(args []string) string {
	if len(args) == 0 {
		return "default"
	}
	return strings.Join(args, " ")
}

// rsRow is the columns of a row that do not depend on time.
type rsRow struct{ name, bytes, xfers, iters, total string }

// rsParse reads rstream's output: the header, then rows in show_perf's
// exact layout.
func rsParse(out string) ([]rsRow, error) {
	head, rest, _ := strings.Cut(out, "\n")
	if head+"\n" != rsHeader {
		return nil, fmt.Errorf("first line %q, want the header %q", head, rsHeader)
	}
	var rows []rsRow
	for _, l := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 8 || !strings.HasSuffix(f[5], "s") {
			return nil, fmt.Errorf("row %q: want 8 columns, the time in seconds", l)
		}
		// Re-printed with show_perf's format, the row must come out the same.
		if again := fmt.Sprintf("%-10s%-8s%-8s%-8s%-8s%8ss%10s%11s", f[0], f[1], f[2], f[3], f[4],
			strings.TrimSuffix(f[5], "s"), f[6], f[7]); again != l {
			return nil, fmt.Errorf("row %q is not in show_perf's layout (%q)", l, again)
		}
		for _, v := range f[5:] {
			if _, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64); err != nil && v != "inf" {
				return nil, fmt.Errorf("row %q: %q is not a number", l, v)
			}
		}
		rows = append(rows, rsRow{f[0], f[1], f[2], f[3], f[4]})
	}
	return rows, nil
}

// rsWantRows is the rows a run of args prints, from its plan.
func rsWantRows(t *testing.T, args []string) []rsRow {
	t.Helper()
	o, err := parseRstreamArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	var rows []rsRow
	for _, p := range rstreamPlan(&o) {
		for _, x := range p.tests {
			rows = append(rows, rsRow{x.name, SizeStr(int64(x.size)), CntStr(int64(x.count)), CntStr(int64(x.iters)),
				SizeStr(int64(x.iters) * int64(x.count) * int64(x.size) * 2)})
		}
	}
	return rows
}

// rsCheck checks a run that both ends should have passed: exit statuses
// 0, both outputs in rstream's format with the rows of want, and the
// time-independent columns of the two sides the same.
func rsCheck(t *testing.T, server, client rsEnd, sr, cr toolrun.Result, want []rsRow) {
	t.Helper()
	if sr.Code != 0 || cr.Code != 0 {
		t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
	}
	srows, serr := rsParse(sr.Stdout)
	crows, cerr := rsParse(cr.Stdout)
	if serr != nil || cerr != nil {
		t.Fatalf("server %v: %v\n%s\nclient %v: %v\n%s", server, serr, sr.Stdout, client, cerr, cr.Stdout)
	}
	allow := cmp.AllowUnexported(rsRow{})
	if diff := cmp.Diff(want, srows, allow); diff != "" {
		t.Errorf("server %v rows (-want +got):\n%s", server, diff)
	}
	if diff := cmp.Diff(srows, crows, allow); diff != "" {
		t.Errorf("rows (-server +client):\n%s", diff)
	}
	for _, e := range []struct {
		end rsEnd
		r   toolrun.Result
	}{{server, sr}, {client, cr}} {
		if !e.end.c && e.r.Stderr != "" {
			t.Errorf("%v stderr %q, want nothing", e.end, e.r.Stderr)
		}
	}
}

// TestRstreamTCP runs the Go command against itself over TCP sockets
// (-T s) on the loopback: custom tests of several sizes, and the default
// run (two connections, eight tests), all with verification.
func TestRstreamTCP(t *testing.T) {
	testutils.HostOnly(t)
	for _, args := range [][]string{
		{"-S", "1", "-C", "10", "-I", "10"},
		{"-S", "64", "-C", "100", "-I", "10"},
		{"-S", "4096", "-C", "50", "-I", "4"},
		{"-S", "65536", "-C", "16", "-I", "2"},
		{"-S", "1048576", "-C", "4", "-I", "2"},
		{"-C", "3"},
		nil,
	} {
		t.Run(rsRunName(args), func(t *testing.T) {
			common := append([]string{"-T", "s", "-T", "v"}, args...)
			server := rsEnd{args: append([]string{"-b", "127.0.0.1"}, common...)}
			client := rsEnd{args: append([]string{"-s", "127.0.0.1", "-b", "127.0.0.2"}, common...)}
			sr, cr := rsPair(t, server, client, clitest.FreePort(t), 2*time.Minute, rsWaitTCP)
			rsCheck(t, server, client, sr, cr, rsWantRows(t, common))
		})
	}
}

// TestRstreamTCPJSON: -json prints one JSON object per row, one a line,
// with the run's values, on both sides; -k only warns.
func TestRstreamTCPJSON(t *testing.T) {
	testutils.HostOnly(t)
	common := []string{"-T", "s", "-T", "v", "-S", "1000", "-C", "20", "-I", "3", "-json"}
	server := rsEnd{args: append([]string{"-b", "127.0.0.1", "-k", "5"}, common...)}
	client := rsEnd{args: append([]string{"-s", "127.0.0.1"}, common...)}
	sr, cr := rsPair(t, server, client, clitest.FreePort(t), time.Minute, rsWaitTCP)
	if sr.Code != 0 || cr.Code != 0 {
		t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
	}
	if want := "purerdma: rstream: warning: -k 5 ignored: keepalive is not supported\n"; sr.Stderr != want || cr.Stderr != "" {
		t.Errorf("stderr: server %q, client %q; want %q and nothing", sr.Stderr, cr.Stderr, want)
	}
	for _, e := range []struct{ role, out string }{{"server", sr.Stdout}, {"client", cr.Stdout}} {
		if strings.Count(e.out, "\n") != 1 {
			t.Errorf("%s stdout is not one line:\n%s", e.role, e.out)
		}
		var row rstreamRowJSON
		if err := toolrun.DecodeOneJSON(e.out, &row); err != nil {
			t.Fatalf("%s stdout is not one JSON row: %v\n%s", e.role, err, e.out)
		}
		want := rstreamRowJSON{Role: e.role, Transport: "tcp", Name: "custom", Bytes: 1000, Xfers: 20, Iters: 3,
			TotalBytes: 120000, Verified: true, Seconds: row.Seconds, GbitPerSec: row.GbitPerSec, USecPerXfer: row.USecPerXfer}
		if diff := cmp.Diff(want, row); diff != "" {
			t.Errorf("%s row (-want +got):\n%s", e.role, diff)
		}
		if row.Seconds <= 0 || row.USecPerXfer <= 0 || row.GbitPerSec <= 0 {
			t.Errorf("%s row: seconds %v, usec_per_xfer %v, gbit_per_sec %v; want them > 0", e.role, row.Seconds, row.USecPerXfer, row.GbitPerSec)
		}
		var raw map[string]any
		json.Unmarshal([]byte(e.out), &raw)
		for _, k := range []string{"role", "transport", "name", "bytes", "xfers", "iters", "total_bytes", "seconds",
			"gbit_per_sec", "usec_per_xfer", "verified"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("%s row lacks %q", e.role, k)
			}
		}
	}
}

// TestRstreamTCPVerifyFails: a server that verifies, against a client
// that sends zeros (no -T v), fails with rstream's message at byte 1 of
// the sync, and both ends exit 1 instead of waiting.
func TestRstreamTCPVerifyFails(t *testing.T) {
	testutils.HostOnly(t)
	server := rsEnd{args: []string{"-T", "s", "-T", "v", "-b", "127.0.0.1", "-S", "64", "-C", "2"}}
	client := rsEnd{args: []string{"-T", "s", "-s", "127.0.0.1", "-S", "64", "-C", "2"}}
	sr, cr := rsPair(t, server, client, clitest.FreePort(t), time.Minute, rsWaitTCP)
	if want := "purerdma: rstream: custom: sync: data verification failed byte 1\n"; sr.Code != 1 || sr.Stderr != want {
		t.Errorf("server: %v\nwant exit 1 and %q", sr, want)
	}
	if cr.Code != 1 || !strings.HasPrefix(cr.Stderr, "purerdma: rstream: custom: sync: receive 16 bytes: ") {
		t.Errorf("client: %v\nwant exit 1, its sync's receive failed", cr)
	}
	if sr.Stdout != rsHeader || cr.Stdout != rsHeader {
		t.Errorf("stdout: server %q, client %q; want the header alone", sr.Stdout, cr.Stdout)
	}
}

// TestRstreamTCPInteropC runs the Go command against rdma-core's rstream
// over TCP sockets (-T s) on the loopback, both ways, with verification:
// the byte counters, the sync, the test order and the output agree
// without RDMA. The VM's tests do the same over rsocket.
func TestRstreamTCPInteropC(t *testing.T) {
	testutils.HostOnly(t)
	toolrun.Tool(t, "rstream")
	for _, args := range [][]string{
		{"-S", "64", "-C", "100", "-I", "10"},
		{"-S", "65536", "-C", "16", "-I", "2"},
		{"-S", "1048576", "-C", "4", "-I", "2"},
		nil,
	} {
		for _, goServer := range []bool{true, false} {
			name := "C-server+go-client"
			if goServer {
				name = "go-server+C-client"
			}
			t.Run(name+" "+rsRunName(args), func(t *testing.T) {
				common := append([]string{"-T", "s", "-T", "v"}, args...)
				server := rsEnd{c: !goServer, args: append([]string{"-b", "127.0.0.1"}, common...)}
				cargs := []string{"-s", "127.0.0.1", "-b", "127.0.0.2"}
				if goServer {
					// C's client binds -b with the -p port: the default
					// run's second connection would find the first's
					// TIME_WAIT there (rbind: Address already in use).
					cargs = cargs[:2]
				}
				client := rsEnd{c: goServer, args: append(cargs, common...)}
				sr, cr := rsPair(t, server, client, clitest.FreePort(t), 2*time.Minute, rsWaitTCP)
				rsCheck(t, server, client, sr, cr, rsWantRows(t, common))
			})
		}
	}
}

// TestRstreamTCPInterrupt: an interrupt ends a server waiting for a
// client, and one waiting in a test for the client's data (after the
// sync: this test is the client), with status 1.
func TestRstreamTCPInterrupt(t *testing.T) {
	testutils.HostOnly(t)
	for _, connect := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", connect), func(t *testing.T) {
			port := clitest.FreePort(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
			defer wcancel()
			_, done := rsStart(t, ctx, "", rsEnd{args: []string{"-T", "s", "-b", "127.0.0.1", "-p", strconv.Itoa(port)}})
			rsWaitTCP(t, wctx, wcancel, port, 0, done)
			if connect {
				var d net.Dialer
				c, err := d.DialContext(wctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				rsClientSync(t, c)
			}
			cancel()
			rsWaitInterrupted(t, wctx, done)
		})
	}
}

// rsClientSync is a client's side of the sync (no -T v), after which the
// server waits for the first transfer.
func rsClientSync(t *testing.T, c net.Conn) {
	t.Helper()
	b := make([]byte, rsSyncSize)
	if _, err := c.Write(b); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// rsWaitInterrupted waits for a run that was interrupted to end with
// status 1 and the message that says so.
func rsWaitInterrupted(t *testing.T, ctx context.Context, done <-chan toolrun.Result) {
	t.Helper()
	select {
	case r := <-done:
		if want := "purerdma: rstream: interrupted: context canceled\n"; r.Code != 1 || r.Stderr != want {
			t.Errorf("%v\nwant exit 1 and %q", r, want)
		}
	case <-ctx.Done():
		t.Fatal("the run did not end within a minute of the interrupt")
	}
}
