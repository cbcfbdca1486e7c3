// Package rstream is "purerdma rstream": rdma-core's rstream
// (librdmacm/examples/rstream.c, with common.c's helpers) in Go, over the
// rsocket package: the same flags, tests, sizes, counts, socket options
// and output, and the same bytes on the wire, so either end can be the C
// tool (rdma-core 44 and later).
//
// Each test is a sync (the client sends 16 bytes, the server sends 16
// back), then per iteration the client sends transfer_count transfers of
// transfer_size bytes and the server sends as many back. With -T v each
// side fills what it sends from a running byte counter (format_buf) and
// checks what it receives against another (verify_buf); both counters
// run on across transfers, tests and connections for the life of the
// process, the syncs included, as C's static counters do.
//
// Differences from rstream: a failed test ends the run with status 1
// (rstream's default run goes on with the next test and still exits 0,
// its custom run exits 255); a peer that closes the connection in the
// middle of a test is an error (rstream's receive loop can spin on it for
// ever); the messages of errors go to stderr, prefixed "purerdma:", and
// a bad command line exits 2 (rstream prints its usage to stdout and
// exits 1); numbers must be decimal and in range (rstream's atoi takes
// "4k" as 4); -f takes ip, ipv6 or name exactly, refuses gid (AF_IB) and
// unknown formats instead of warning; -T f (fork) is refused; -k is
// accepted with a warning and does nothing; -T b, n, a and r change
// nothing; a client's -b sets its source address only (rstream binds
// the -p port there too, so on one host its client cannot bind the
// server's address). A Go server listens
// again, with the bandwidth tests' inline size, as soon as it has
// accepted the latency tests' connection (an rsocket.Listener's Config
// is fixed, where C sets the listening rsocket's options before each
// accept).
//
// The package also runs riostream's tests (iomap.go): "purerdma
// riostream" (package riostream) is this command line and run with
// rsocket's iomap transfers, through Stream.
package rstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/uverbs"
)

// Command is "purerdma rstream".
var Command = cli.Command{
	Name: "rstream",
	Usage: "  rstream [-s SERVER] [-b ADDR] [-p PORT]  rstream's stream latency and bandwidth over rsocket (or\n" +
		"          [-S SIZE|all] [-C N] [-I N]      TCP: -T s), a server without -s; either end may be\n" +
		"          [-T s|v] [-json]                 rdma-core's rstream; rstream -h lists the flags\n",
	Help: rstreamHelp,
	Run:  rstreamCmd,
	JSON: rstreamRowJSON{},
}

