package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/spin"
)

// bench rpma measures the rpma package the way scripts/bench-rpma
// measures C librpma with testdata/rpmabench.c: the same
// operations, sizes and statistics, and a wire both programs speak, so
// a Go client runs against a C server and the other way round.
//
// The server listens with rpma, registers one region and accepts the
// client's request with the region's and its peer configuration's
// descriptors as private data, in the layout of librpma's examples
// (struct common_data). The client's request carries the test and its
// parameters (rpmaHello), which the server checks against its own.
//
//	write_lat  rpma write (completion on error) + rpma flush (always), wait
//	           for the flush: a sample is the time from one write to the next
//	read_lat   rpma read, wait for it
//	send_lat   send/recv ping-pong, every receive posted again; a sample is
//	           half a round trip (perftest's send_lat)
//	write_bw   a stream of writes with a flush after every -f of them, up to
//	           -t writes in flight; a flush's completion completes its writes
//
// With -verify the client, after the measured loop, writes a pattern the
// loop did not write, flushes it, reads it back into a zeroed buffer and
// compares: a run whose bytes did not arrive fails instead of reporting
// a latency.

// rpmaTest is a bench rpma test.
type rpmaTest uint8

const (
	rpmaWriteLat rpmaTest = iota + 1
	rpmaReadLat
	rpmaSendLat
	rpmaWriteBW
)

var rpmaTestNames = [...]string{rpmaWriteLat: "write_lat", rpmaReadLat: "read_lat", rpmaSendLat: "send_lat", rpmaWriteBW: "write_bw"}

func (t rpmaTest) String() string {
	if t.valid() {
		return rpmaTestNames[t]
	}
	return fmt.Sprintf("rpmaTest(%d)", uint8(t))
}

func (t rpmaTest) valid() bool { return t >= rpmaWriteLat && t <= rpmaWriteBW }

func (t rpmaTest) latency() bool { return t != rpmaWriteBW }

// flushes reports whether the test flushes, so the flush method matters.
func (t rpmaTest) flushes() bool { return t == rpmaWriteLat || t == rpmaWriteBW }

// rttFactor halves a ping-pong's round trip, as perftest does.
func (t rpmaTest) rttFactor() int {
	if t == rpmaSendLat {
		return 2
	}
	return 1
}

