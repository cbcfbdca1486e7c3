// Package selftest is purerdma's selftest command and the verbs
// conformance suite it runs: every fast-path operation of the verbs
// through a device's provider against the device itself. Queue pairs of
// one process connect to each other over the device's own port
// (loopback; on iWARP through the rdma_cm, from the port's address to
// itself), each check verifying the data that moved and the fields of
// every completion; the command prints a pass/fail table. It is the
// hardware check of a provider: on soft-RoCE it runs in the test VM, on
// a ConnectX it is what a user runs to see whether the mlx5 provider
// works there.
//
// Tests drive the suite without the command line: Open opens a device
// as Options describe, Env.Run runs Checks (or checks of their own) and
// returns the Report the command prints. The checks are in checks.go,
// what they share (objects closed when a check ends, connecting, polling
// with a bound) in run.go.
package selftest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// Command is purerdma's selftest.
var Command = cli.Command{
	Name: "selftest",
	Usage: "  selftest [-d DEV] [-i PORT] [-g GIDIDX] [-iters N] [-json]\n" +
		"                                           check every fast-path operation of a device against itself\n",
	Help: helpText,
	JSON: Report{},
	Run:  runCommand,
}

// DefaultIters is the default of -iters: messages of the ring-wrap
// check, past 65536 so that 16-bit WQE counters wrap at least once.
const DefaultIters = 70000

// maxIters bounds -iters.
const maxIters = 1 << 26

var helpText = fmt.Sprintf(`Queue pairs of one process, on one device and port, send to each other
through the device (loopback) and check each operation of the fast path:
the data that arrived and every field of every completion. On InfiniBand
and RoCE the QPs are connected by moving them to RTS; on iWARP through
the rdma_cm, from the address of the port's network interface to itself.
Checks the device cannot do (atomics on a device without them, inline
data on a QP without room for it; on iWARP UC, UD, immediate data,
atomics, the error completion and the full send queue) show "n/a" and
the reason; n/a is not a pass.

Flags:
  -d DEV        device (default: the first)
  -i PORT       device port (default 1)
  -g GIDIDX     GID index (default: the port's RoCE v2 GID of an IPv4 address,
                else its first RoCE v2 GID, else index 0; on an InfiniBand port,
                LID routing without a GRH)
  -iters N      messages of the ring-wrap check (default %d: more than 65536, so
                the 16-bit queue counters wrap; a few seconds on soft-RoCE)
  -json         print {"device", "driver", "provider", "kernel", "port", "gid_index",
                "gid", "gid_type", "link_layer", "connect", "rows": [{"name", "result"
                (pass, fail or n/a), "detail" (for n/a the reason), "usec"}],
                "passed", "failed", "not_applicable"} (gid_index -1: LID routing)

Exit status 0 only if every check that applies passed.

Examples:
  purerdma selftest
  purerdma selftest -d mlx5_0 -i 1 -g 3
  purerdma selftest -d rxe0 -iters 200000 -json
  purerdma selftest -d siw0
`, DefaultIters)

// Options say which device, port and GID the checks run on, as
// selftest's flags do.
type Options struct {
	Dev      string // -d: "" for the first device
	Port     int    // -i: 1 to 255
	GIDIndex int    // -g: 0 to 255, or -1 for the default (Env.pickGID)
	Iters    int    // -iters: messages of the ring-wrap check, 1 to 1<<26
}

// check rejects options out of range, before any device is touched.
func (o Options) check() error {
	switch {
	case o.Port < 1 || o.Port > 255:
		return fmt.Errorf("-i %d: the port is 1 to 255", o.Port)
	case o.GIDIndex < -1 || o.GIDIndex > 255:
		return fmt.Errorf("-g %d: the GID index is 0 to 255", o.GIDIndex)
	case o.Iters < 1 || o.Iters > maxIters:
		return fmt.Errorf("-iters %d: 1 to %d", o.Iters, maxIters)
	}
	return nil
}

// cmdline is a parsed selftest command line.
type cmdline struct {
	Options
	json bool // -json
}