const rstreamHelp = `Usage:
  purerdma rstream [-b bind_address] [-p port] [options]            server
  purerdma rstream -s server_address [-b bind_address] [options]    client

Options (as rdma-core's rstream; both sides need the same -S, -C, -I and -T v):
  -s server_address  connect to this server; without -s, serve
  -b bind_address    server: the address to listen on (default every IPv4 address);
                     client: the source address
  -f address_format  name (host names or numeric addresses, the default), ip or ipv6
                     (numeric addresses only, of either family, as C); gid (AF_IB) is
                     not supported
  -p port_number     port (default 7471)
  -S size|all        a custom test of size-byte transfers (1 to 1073741824); all: the
                     default run also takes the sizes between the powers of 4
  -C transfer_count  transfers per iteration: a custom test (default 1000)
  -I iterations      iterations: a custom test (default 1)
  -B buffer_size     SO_SNDBUF and SO_RCVBUF (default 524288; 0 the default); rsocket
                     buffers twice that, as C's rsetsockopt: send and receive buffers of
                     1 MiB by default; a send buffer below 2048 bytes is 4096, as in C
  -i inline_size     most bytes sent inline in the latency tests (default 64); the
                     bandwidth tests ask for none and the custom test for rsocket's
                     default; 0 asks for none (the device may still grant some: rxe
                     grants 32 on Linux 6.1)
  -k keepalive_time  accepted with a warning: keepalive is not supported
  -T test_option     may be repeated:
                       s|socket   plain TCP sockets (Go's net package) instead of rsocket;
                                  TCP_NODELAY, no other option (-B and -i do not apply)
                       v|verify   send a running byte count, check what arrives against one
                       n|nonblock the default, as in C: reads and writes poll the
                                  completion queue until they can go on (rsocket's
                                  BusyPoll), as rstream's non-blocking calls spin
                       b|block, a|async
                                  reads and writes that park in the runtime's poller
                                  after polling 10 µs, as C's blocking calls and rpoll
                       r|resolve  accepted, no effect: Go resolves names, the rdma_cm routes
                     f|fork is not supported
  -json              one JSON object per result row, one a line, and no header (also
                     --json): role, transport, name, bytes, xfers, iters, total_bytes,
                     seconds, gbit_per_sec, usec_per_xfer, verified

Without -S SIZE, -C or -I, the default run: latency tests (1 transfer per
iteration, 100000 to 100 iterations by size) of 64 B, 4 KiB, 64 KiB and
1 MiB (-S all: 33 sizes, 64 B to 6 MiB) on one connection, then bandwidth
tests (1 iteration, 100000 to 100 transfers) of the same sizes on a
second; the server accepts twice. With any of them, one test named
custom on one connection. Each test starts with a sync (16 bytes each
way); then per iteration the client sends xfers transfers of bytes and
the server sends as many back. Both sides print a row per test: total
counts both directions, usec/xfer is the time of an iteration over
2 x xfers.

Differences from rstream: a failed test ends the run with status 1; a bad
command line exits 2; numbers are decimal and checked; -f gid, unknown -f
formats and -T f are refused; -k does nothing but warn.

Examples:
  purerdma rstream -b 198.18.0.1
  purerdma rstream -s 198.18.0.1 -b 198.18.0.2
  purerdma rstream -s 198.18.0.1 -S 65536 -C 100 -I 10 -T v
  purerdma rstream -T s -b 127.0.0.1 -p 7472 -S all -json
`

// rstream's defaults and limits.
const (
	rsDefaultPort   = 7471
	rsDefaultSize   = 1000 // transfer_size of a custom test
	rsDefaultCount  = 1000 // transfer_count of a custom test
	rsDefaultBuffer = 1 << 19
	rsDefaultInline = 64
	rsSyncSize      = 16
	rsMaxSize       = 1 << 30
	// rsMaxBuffer keeps twice -B within rsocket.Config's receive
	// buffer, whose halves a 29-bit message length counts.
	rsMaxBuffer = 1<<29 - 1
)

// rsSizes is rstream's test_size table: the sizes of the default run; the
// ones marked all run only with -S all.
var rsSizes = []struct {
	size int
	all  bool
}{
	{1 << 6, false},
	{1 << 7, true}, {1<<7 + 1<<6, true},
	{1 << 8, true}, {1<<8 + 1<<7, true},
	{1 << 9, true}, {1<<9 + 1<<8, true},
	{1 << 10, true}, {1<<10 + 1<<9, true},
	{1 << 11, true}, {1<<11 + 1<<10, true},
	{1 << 12, false}, {1<<12 + 1<<11, true},
	{1 << 13, true}, {1<<13 + 1<<12, true},
	{1 << 14, true}, {1<<14 + 1<<13, true},
	{1 << 15, true}, {1<<15 + 1<<14, true},
	{1 << 16, false}, {1<<16 + 1<<15, true},
	{1 << 17, true}, {1<<17 + 1<<16, true},
	{1 << 18, true}, {1<<18 + 1<<17, true},
	{1 << 19, true}, {1<<19 + 1<<18, true},
	{1 << 20, false}, {1<<20 + 1<<19, true},
	{1 << 21, true}, {1<<21 + 1<<20, true},
	{1 << 22, true}, {1<<22 + 1<<21, true},
}

