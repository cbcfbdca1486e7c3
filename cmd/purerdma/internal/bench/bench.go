// Package bench is "purerdma bench": latency and bandwidth between two
// purerdma processes, one per side, the way perftest's ib_write_lat,
// ib_send_bw and friends measure libibverbs (a server waits for a client
// on TCP, the two exchange their queue pair numbers, GIDs and memory
// keys, connect an RC queue pair and run the test with busy polling);
// "bench connect", rdma_cm connection set-up and tear-down timed as
// cmtime times them (connect.go); and "bench rpma", the rpma package
// measured as testdata/rpmabench.c measures C librpma (rpma.go). The
// statistics, results and the two sides' messages are internal/bench's.
// docs/performance.md describes the method and compares the numbers with
// perftest's, cmtime's and librpma's.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/progress"
	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/spin"
)

// Command is "purerdma bench".
var Command = cli.Command{
	Name: "bench",
	Usage: "  bench TEST [-d DEV] [-i PORT] [-x GIDIDX] [-s SIZE] [-n ITERS] [-p TCPPORT] [-json] [SERVER]\n" +
		"                                           measure latency or bandwidth like perftest's ib_TEST (TEST: write_lat,\n" +
		"                                           read_lat, send_lat, atomic_lat, write_bw, read_bw, send_bw); without\n" +
		"                                           SERVER wait for a client, with it connect to that server; also\n" +
		"                                           -w WARMUP -t TXDEPTH -Q CQMOD -yield DUR -cpuprofile FILE\n" +
		"                                           -allocprofile FILE\n" +
		"  bench connect (-b ADDR | -s SERVER) [-c CONNS] [-p PORT] [-json] [-accepters N] [-percq]\n" +
		"                                           time rdma_cm connection set-up and tear-down, like cmtime\n" +
		rpmaUsage, // rpma.go
	Help: benchHelp,
	Run:  benchCmd,
}

const benchHelp = `Flags of bench TEST (perftest's defaults):
  -d DEV           device (default: the first)
  -i PORT          device port (default 1)
  -x GIDIDX        GID index (default: the port's RoCE v2 IPv4 GID)
  -s SIZE          message size in bytes
  -n ITERS         measured iterations
  -w WARMUP        iterations before them
  -t TXDEPTH       send queue depth (bandwidth tests)
  -Q CQMOD         signal every CQMOD-th send (bandwidth tests)
  -p TCPPORT       the TCP port of the exchange (default 18515)
  -R               connect the QPs through the rdma_cm (as perftest's -R; iWARP
                   devices need it), on port TCPPORT+1; the device is the one
                   the addresses route to, not -d's
  -b ADDR          with -R: the server's listen address, the client's source
                   address (default: any, and the route's)
  -json            print the result as one JSON object (docs/performance.md lists the fields)
  -yield DUR       let the Go scheduler run this often while busy polling
  -cpuprofile FILE, -allocprofile FILE   write profiles

Flags of bench connect: -b ADDR (the server's listen address; the client's source),
-s SERVER (the client), -p PORT (7471), -c N connections (100), -percq (a CQ pair per
connection), -accepters N (server), -json: one JSON object {"connections", "steps":
[{"step", "total_ms", "max_ms", "min_us", "us_per_conn"}]}.

On a terminal, the run shows its progress on stderr.

Examples:
  purerdma bench write_lat -d rxe0                 (the server)
  purerdma bench write_lat -d rxe0 198.18.0.1      (the client)
  purerdma bench send_bw -s 65536 -n 5000 -json 198.18.0.1
  purerdma bench connect -b 198.18.0.1 -c 100
  purerdma bench connect -s 198.18.0.1 -c 100 -json
`

// benchConfig is a parsed bench command line.
type benchConfig struct {
	test         perf.Test
	dev          string        // -d: "" for the first device
	port         int           // -i
	gidIndex     int           // -x: -1 picks the port's RoCE v2 IPv4 GID
	size         int           // -s: bytes per message
	iters        int           // -n: measured iterations
	warmup       int           // -w: iterations before them
	txDepth      int           // -t: send queue depth (bandwidth tests)
	cqMod        int           // -Q: signal every cqMod-th send (bandwidth tests)
	tcpPort      int           // -p
	json         bool          // -json
	cpuProfile   string        // -cpuprofile
	allocProfile string        // -allocprofile
	yield        time.Duration // -yield: let the Go scheduler run this often; 0 never
	server       string        // the server to connect to; "" to be the server
	cm           bool          // -R: connect the QPs through the rdma_cm
	bind         string        // -b: with -R, the local address (the server's listen address, the client's source)
}