func parseArgs(args []string) (cmdline, error) {
	o := cmdline{Options: Options{Port: 1, GIDIndex: -1, Iters: DefaultIters}}
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Dev, "d", "", "device")
	fs.IntVar(&o.Port, "i", 1, "port")
	fs.IntVar(&o.GIDIndex, "g", -1, "GID index")
	fs.IntVar(&o.Iters, "iters", DefaultIters, "ring-wrap messages")
	fs.BoolVar(&o.json, "json", false, "JSON output")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return o, cli.ErrHelp
	} else if err != nil {
		return o, cli.UsageError("selftest: %v", err)
	}
	if fs.NArg() > 0 {
		return o, cli.UsageError("selftest takes no arguments but flags, not %q", fs.Args())
	}
	if err := o.check(); err != nil {
		return o, cli.UsageError("selftest: %v", err)
	}
	return o, nil
}

func runCommand(ctx context.Context, args []string, stdout, _ io.Writer) error {
	o, err := parseArgs(args)
	if err != nil {
		return err
	}
	env, err := Open(o.Options)
	if err != nil {
		return fmt.Errorf("selftest: %w", err)
	}
	rep := env.Run(ctx, Checks)
	if err := env.Close(); err != nil {
		rep.add(Row{Name: "close the device", Result: Fail, Detail: err.Error()})
	}
	return output(ctx, rep, o.json, stdout)
}

// output prints the report and returns the command's error: nil
// only if every row that applies passed (n/a counts as no pass) and no
// interrupt cut the run short.
func output(ctx context.Context, rep *Report, jsonOut bool, stdout io.Writer) error {
	if jsonOut {
		if err := cli.WriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		rep.writeText(stdout)
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("selftest: %s: stopped after %d checks: %w", rep.Device, len(rep.Rows), ctx.Err())
	case rep.Failed > 0:
		why := ""
		if rep.memlock > 0 {
			why = fmt.Sprintf(" (%d of them for the locked-memory limit, RLIMIT_MEMLOCK: their details say the limit and how to raise it)", rep.memlock)
		}
		return fmt.Errorf("selftest: %s: %d of %d checks failed%s", rep.Device, rep.Failed, rep.Passed+rep.Failed, why)
	case rep.Passed == 0:
		return fmt.Errorf("selftest: %s: no check applies", rep.Device)
	}
	return nil
}

// Env is the device under test and what the checks share about
// it; each check makes its own objects on ctx. Open makes one, Close
// closes the device.
type Env struct {
	ctx      *uverbs.Context
	attr     uverbs.DeviceAttr
	port     int
	portAttr uverbs.PortAttr
	gidIndex int // -1: LID routing, no GRH
	gid      uverbs.GID
	gidType  string
	iters    int
	// rdAtomic is the reads and atomics a QP has outstanding, as
	// initiator and as responder.
	rdAtomic, destRdAtomic uint8
	// iwarp: the QPs connect through the rdma_cm on cmAddr, the
	// device's address (cmConnect), and the checks iWARP cannot do are
	// n/a.
	iwarp  bool
	cmAddr netip.Addr
	report Report // the header; Run adds the rows
}