// rsOptions are the command line of one run.
type rsOptions struct {
	tool      string // rstream or riostream
	io        bool   // riostream: transfers by IOWrite into the peer's mapping
	dst       string // -s: the server to connect to; "" serves
	src       string // -b
	format    string // -f: "name", "ip" or "ipv6"
	port      int    // -p
	all       bool   // -S all
	custom    bool   // -S SIZE, -C or -I given
	size      int    // -S
	count     int    // -C
	iters     int    // -I
	buffer    int    // -B; 0 for rstream's 1<<19
	inline    int    // -i
	keepalive int    // -k
	tcp       bool   // -T s
	block     bool   // -T b or a: block instead of busy-polling
	verify    bool   // -T v
	json      bool   // -json
}

// parseRstreamArgs parses rstream's command line the way its getopt does
// ("s:b:f:B:i:I:C:S:p:k:T:", cli.Getopt: every argument a flag, every
// flag with a value) and purerdma's -json. Everything is checked here,
// before any kernel call.
func parseRstreamArgs(args []string) (rsOptions, error) { return parseStreamArgs("rstream", args) }

// parseStreamArgs parses the command line of tool, rstream or
// riostream (which has no -k and no -T s or r).
func parseStreamArgs(tool string, args []string) (rsOptions, error) {
	o := rsOptions{tool: tool, io: tool == "riostream", format: "name", port: rsDefaultPort, size: rsDefaultSize, count: rsDefaultCount, iters: 1,
		inline: rsDefaultInline}
	num := func(f byte, val string, lo, hi int) (int, error) {
		n, err := strconv.Atoi(val)
		if err != nil {
			return 0, cli.UsageError("%s: -%c %q: not a decimal number", o.tool, f, val)
		}
		if n < lo || n > hi {
			return 0, cli.UsageError("%s: -%c %d: out of range (%d to %d)", o.tool, f, n, lo, hi)
		}
		return n, nil
	}
	g := cli.Getopt{Cmd: tool, JSON: &o.json}
	for _, f := range []byte("sbfBiICSpkT") {
		if f != 'k' || !o.io {
			g.Opts = append(g.Opts, cli.Opt{Short: f, HasArg: true})
		}
	}
	seen := map[byte]bool{}
	_, err := g.Parse(args, func(opt cli.Opt, val string) (err error) {
		f := opt.Short
		seen[f] = true
		switch f {
		case 's':
			o.dst = val
		case 'b':
			o.src = val
		case 'f':
			err = o.setFormat(val)
		case 'p':
			o.port, err = num(f, val, 1, 65535)
		case 'S':
			if strings.EqualFold(val, "all") {
				o.all = true
				break
			}
			o.custom = true
			o.size, err = num(f, val, 1, rsMaxSize)
		case 'C':
			o.custom = true
			o.count, err = num(f, val, 1, math.MaxInt32)
		case 'I':
			o.custom = true
			o.iters, err = num(f, val, 1, math.MaxInt32)
		case 'B':
			o.buffer, err = num(f, val, 0, rsMaxBuffer)
		case 'i':
			o.inline, err = num(f, val, 0, 65535)
		case 'k':
			o.keepalive, err = num(f, val, 0, math.MaxInt32)
		case 'T':
			err = o.setTestOption(val)
		}
		return err
	})
	if err != nil {
		return o, err
	}
	switch {
	case seen['s'] && o.dst == "", seen['b'] && o.src == "":
		return o, cli.UsageError("%s: empty address", o.tool)
	case o.custom && int64(o.iters)*int64(o.count) > math.MaxInt64/(2*int64(o.size)):
		return o, cli.UsageError("%s: -S %d -C %d -I %d: more bytes than a 64-bit count holds", o.tool, o.size, o.count, o.iters)
	}
	if o.format != "name" {
		for _, s := range []struct{ flag, addr string }{{"-s", o.dst}, {"-b", o.src}} {
			if _, err := netip.ParseAddr(s.addr); s.addr != "" && err != nil {
				return o, cli.UsageError("%s: %s %q: not a numeric address (-f %s)", o.tool, s.flag, s.addr, o.format)
			}
		}
	}
	return o, nil
}