func parseRpmaTest(name string) (rpmaTest, error) {
	for t := rpmaWriteLat; t <= rpmaWriteBW; t++ {
		if rpmaTestNames[t] == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown rpma test %q (one of %s)", name, strings.Join(rpmaTestNames[1:], ", "))
}

// rpmaBenchConfig is a parsed bench rpma command line.
type rpmaBenchConfig struct {
	test       rpmaTest
	size       int              // -s: bytes per operation
	iters      int              // -n: measured iterations (operations in write_bw)
	warmup     int              // -w: iterations before them
	txDepth    int              // -t: writes in flight (write_bw)
	flushEvery int              // -f: writes per flush (write_bw)
	flush      rpma.FlushMethod // -flush: the client's flush method
	bind       string           // -b: the server's listen address; "" for a client
	port       int              // -p: rdma_cm port
	json       bool             // -json
	yield      time.Duration    // -yield
	server     string           // the server a client connects to
	timeout    time.Duration    // -connect-timeout: how long a client retries a server that is not up
	flushGiven bool             // -flush was given (a server takes none)
	verify     bool             // -verify: write, flush and read back a pattern after the run (client)
}

// Defaults and limits of bench rpma.
const (
	rpmaDefSize       = 64
	rpmaDefIters      = 1000
	rpmaDefLatWarmup  = 100
	rpmaDefTxDepth    = 128
	rpmaDefFlushEvery = 32
	rpmaDefPort       = 18516
	rpmaMaxDepth      = 4096
	rpmaRxDepth       = 64 // receives a send_lat side keeps posted
	rpmaDefTimeout    = 10 * time.Second
)

const rpmaUsage = "  bench rpma TEST [-s SIZE] [-n ITERS] [-w WARMUP] [-t DEPTH] [-f EVERY] [-flush auto|emulated|native]\n" +
	"             [-p PORT] [-json] [-yield DUR] [-verify] (-b ADDR | SERVER)\n" +
	"                                           measure the rpma package like testdata/rpmabench.c measures librpma\n" +
	"                                           (TEST: write_lat = write + flush, read_lat, send_lat, write_bw with a\n" +
	"                                           flush every -f writes); -b ADDR serves, SERVER connects\n"

func parseRpmaBenchArgs(args []string) (rpmaBenchConfig, error) {
	if len(args) == 0 {
		return rpmaBenchConfig{}, cli.UsageError("bench rpma needs a test: one of %s", strings.Join(rpmaTestNames[1:], ", "))
	}
	if cli.IsHelpFlag(args[0]) {
		return rpmaBenchConfig{}, cli.ErrHelp
	}
	test, err := parseRpmaTest(args[0])
	if err != nil {
		return rpmaBenchConfig{}, cli.UsageError("bench rpma: %v", err)
	}
	c := rpmaBenchConfig{test: test}
	var flush string
	fs := flag.NewFlagSet("bench rpma", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&c.size, "s", rpmaDefSize, "bytes per operation")
	fs.IntVar(&c.iters, "n", rpmaDefIters, "iterations")
	fs.IntVar(&c.warmup, "w", -1, "warm-up iterations")
	fs.IntVar(&c.txDepth, "t", -1, "writes in flight (write_bw)")
	fs.IntVar(&c.flushEvery, "f", -1, "writes per flush (write_bw)")
	fs.StringVar(&flush, "flush", "auto", "flush method: auto, emulated or native")
	fs.StringVar(&c.bind, "b", "", "listen address (server)")
	fs.IntVar(&c.port, "p", rpmaDefPort, "rdma_cm port")
	fs.BoolVar(&c.json, "json", false, "JSON output")
	fs.DurationVar(&c.yield, "yield", spin.DefaultInterval, "scheduler yield interval (package spin)")
	fs.DurationVar(&c.timeout, "connect-timeout", rpmaDefTimeout, "how long a client retries a server that is not listening yet")
	fs.BoolVar(&c.verify, "verify", false, "after the run, write a pattern, flush it, read it back and compare (client)")
	pos, err := parseFlags(fs, args[1:], "bench rpma "+test.String())
	if err != nil {
		return rpmaBenchConfig{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := c.fill(pos, flush, given); err != nil {
		return rpmaBenchConfig{}, cli.UsageError("bench rpma %v: %v", test, err)
	}
	return c, nil
}

// fill sets the defaults of the options not given and checks them all.
func (c *rpmaBenchConfig) fill(pos []string, flush string, given map[string]bool) error {
	switch {
	case len(pos) > 1:
		return fmt.Errorf("one server address, not %q", pos)
	case len(pos) == 1 && c.bind != "":
		return errors.New("-b ADDR (server) or SERVER (client), not both")
	case len(pos) == 0 && c.bind == "":
		return errors.New("-b ADDR to serve or SERVER to connect to")
	case len(pos) == 1:
		c.server = pos[0]
	}
	switch flush {
	case "auto":
		c.flush = rpma.FlushAuto
	case "emulated":
		c.flush = rpma.FlushEmulated
	case "native":
		c.flush = rpma.FlushNative
	default:
		return fmt.Errorf("flush method %q: auto, emulated or native", flush)
	}
	c.flushGiven = given["flush"]
	if c.flushGiven && c.server == "" {
		return errors.New("-flush is the client's choice: the server registers for both methods")
	}
	if c.verify && c.server == "" {
		return errors.New("-verify is the client's: it writes, flushes and reads back the server's region")
	}
	if c.test == rpmaWriteBW {
		if c.txDepth < 0 {
			c.txDepth = rpmaDefTxDepth
		}
		if c.flushEvery < 0 {
			c.flushEvery = min(rpmaDefFlushEvery, c.txDepth)
		}
		if c.txDepth < 1 || c.txDepth > rpmaMaxDepth {
			return fmt.Errorf("depth %d: 1 to %d", c.txDepth, rpmaMaxDepth)
		}
		if c.flushEvery < 1 || c.flushEvery > c.txDepth {
			return fmt.Errorf("a flush every %d writes: 1 to the depth, %d", c.flushEvery, c.txDepth)
		}
	} else {
		if given["t"] || given["f"] {
			return errors.New("-t and -f are for write_bw; the latency tests keep one operation in flight")
		}
		c.txDepth, c.flushEvery = 1, 1
		if c.test == rpmaReadLat || c.test == rpmaSendLat {
			c.flushEvery = 0
		}
	}
	if c.warmup < 0 {
		c.warmup = rpmaDefLatWarmup
		if c.test == rpmaWriteBW {
			c.warmup = c.txDepth
		}
	}
	if err := checkRun(c.size, c.iters, c.warmup, c.yield); err != nil {
		return err
	}
	switch {
	case c.port < 1 || c.port > 65535:
		return fmt.Errorf("port %d: 1 to 65535", c.port)
	case c.timeout <= 0:
		return fmt.Errorf("connect timeout %v: must be positive", c.timeout)
	}
	return nil
}

// total is the number of iterations a loop runs, warm-up included.
func (c *rpmaBenchConfig) total() int { return c.warmup + c.iters }

// rxDepth is how many receives a send_lat side keeps posted.
func (c *rpmaBenchConfig) rxDepth() int {
	if c.test != rpmaSendLat {
		return 0
	}
	return min(rpmaRxDepth, c.total())
}

// sqSize is the send queue a client needs: the writes in flight and
// their flushes.
func (c *rpmaBenchConfig) sqSize() int {
	if c.test == rpmaWriteBW {
		return c.txDepth + (c.txDepth+c.flushEvery-1)/c.flushEvery + 1
	}
	return 2 // write_lat: a write and its flush
}

// The request's private data (rpmaHello): what the client asks the
// server to run. Little-endian, 20 bytes:
//
//	0  magic "RPMB"
//	4  version (1)
//	5  test (rpmaTest)
//	6  reserved (0, 0)
//	8  size (uint32)
//	12 iterations (uint32)
//	16 warm-up iterations (uint32)
const (
	rpmaHelloMagic   = "RPMB"
	rpmaHelloVersion = 1
	rpmaHelloSize    = 20
)

// rpmaHello is the client's request.
type rpmaHello struct {
	Test   rpmaTest
	Size   uint32
	Iters  uint32
	Warmup uint32
}

func (h rpmaHello) encode() []byte {
	b := make([]byte, rpmaHelloSize)
	copy(b, rpmaHelloMagic)
	b[4], b[5] = rpmaHelloVersion, byte(h.Test)
	binary.LittleEndian.PutUint32(b[8:], h.Size)
	binary.LittleEndian.PutUint32(b[12:], h.Iters)
	binary.LittleEndian.PutUint32(b[16:], h.Warmup)
	return b
}

// errRpmaWire marks private data that is not bench rpma's.
var errRpmaWire = errors.New("not a bench rpma peer")

// decodeRpmaHello reads a request's private data; the transport may pad
// it with zeros.
func decodeRpmaHello(b []byte) (rpmaHello, error) {
	if len(b) < rpmaHelloSize || string(b[:4]) != rpmaHelloMagic {
		return rpmaHello{}, fmt.Errorf("%w: request private data %x", errRpmaWire, b[:min(len(b), rpmaHelloSize)])
	}
	if b[4] != rpmaHelloVersion {
		return rpmaHello{}, fmt.Errorf("%w: wire version %d, want %d", errRpmaWire, b[4], rpmaHelloVersion)
	}
	h := rpmaHello{Test: rpmaTest(b[5]), Size: binary.LittleEndian.Uint32(b[8:]),
		Iters: binary.LittleEndian.Uint32(b[12:]), Warmup: binary.LittleEndian.Uint32(b[16:])}
	if !h.Test.valid() {
		return rpmaHello{}, fmt.Errorf("%w: test %d", errRpmaWire, b[5])
	}
	return h, nil
}

func (c *rpmaBenchConfig) hello() rpmaHello {
	return rpmaHello{Test: c.test, Size: uint32(c.size), Iters: uint32(c.iters), Warmup: uint32(c.warmup)}
}

// check compares a client's request with the server's own command line:
// the test and the size must agree, and for send_lat, whose server runs
// the loop too, the iteration counts.
func (c *rpmaBenchConfig) check(h rpmaHello) error {
	mine := c.hello()
	var diffs []string
	if h.Test != mine.Test {
		diffs = append(diffs, fmt.Sprintf("test %v, this side %v", h.Test, mine.Test))
	}
	if h.Size != mine.Size {
		diffs = append(diffs, fmt.Sprintf("-s %d, this side -s %d", h.Size, mine.Size))
	}
	if c.test == rpmaSendLat && (h.Iters != mine.Iters || h.Warmup != mine.Warmup) {
		diffs = append(diffs, fmt.Sprintf("-n %d -w %d, this side -n %d -w %d", h.Iters, h.Warmup, mine.Iters, mine.Warmup))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the client asks for another run: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// The accept's private data: struct common_data of librpma's examples
// (uint16_t data_offset; uint8_t mr_desc_size; uint8_t pcfg_desc_size;
// char descriptors[24]), host byte order (little-endian here).
const (
	rpmaDescriptorsMax = 24
	rpmaCommonDataSize = 4 + rpmaDescriptorsMax
)

// rpmaCommonData is the server's answer: its region and its peer
// configuration.
type rpmaCommonData struct {
	DataOffset uint16
	MRDesc     []byte
	PCfgDesc   []byte
}

func (d *rpmaCommonData) encode() ([]byte, error) {
	if len(d.MRDesc)+len(d.PCfgDesc) > rpmaDescriptorsMax {
		return nil, fmt.Errorf("descriptors of %d and %d bytes do not fit %d", len(d.MRDesc), len(d.PCfgDesc), rpmaDescriptorsMax)
	}
	b := make([]byte, rpmaCommonDataSize)
	binary.LittleEndian.PutUint16(b, d.DataOffset)
	b[2], b[3] = byte(len(d.MRDesc)), byte(len(d.PCfgDesc))
	n := copy(b[4:], d.MRDesc)
	copy(b[4+n:], d.PCfgDesc)
	return b, nil
}

func decodeRpmaCommonData(b []byte) (rpmaCommonData, error) {
	if len(b) < rpmaCommonDataSize {
		return rpmaCommonData{}, fmt.Errorf("%w: %d bytes of private data, want %d", errRpmaWire, len(b), rpmaCommonDataSize)
	}
	mrn, pn := int(b[2]), int(b[3])
	if mrn+pn > rpmaDescriptorsMax {
		return rpmaCommonData{}, fmt.Errorf("%w: descriptor sizes %d + %d exceed %d", errRpmaWire, mrn, pn, rpmaDescriptorsMax)
	}
	d := rpmaCommonData{DataOffset: binary.LittleEndian.Uint16(b)}
	d.MRDesc = append([]byte(nil), b[4:4+mrn]...)
	d.PCfgDesc = append([]byte(nil), b[4+mrn:4+mrn+pn]...)
	return d, nil
}

// rpmaResult is what a bench rpma client measured.
type rpmaResult struct {
	Test          string          `json:"test"`
	Library       string          `json:"library"` // "purerdma" (C: "librpma")
	Role          string          `json:"role"`
	Size          int             `json:"size"`
	Iterations    int             `json:"iterations"`
	Warmup        int             `json:"warmup"`
	TxDepth       int             `json:"tx_depth"`
	FlushEvery    int             `json:"flush_every,omitempty"`
	Flush         string          `json:"flush,omitempty"` // "native" or "emulated" where the test flushes
	CyclesPerUsec float64         `json:"cycles_per_usec"`
	GCCycles      uint64          `json:"gc_cycles"`
	Latency       *perf.Latency   `json:"latency_usec,omitempty"`
	Bandwidth     *perf.Bandwidth `json:"bandwidth,omitempty"`
	Verified      bool            `json:"verified,omitempty"` // -verify: the pattern written and flushed read back equal
}

func (r *rpmaResult) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// The text layout, which testdata/rpmabench.c prints too: a banner of
// "key : value" pairs, then perftest's latency or bandwidth columns, so
// scripts read both programs (and perftest) with one parser.
const (
	rpmaLine       = "---------------------------------------------------------------------------------------\n"
	rpmaLatHeading = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	rpmaLatRow     = " %-7d %-10d     %-7.2f        %-7.2f      %-7.2f        %-7.2f        %-7.2f        %-7.2f                %-7.2f\n"
	rpmaBWHeading  = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	rpmaBWRow      = " %-7d    %-10d       %-7.2f            %-7.2f             %-7.6f\n"
)

var rpmaTestTitles = [...]string{rpmaWriteLat: "write + flush latency", rpmaReadLat: "read latency",
	rpmaSendLat: "send/recv ping-pong latency", rpmaWriteBW: "write bandwidth, flushed"}

func (r *rpmaResult) writeText(w io.Writer) error {
	t, err := parseRpmaTest(r.Test)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(rpmaLine)
	fmt.Fprintf(&b, "                    bench rpma %s: %s (%s, %s)\n", r.Test, rpmaTestTitles[t], r.Role, r.Library)
	flush := r.Flush
	if flush == "" {
		flush = "none"
	}
	fmt.Fprintf(&b, " Library        : %s\t\tFlush          : %s\n", r.Library, flush)
	fmt.Fprintf(&b, " TX depth       : %d\t\tFlush every    : %d\n", r.TxDepth, r.FlushEvery)
	fmt.Fprintf(&b, " Warm-up iters  : %d\t\tCycles/usec    : %.2f\n", r.Warmup, r.CyclesPerUsec)
	fmt.Fprintf(&b, " GC cycles      : %d\n", r.GCCycles)
	if r.Verified {
		fmt.Fprintf(&b, " Verified       : %d B written, flushed and read back equal\n", r.Size)
	}
	b.WriteString(rpmaLine)
	switch {
	case r.Latency != nil:
		l := r.Latency
		b.WriteString(rpmaLatHeading)
		fmt.Fprintf(&b, rpmaLatRow, r.Size, r.Iterations, l.Min, l.Max, l.Median, l.Avg, l.Stdev, l.P99, l.P999)
	case r.Bandwidth != nil:
		bw := r.Bandwidth
		b.WriteString(rpmaBWHeading)
		fmt.Fprintf(&b, rpmaBWRow, r.Size, r.Iterations, bw.PeakMiBps, bw.MiBps, bw.Mpps)
	default:
		return fmt.Errorf("bench rpma %s: a result without numbers", r.Test)
	}
	b.WriteString(rpmaLine)
	_, err = io.WriteString(w, b.String())
	return err
}

func runBenchRpma(ctx context.Context, args []string, stdout, _ io.Writer) error {
	cfg, err := parseRpmaBenchArgs(args)
	if err != nil {
		return err
	}
	if cfg.server == "" {
		if err := rpmaServe(ctx, &cfg); err != nil {
			return fmt.Errorf("bench rpma %v (server): %w", cfg.test, err)
		}
		return nil
	}
	res, err := rpmaClient(ctx, &cfg)
	if err != nil {
		return fmt.Errorf("bench rpma %v: %w", cfg.test, err)
	}
	if cfg.json {
		return res.writeJSON(stdout)
	}
	return res.writeText(stdout)
}