// Open opens the device and finds its port and GID.
func Open(o Options) (_ *Env, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dev, err := devs.Find(o.Dev)
	if err != nil {
		return nil, err
	}
	var cmAddr netip.Addr
	if dev.Transport == uverbs.TransportIWARP {
		// An iWARP QP reaches RTS only through the rdma_cm, which
		// needs the device's IP address.
		if cmAddr, err = iwarpAddr(dev, o.Port); err != nil {
			return nil, err
		}
	}
	c, err := dev.Open(nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	e := &Env{ctx: c, port: o.Port, gidIndex: o.GIDIndex, iters: o.Iters, iwarp: cmAddr.IsValid(), cmAddr: cmAddr}
	if e.attr, err = c.QueryDevice(); err != nil {
		return nil, err
	}
	if o.Port > e.attr.PhysPortCnt {
		return nil, fmt.Errorf("%s has %d port(s), no port %d", dev.Name, e.attr.PhysPortCnt, o.Port)
	}
	if e.portAttr, err = c.QueryPort(o.Port); err != nil {
		return nil, err
	}
	if e.portAttr.State != uverbs.PortActive {
		return nil, fmt.Errorf("%s port %d is %v, not ACTIVE", dev.Name, o.Port, e.portAttr.State)
	}
	if err := e.pickGID(o.GIDIndex); err != nil {
		return nil, err
	}
	e.rdAtomic = uint8(min(max(e.attr.MaxQPInitRdAtom, 1), 16))
	e.destRdAtomic = uint8(min(max(e.attr.MaxQPRdAtom, 1), 16))
	e.report = Report{
		Device: dev.Name, Driver: dev.DriverName, Provider: providerName(c, dev),
		Kernel: kernelRelease(), Port: o.Port, GIDIndex: e.gidIndex, LinkLayer: e.portAttr.LinkLayer.String(),
		Connect: "QP modify (INIT, RTR, RTS) to the port's own address", Rows: []Row{},
	}
	if e.iwarp {
		e.report.Connect = fmt.Sprintf("rdma_cm, %v to itself", cmAddr)
	}
	if e.gidIndex >= 0 {
		e.report.GID, e.report.GIDType = e.gid.String(), e.gidType
		if ip := e.gid.IP(); ip.To4() != nil {
			e.report.GID = "::ffff:" + ip.String()
		}
	}
	return e, nil
}

// Close closes the device.
func (e *Env) Close() error { return e.ctx.Close() }

// iwarpAddr is the address an iWARP device's QPs connect on: the
// first IPv4 address of the network interface under the port, else its
// first IPv6 one. The interface is the one sysfs names for the port's
// GIDs, else (iWARP ports have no such entry) the one RDMA netlink
// reports for the port, as "rdma link" shows it.
func iwarpAddr(dev uverbs.Device, port int) (netip.Addr, error) {
	netdev := ""
	for _, p := range dev.Ports {
		if p.Num == port {
			netdev = p.Netdev
		}
	}
	if netdev == "" {
		err := devs.WithNetlink(func(c devs.Netlink) error {
			links, err := c.Links()
			for _, l := range links {
				if l.Device == dev.Name && int(l.Port) == port {
					netdev = l.Netdev
				}
			}
			return err
		})
		if err != nil && netdev == "" {
			return netip.Addr{}, fmt.Errorf("%s port %d: its network interface: %w", dev.Name, port, err)
		}
	}
	if netdev == "" {
		return netip.Addr{}, fmt.Errorf("%s port %d has no network interface: an iWARP QP connects through the rdma_cm, which needs one with an IP address", dev.Name, port)
	}
	addrs := devs.NetdevAddrs(netdev)
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			return a.Unmap(), nil
		}
	}
	if len(addrs) > 0 {
		return addrs[0], nil
	}
	return netip.Addr{}, fmt.Errorf("%s port %d: its network interface %s has no IP address: an iWARP QP connects through the rdma_cm, which needs one", dev.Name, port, netdev)
}

// pickGID sets the GID the QPs use: index, or by default the port's
// RoCE v2 GID that uverbs.Context.RoCEv2GID picks (one of an IPv4
// address first), else index 0; an InfiniBand port without -g routes
// by LID.
func (e *Env) pickGID(index int) error {
	name := e.ctx.Device().Name
	if index < 0 && e.portAttr.LinkLayer == uverbs.LinkLayerInfiniBand {
		e.gidIndex = -1
		if e.portAttr.LID == 0 {
			return fmt.Errorf("%s port %d has no LID (is a subnet manager running?); give a GID index with -g", name, e.port)
		}
		return nil
	}
	if index < 0 {
		index = 0
		if g, err := e.ctx.RoCEv2GID(e.port, ""); err == nil {
			index = g.Index
		}
	}
	ent, err := e.ctx.QueryGIDEntry(e.port, index)
	if err != nil {
		g, gerr := e.ctx.QueryGID(e.port, index)
		if gerr != nil {
			return fmt.Errorf("%s port %d GID index %d: %w", name, e.port, index, gerr)
		}
		ent = uverbs.GIDEntry{GID: g, Index: index, Port: e.port}
		e.gidType = "type unknown"
	} else {
		e.gidType = ent.Type.String()
	}
	e.gidIndex, e.gid = index, ent.GID
	return nil
}

// kernelRelease is uname -r.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// providerName names the purerdma provider that drives the device's
// queues, or "none" when its driver has none.
func providerName(c *uverbs.Context, dev uverbs.Device) string {
	if p := c.Provider(); p != "" {
		return p + " (purerdma, in Go)"
	}
	return "none: driver " + dev.DriverName + " has no purerdma provider, queues are not supported"
}