// setFormat takes -f's value.
func (o *rsOptions) setFormat(v string) error {
	switch f := strings.ToLower(v); f {
	case "name", "ip", "ipv6":
		o.format = f
		return nil
	case "gid":
		return cli.UsageError("%s: -f gid: InfiniBand (AF_IB) addresses are not supported; give an IP address or a host name", o.tool)
	}
	return cli.UsageError("%s: -f %q: unknown address format (name, ip or ipv6)", o.tool, v)
}

// setTestOption takes one -T value: one letter, or a word that the
// value starts with (rstream compares that many characters, ignoring
// case: "sockets" is socket, "blocking" block).
func (o *rsOptions) setTestOption(v string) error {
	opt := v
	if len(v) > 1 {
		opt = ""
		for _, w := range []string{"socket", "async", "block", "nonblock", "resolve", "verify", "fork"} {
			if len(v) >= len(w) && strings.EqualFold(v[:len(w)], w) {
				opt = w[:1]
				break
			}
		}
	}
	if o.io && (opt == "s" || opt == "r" || opt == "f") {
		return cli.UsageError("%s: -T %q: unknown test option (a, b, n, v)", o.tool, v)
	}
	switch opt {
	case "s":
		o.tcp = true
	case "v":
		o.verify = true
	case "a", "b":
		o.block = true
	case "n":
		o.block = false
	case "r": // see the help
	case "f":
		return cli.UsageError("%s: -T %s: fork is not supported (a Go program cannot fork)", o.tool, v)
	default:
		return cli.UsageError("%s: -T %q: unknown test option (s, a, b, n, r, v)", o.tool, v)
	}
	return nil
}

// rsTest is one test: a row of the output.
type rsTest struct {
	name               string
	size, count, iters int
}

// rsPhase is the tests of one connection, and the inline size asked for
// it (0: rsocket's default).
type rsPhase struct {
	inline int
	tests  []rsTest
}