// Defaults, as perftest's (perftest_parameters.h) where it has one.
const (
	benchDefLatSize    = 2     // DEF_SIZE_LAT
	benchDefBWSize     = 65536 // DEF_SIZE_BW
	benchDefAtomicSize = 8     // DEF_SIZE_ATOMIC
	benchDefIters      = 1000  // DEF_ITERS
	benchDefItersWB    = 5000  // DEF_ITERS_WB: ib_write_bw
	benchDefTxDepth    = 128   // DEF_TX_BW
	benchDefCQMod      = 100   // DEF_CQ_MOD
	benchCQModLimit    = 8192  // MSG_SIZE_CQ_MOD_LIMIT: larger messages signal every send
	benchDefRxDepth    = 512   // DEF_RX_SEND
	benchDefLatWarmup  = 100   // purerdma's own: perftest warms up no latency test
	benchDefTCPPort    = 18515 // perftest's default port
	benchMinIters      = 5     // perftest's MIN_ITER
	benchMaxTxDepth    = 16384
	benchMaxYield      = 9 * time.Millisecond // past 10 ms, sysmon preempts first
)

// checkRun checks what bench TEST and bench rpma TEST share: the
// message size, the iterations and warm-up, the yield interval.
func checkRun(size, iters, warmup int, yield time.Duration) error {
	switch {
	case size < 1 || size > perf.MaxSize:
		return fmt.Errorf("size %d: 1 to %d bytes", size, perf.MaxSize)
	case iters < benchMinIters || iters > perf.MaxIters:
		return fmt.Errorf("%d iterations: %d to %d", iters, benchMinIters, perf.MaxIters)
	case warmup > perf.MaxIters:
		return fmt.Errorf("%d warm-up iterations: at most %d", warmup, perf.MaxIters)
	case yield < 0 || yield > benchMaxYield:
		return fmt.Errorf("yield interval %v: 0 (never) to %v", yield, benchMaxYield)
	}
	return nil
}

// parseFlags parses args with fs, flags allowed after the operands
// (SERVER) as well as before them, and returns the operands in order;
// -h is cli.ErrHelp, a bad flag a usage error naming cmd.
func parseFlags(fs *flag.FlagSet, args []string, cmd string) (operands []string, err error) {
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, cli.ErrHelp
		} else if err != nil {
			return nil, cli.UsageError("%s: %v", cmd, err)
		}
		if args = fs.Args(); len(args) == 0 {
			return operands, nil
		}
		operands, args = append(operands, args[0]), args[1:]
	}
}

func parseBenchArgs(args []string) (benchConfig, error) {
	if len(args) == 0 {
		return benchConfig{}, cli.UsageError("bench needs a test: one of write_lat, read_lat, send_lat, atomic_lat, write_bw, read_bw, send_bw, connect")
	}
	if cli.IsHelpFlag(args[0]) {
		return benchConfig{}, cli.ErrHelp
	}
	test, err := perf.ParseTest(args[0])
	if err != nil {
		return benchConfig{}, cli.UsageError("%v", err)
	}
	c := benchConfig{test: test}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.dev, "d", "", "device")
	fs.IntVar(&c.port, "i", 1, "port")
	fs.IntVar(&c.gidIndex, "x", -1, "GID index")
	fs.IntVar(&c.size, "s", -1, "message size")
	fs.IntVar(&c.iters, "n", -1, "iterations")
	fs.IntVar(&c.warmup, "w", -1, "warm-up iterations")
	fs.IntVar(&c.txDepth, "t", -1, "tx depth")
	fs.IntVar(&c.cqMod, "Q", -1, "CQ moderation")
	fs.IntVar(&c.tcpPort, "p", benchDefTCPPort, "TCP port")
	fs.BoolVar(&c.json, "json", false, "JSON output")
	fs.BoolVar(&c.cm, "R", false, "connect the QPs through the rdma_cm")
	fs.StringVar(&c.bind, "b", "", "with -R: the local address")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "CPU profile file")
	fs.StringVar(&c.allocProfile, "allocprofile", "", "allocation profile file (records every allocation: slows the run)")
	fs.DurationVar(&c.yield, "yield", spin.DefaultInterval, "scheduler yield interval (package spin)")
	pos, err := parseFlags(fs, args[1:], "bench "+test.String())
	if err != nil {
		return benchConfig{}, err
	}
	if len(pos) > 1 {
		return benchConfig{}, cli.UsageError("bench %v: one server address, not %q", test, pos)
	}
	if len(pos) == 1 {
		c.server = pos[0]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := c.fill(given); err != nil {
		return benchConfig{}, cli.UsageError("bench %v: %v", test, err)
	}
	return c, nil
}