// Report is what selftest prints: the header and the rows; its
// JSON is -json's document.
type Report struct {
	Device        string `json:"device"`
	Driver        string `json:"driver"`
	Provider      string `json:"provider"`
	Kernel        string `json:"kernel"`
	Port          int    `json:"port"`
	GIDIndex      int    `json:"gid_index"` // -1: LID routing
	GID           string `json:"gid"`
	GIDType       string `json:"gid_type"` // IB, RoCE v1, RoCE v2; "" for LID routing
	LinkLayer     string `json:"link_layer"`
	Connect       string `json:"connect"` // how the QPs were connected
	Rows          []Row  `json:"rows"`
	Passed        int    `json:"passed"`
	Failed        int    `json:"failed"`
	NotApplicable int    `json:"not_applicable"`
	// memlock counts the failed rows whose memory registration the
	// kernel refused for the locked-memory limit.
	memlock int
}

// Row is one check's outcome.
type Row struct {
	Name   string `json:"name"`
	Result string `json:"result"` // pass, fail or n/a
	Detail string `json:"detail"`
	USec   int64  `json:"usec"`
}

// Results of a row.
const (
	Pass = "pass"
	Fail = "fail"
	NA   = "n/a"
)

// add appends a row and counts it.
func (r *Report) add(row Row) {
	r.Rows = append(r.Rows, row)
	switch row.Result {
	case Pass:
		r.Passed++
	case NA:
		r.NotApplicable++
	default:
		r.Failed++
	}
}

// writeText prints the header and the table.
func (r *Report) writeText(w io.Writer) {
	gid := "none: LID routing"
	if r.GIDIndex >= 0 {
		gid = fmt.Sprintf("%d %s (%s)", r.GIDIndex, r.GID, r.GIDType)
	}
	fmt.Fprintf(w, "device      %s\n", r.Device)
	fmt.Fprintf(w, "driver      %s\n", r.Driver)
	fmt.Fprintf(w, "provider    %s\n", r.Provider)
	fmt.Fprintf(w, "kernel      %s\n", r.Kernel)
	fmt.Fprintf(w, "port        %d\n", r.Port)
	fmt.Fprintf(w, "gid         %s\n", gid)
	fmt.Fprintf(w, "link layer  %s\n", r.LinkLayer)
	fmt.Fprintf(w, "connect     %s\n\n", r.Connect)
	width := len("check")
	for _, row := range r.Rows {
		width = max(width, len(row.Name))
	}
	fmt.Fprintf(w, "%-*s  %-6s  %10s  %s\n", width, "check", "result", "usec", "detail")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-*s  %-6s  %10d  %s\n", width, row.Name, row.Result, row.USec, row.Detail)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d n/a\n", r.Passed, r.Failed, r.NotApplicable)
}

// Check is one row: Run returns nil and a detail when the operation did
// what it must, an error saying what went wrong otherwise, or one of
// stNA's for a check the device cannot do.
type Check struct {
	Name string
	Run  func(r *Case) (detail string, err error)
}

// notApplicable is a check that does not apply to the device.
type notApplicable struct{ reason string }

func (n notApplicable) Error() string { return n.reason }

func stNA(format string, args ...any) error { return notApplicable{fmt.Sprintf(format, args...)} }

// Run runs the checks in order, each with its own objects, and returns
// the report. An interrupt (ctx) stops it after the row that ran.
func (e *Env) Run(ctx context.Context, checks []Check) *Report {
	rep := e.report
	for _, c := range checks {
		if ctx.Err() != nil {
			break
		}
		row, memlock := e.runOne(ctx, c)
		rep.add(row)
		if memlock {
			rep.memlock++
		}
	}
	return &rep
}

func (e *Env) runOne(ctx context.Context, c Check) (row Row, memlock bool) {
	r := &Case{ctx: ctx, env: e, name: c.Name}
	start := time.Now()
	detail, err := func() (detail string, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return c.Run(r)
	}()
	if cerr := r.close(); cerr != nil && (err == nil || errors.As(err, new(notApplicable))) {
		err = fmt.Errorf("closing the check's objects: %w", cerr)
	}
	row = Row{Name: c.Name, USec: time.Since(start).Microseconds()}
	var n notApplicable
	switch {
	case err == nil:
		row.Result, row.Detail = Pass, detail
	case errors.As(err, &n):
		row.Result, row.Detail = NA, n.reason
	default:
		row.Result, row.Detail = Fail, err.Error()
		var me *sys.MemlockError
		memlock = errors.As(err, &me) && me.LimitReached()
	}
	return row, memlock
}