// rsInline maps an rstream inline size to rsocket.Config's, where 0 is
// the default and a negative value none.
func rsInline(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// rstreamPlan is the run's connections and their tests, in order.
func rstreamPlan(o *rsOptions) []rsPhase {
	if o.custom {
		return []rsPhase{{inline: 0, tests: []rsTest{{"custom", o.size, o.count, o.iters}}}}
	}
	lat := rsPhase{inline: rsInline(o.inline)}
	bw := rsPhase{inline: rsInline(0)}
	for _, s := range rsSizes {
		if s.all && !o.all {
			continue
		}
		// init_latency_test and init_bandwidth_test: the size in a
		// char[5], the name in a char[10].
		sz := truncate(SizeStr(int64(s.size)), 4)
		lat.tests = append(lat.tests, rsTest{truncate(sz+"_lat", 9), s.size, 1, sizeToCount(s.size)})
		bw.tests = append(bw.tests, rsTest{truncate(sz+"_bw", 9), s.size, sizeToCount(s.size), 1})
	}
	return []rsPhase{lat, bw}
}

func truncate(s string, n int) string { return s[:min(len(s), n)] }

// SizeStr is common.c's size_str: bytes with a k, m or g suffix for
// binary multiples and one decimal below 10 of them.
func SizeStr(size int64) string {
	base, mag := int64(1), ""
	switch {
	case size >= 1<<30:
		base, mag = 1<<30, "g"
	case size >= 1<<20:
		base, mag = 1<<20, "m"
	case size >= 1<<10:
		base, mag = 1<<10, "k"
	}
	var frac int64
	if size/base < 10 {
		frac = (size % base) * 10 / base
	}
	if frac != 0 {
		return fmt.Sprintf("%d.%d%s", size/base, frac, mag)
	}
	return fmt.Sprintf("%d%s", size/base, mag)
}

// CntStr is common.c's cnt_str: a count in decimal thousands (k),
// millions (m) or billions (b), rounded down.
func CntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// sizeToCount is common.c's size_to_count: the iterations of a latency
// test, the transfers of a bandwidth test.
func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// rsVerifier is common.c's format_buf and verify_buf with their static
// counters: one for what this process sends, one for what it receives.
type rsVerifier struct {
	next    byte  // format_buf's data
	want    byte  // verify_buf's data
	checked int64 // verify_buf's total_bytes
}

// fill writes the send counter's next len(b) bytes into b.
func (v *rsVerifier) fill(b []byte) {
	for i := range b {
		b[i] = v.next
		v.next++
	}
}

// errVerify marks a verification failure (its text is empty: the
// message stays C's). It is the run's own verdict, reported as it is
// even when the run was interrupted meanwhile (the peer, seeing the
// connection close, may end first and the test harness then cancels).
var errVerify = verifyError{}

type verifyError struct{}

func (verifyError) Error() string { return "" }

// check compares b with the receive counter's next bytes. As C, the
// counter has moved past the byte that failed.
func (v *rsVerifier) check(b []byte) error {
	for _, c := range b {
		w := v.want
		v.want++
		if c != w {
			return fmt.Errorf("data verification failed byte %d%w", v.checked, errVerify)
		}
		v.checked++
	}
	return nil
}

// rsListener is what the server needs of a listener: rsocket's or TCP's.
type rsListener interface {
	accept(ctx context.Context) (net.Conn, error)
	Close() error
}

type rsRDMAListener struct{ l *rsocket.Listener }

func (l rsRDMAListener) accept(ctx context.Context) (net.Conn, error) {
	c, err := l.l.AcceptContext(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (l rsRDMAListener) Close() error { return l.l.Close() }

type rsTCPListener struct{ l *net.TCPListener }

func (l rsTCPListener) accept(ctx context.Context) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { l.l.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := l.l.Accept()
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return c, err
}

func (l rsTCPListener) Close() error { return l.l.Close() }

// rstreamRun is one invocation.
type rstreamRun struct {
	o      *rsOptions
	stdout io.Writer
	buf    []byte
	v      rsVerifier
}

func rstreamCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return Stream(ctx, "rstream", args, stdout, stderr)
}

// Stream runs the command line args of tool, rstream or riostream (the
// latter's transfers are rsocket IOWrites into the peer's mapped buffer),
// as that command's Run.
func Stream(ctx context.Context, tool string, args []string, stdout, stderr io.Writer) error {
	o, err := parseStreamArgs(tool, args)
	if err != nil {
		return err
	}
	if o.keepalive > 0 {
		fmt.Fprintf(stderr, "purerdma: rstream: warning: -k %d ignored: keepalive is not supported\n", o.keepalive)
	}
	if !o.tcp {
		// Without a device a server would wait for ever for a client
		// it could not serve.
		if err := devs.CheckCM(); err != nil {
			return fmt.Errorf("%s: %w", o.tool, err)
		}
	}
	phases := rstreamPlan(&o)
	size := rsSyncSize
	for _, p := range phases {
		for _, t := range p.tests {
			size = max(size, t.size)
		}
	}
	r := &rstreamRun{o: &o, stdout: stdout}
	if o.io {
		// riostream's buffer is mapped for the peer's writes, and its
		// last byte read with atomic loads: page-aligned memory.
		b, err := uverbs.AllocBuffer(size + 4)
		if err != nil {
			return fmt.Errorf("%s: %w", o.tool, err)
		}
		defer b.Close()
		r.buf = b.Bytes()[:size]
	} else {
		r.buf = make([]byte, size)
	}
	if o.dst != "" {
		err = r.client(ctx, phases)
	} else {
		err = r.server(ctx, phases)
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, errVerify) {
		return fmt.Errorf("%s: interrupted: %w", o.tool, context.Cause(ctx))
	}
	return err
}

// config is the rsocket configuration of a connection: rstream's
// set_options.
func (r *rstreamRun) config(p rsPhase) rsocket.Config {
	b := r.o.buffer
	if b == 0 {
		b = rsDefaultBuffer
	}
	// rsetsockopt keeps twice SO_SNDBUF and SO_RCVBUF, and makes a send
	// buffer below RS_SNDLOWAT (2048) twice that.
	snd := 2 * b
	if snd < 2048 {
		snd = 4096
	}
	cfg := rsocket.Config{SendBuffer: snd, RecvBuffer: 2 * b, Inline: p.inline, BusyPoll: !r.o.block}
	if r.o.io {
		cfg.IOMapSize = 1 // riostream's RDMA_IOMAPSIZE
	}
	return cfg
}

func (r *rstreamRun) transport() string {
	if r.o.tcp {
		return "tcp"
	}
	return "rsocket"
}

func (r *rstreamRun) listen(ctx context.Context, p rsPhase) (rsListener, error) {
	addr := net.JoinHostPort(r.o.src, strconv.Itoa(r.o.port))
	if r.o.tcp {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.o.tool, err)
		}
		return rsTCPListener{l.(*net.TCPListener)}, nil
	}
	lc := rsocket.ListenConfig{Config: r.config(p)}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		if a, perr := netip.ParseAddr(r.o.src); perr == nil {
			err = devs.BindError(netip.AddrPortFrom(a.Unmap(), uint16(r.o.port)), err)
		}
		return nil, fmt.Errorf("%s: %w", r.o.tool, err)
	}
	return rsRDMAListener{l}, nil
}