// fill sets the defaults of the options not given and checks them all.
func (c *benchConfig) fill(given map[string]bool) error {
	if c.size < 0 {
		switch {
		case c.test == perf.AtomicLat:
			c.size = benchDefAtomicSize
		case c.test.Latency():
			c.size = benchDefLatSize
		default:
			c.size = benchDefBWSize
		}
	}
	if c.iters < 0 {
		c.iters = benchDefIters
		if c.test == perf.WriteBW {
			c.iters = benchDefItersWB
		}
	}
	if c.test.Latency() {
		if given["t"] || given["Q"] {
			return errors.New("-t and -Q are for the bandwidth tests; latency tests keep one request in flight")
		}
		c.txDepth, c.cqMod = 1, 1
	} else {
		if c.txDepth < 0 {
			c.txDepth = benchDefTxDepth
		}
		if c.cqMod < 0 {
			c.cqMod = benchDefCQMod
			if c.size > benchCQModLimit {
				c.cqMod = 1 // as perftest: big messages complete slowly anyway
			}
		}
		if c.txDepth < 1 || c.txDepth > benchMaxTxDepth {
			return fmt.Errorf("tx depth %d: 1 to %d", c.txDepth, benchMaxTxDepth)
		}
		if c.cqMod < 1 {
			return fmt.Errorf("CQ moderation %d: must be at least 1", c.cqMod)
		}
		c.cqMod = min(c.cqMod, c.txDepth)
	}
	if c.warmup < 0 {
		c.warmup = benchDefLatWarmup
		if !c.test.Latency() {
			c.warmup = c.txDepth // one window, as perftest --perform_warm_up
		}
	}
	if err := checkRun(c.size, c.iters, c.warmup, c.yield); err != nil {
		return err
	}
	switch {
	case c.test == perf.AtomicLat && c.size != benchDefAtomicSize:
		return fmt.Errorf("size %d: atomics are 8 bytes", c.size)
	case c.port < 1 || c.port > 255:
		return fmt.Errorf("port %d: 1 to 255", c.port)
	case c.gidIndex < -1 || c.gidIndex > 255:
		return fmt.Errorf("GID index %d: 0 to 255", c.gidIndex)
	case c.tcpPort < 1 || c.tcpPort > 65535:
		return fmt.Errorf("TCP port %d: 1 to 65535", c.tcpPort)
	}
	return nil
}

// rxDepth is how many receives a SEND test keeps posted.
func (c *benchConfig) rxDepth() int {
	if c.test != perf.SendLat && c.test != perf.SendBW {
		return 0
	}
	return min(benchDefRxDepth, c.warmup+c.iters)
}

// startProfiles writes a CPU profile to cpu until stop, and records
// every allocation until stop, which writes the allocation profile to
// allocs; an empty path turns its profile off. Recording every
// allocation slows the program: use it to find what allocates, not to
// time.
func startProfiles(cpu, allocs string) (stop func() error, err error) {
	stopCPU := func() {}
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stopCPU = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	if allocs != "" {
		runtime.MemProfileRate = 1
	}
	return func() error {
		stopCPU()
		if allocs == "" {
			return nil
		}
		f, err := os.Create(allocs)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}, nil
}

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "connect" {
		return runBenchConnect(ctx, args[1:], stdout, stderr) // connect.go
	}
	if len(args) > 0 && args[0] == "rpma" {
		return runBenchRpma(ctx, args[1:], stdout, stderr) // rpma.go
	}
	cfg, err := parseBenchArgs(args)
	if err != nil {
		return err
	}
	stop, err := startProfiles(cfg.cpuProfile, cfg.allocProfile)
	if err != nil {
		return err
	}
	stopProgress := progress.New(stderr).Ticker(func(d time.Duration) string {
		return fmt.Sprintf("bench %v: running for %v", cfg.test, d.Truncate(time.Second))
	})
	res, err := benchRun(ctx, &cfg)
	stopProgress()
	if err := errors.Join(err, stop()); err != nil {
		return err
	}
	if cfg.json {
		return res.WriteJSON(stdout)
	}
	return res.WriteText(stdout)
}

// benchRun opens the device, then connects to the peer and runs the
// test: a device that does not exist or does not work fails at once,
// before a server waits for its client.
func benchRun(ctx context.Context, cfg *benchConfig) (_ *perf.Result, err error) {
	if cfg.cm {
		return benchRunCM(ctx, cfg) // cm.go
	}
	ep, err := openBenchEndpoint(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench %v: %w", cfg.test, err)
	}
	defer func() {
		if cerr := ep.close(); err == nil && cerr != nil {
			err = fmt.Errorf("bench %v: %w", cfg.test, cerr)
		}
	}()
	conn, err := benchDial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := runBench(ctx, cfg, conn, ep)
	if cerr := conn.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench %v: %w", cfg.test, err)
	}
	return res, nil
}

// benchDialTimeout is how long a client keeps trying a server that does
// not listen yet (perftest gives up at once; scripts then must sleep).
const benchDialTimeout = 10 * time.Second

// benchDial accepts one client (server side) or connects to the
// server, retrying failed connections for benchDialTimeout.
func benchDial(ctx context.Context, cfg *benchConfig) (net.Conn, error) {
	port := strconv.Itoa(cfg.tcpPort)
	if cfg.server == "" {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", ":"+port)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		conn, err := ln.Accept()
		stop()
		ln.Close()
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return conn, err
	}
	addr := cfg.server
	if _, _, err := net.SplitHostPort(addr); err != nil || !strings.Contains(addr, ":") || strings.Count(addr, ":") > 1 && !strings.HasPrefix(addr, "[") {
		addr = net.JoinHostPort(cfg.server, port)
	}
	var d net.Dialer
	deadline := time.Now().Add(benchDialTimeout)
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