func (r *rstreamRun) dial(ctx context.Context, p rsPhase) (net.Conn, error) {
	addr := net.JoinHostPort(r.o.dst, strconv.Itoa(r.o.port))
	var local net.IP
	if r.o.src != "" {
		a, err := netip.ParseAddr(r.o.src)
		if err != nil {
			as, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", r.o.src)
			if lerr != nil {
				return nil, fmt.Errorf("%s: -b %s: %w", r.o.tool, r.o.src, lerr)
			}
			a = as[0]
		}
		local = a.Unmap().AsSlice()
	}
	var c net.Conn
	var err error
	if r.o.tcp {
		d := net.Dialer{}
		if local != nil {
			d.LocalAddr = &net.TCPAddr{IP: local}
		}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		d := rsocket.Dialer{Config: r.config(p)}
		if local != nil {
			d.LocalAddr = &net.TCPAddr{IP: local}
		}
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.o.tool, err)
	}
	return c, nil
}

// header is rstream's first line.
func (r *rstreamRun) header() {
	if !r.o.json {
		fmt.Fprintf(r.stdout, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n",
			"name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
	}
}

func (r *rstreamRun) client(ctx context.Context, phases []rsPhase) error {
	r.header()
	for _, p := range phases {
		c, err := r.dial(ctx, p)
		if err != nil {
			return err
		}
		if err := r.serve(ctx, c, p); err != nil {
			return err
		}
	}
	return nil
}

func (r *rstreamRun) server(ctx context.Context, phases []rsPhase) (err error) {
	l, err := r.listen(ctx, phases[0])
	if err != nil {
		return err
	}
	defer func() {
		if l != nil {
			cli.CloseErr(&err, l.Close)
		}
	}()
	r.header()
	for i, p := range phases {
		c, err := l.accept(ctx)
		if err != nil {
			return fmt.Errorf("%s: accept: %w", r.o.tool, err)
		}
		// The next connection's settings, where they differ, take a
		// listener of their own; it listens before this connection's
		// tests start, so before the client can connect again.
		if i+1 < len(phases) && !r.o.tcp && phases[i+1].inline != p.inline {
			old := l
			l = nil
			err := old.Close()
			if err == nil {
				l, err = r.listen(ctx, phases[i+1])
			}
			if err != nil {
				c.Close()
				return err
			}
		}
		if err := r.serve(ctx, c, p); err != nil {
			return err
		}
	}
	return nil
}

// serve runs a connection's tests and closes it.
func (r *rstreamRun) serve(ctx context.Context, c net.Conn, p rsPhase) (err error) {
	defer func() {
		if cerr := c.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: close: %w", r.o.tool, cerr)
		}
	}()
	// An interrupt ends a blocked read or write at once.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	for _, t := range p.tests {
		run := r.runTest
		if r.o.io {
			run = func(c net.Conn, t rsTest) error { return r.runIOTest(ctx, c.(*rsocket.Conn), t) }
		}
		if err := run(c, t); err != nil {
			return fmt.Errorf("%s: %s: %w", r.o.tool, t.name, err)
		}
	}
	return nil
}

// runTest is rstream's run_test: the sync, the timed transfers, the row.
func (r *rstreamRun) runTest(c net.Conn, t rsTest) error {
	client := r.o.dst != ""
	// The client sends first, the server receives first.
	first, second := r.send, r.recv
	if !client {
		first, second = r.recv, r.send
	}
	if err := first(c, rsSyncSize); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := second(c, rsSyncSize); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	start := time.Now()
	for range t.iters {
		for range t.count {
			if err := first(c, t.size); err != nil {
				return err
			}
		}
		for range t.count {
			if err := second(c, t.size); err != nil {
				return err
			}
		}
	}
	return r.printRow(t, time.Since(start))
}

func (r *rstreamRun) send(c net.Conn, n int) error {
	b := r.buf[:n]
	if r.o.verify {
		r.v.fill(b)
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("send %d bytes: %w", n, err)
	}
	return nil
}

func (r *rstreamRun) recv(c net.Conn, n int) error {
	b := r.buf[:n]
	if got, err := io.ReadFull(c, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("receive %d bytes: the peer closed the connection after %d", n, got)
		}
		return fmt.Errorf("receive %d bytes: %w", n, err)
	}
	if r.o.verify {
		return r.v.check(b)
	}
	return nil
}

// rstreamRowJSON is one row of "rstream -json". Its times are the
// measured duration's, not rounded to microseconds and a float as the
// text's are.
type rstreamRowJSON struct {
	Role        string  `json:"role"`      // server or client
	Transport   string  `json:"transport"` // rsocket or tcp
	Name        string  `json:"name"`      // as the text: 64_lat, 1m_bw, custom
	Bytes       int     `json:"bytes"`     // of a transfer
	Xfers       int     `json:"xfers"`     // transfers per iteration, each way
	Iters       int     `json:"iters"`
	TotalBytes  int64   `json:"total_bytes"` // both ways, the syncs not counted
	Seconds     float64 `json:"seconds"`     // from after the sync to the last transfer
	GbitPerSec  float64 `json:"gbit_per_sec"`
	USecPerXfer float64 `json:"usec_per_xfer"` // an iteration's time over 2 x xfers
	Verified    bool    `json:"verified"`      // -T v: every byte received was checked
}

// printRow is rstream's show_perf, or the row as JSON.
func (r *rstreamRun) printRow(t rsTest, d time.Duration) error {
	total := int64(t.iters) * int64(t.count) * int64(t.size) * 2
	if r.o.json {
		role := "server"
		if r.o.dst != "" {
			role = "client"
		}
		us := float64(d.Nanoseconds()) / 1e3
		row := rstreamRowJSON{Role: role, Transport: r.transport(), Name: t.name, Bytes: t.size, Xfers: t.count,
			Iters: t.iters, TotalBytes: total, Seconds: d.Seconds(), Verified: r.o.verify,
			USecPerXfer: us / float64(t.iters) / float64(2*t.count)}
		if us > 0 {
			row.GbitPerSec = float64(total) * 8 / (1e3 * us)
		}
		return json.NewEncoder(r.stdout).Encode(row)
	}
	_, err := io.WriteString(r.stdout, rstreamRowText(t, d))
	return err
}

// rstreamRowText formats a row as show_perf does, with its arithmetic: a
// float count of whole microseconds.
func rstreamRowText(t rsTest, d time.Duration) string {
	total := int64(t.iters) * int64(t.count) * int64(t.size) * 2
	usec := float32(d.Microseconds())
	secs := float64(usec) / 1e6
	gbps := float64(total*8) / (1000 * float64(usec))
	per := float64(usec / float32(t.iters) / float32(t.count*2))
	return fmt.Sprintf("%-10s%-8s%-8s%-8s%-8s%8ss%10s%11s\n", t.name, SizeStr(int64(t.size)), CntStr(int64(t.count)),
		CntStr(int64(t.iters)), SizeStr(total), cli.CFloat(secs), cli.CFloat(gbps), cli.CFloat(per))
}
