// Command purerdma inspects and manages RDMA devices and measures them,
// without libibverbs, librdmacm or iproute2:
//
//	purerdma devices [-json]                         list devices, like ibv_devices
//	purerdma devinfo [-d DEV] [-i PORT] [-v] [-l] [-json]
//	                                                 device and port attributes, like ibv_devinfo
//	purerdma link [show|list] [-json] [DEV[/PORT]]   list ports, like rdma link
//	purerdma link add NAME type TYPE netdev NETDEV   add a software device (rxe, siw)
//	purerdma link del NAME                           remove a software device
//	purerdma res [show] [-json] [DEV]                count each device's RDMA objects, like rdma resource show
//	purerdma res [show] [-json] OBJECT [DEV[/PORT]]  list qp, cq, mr, pd, cm_id or ctx objects
//	purerdma stat [show] [-json] [DEV[/PORT]]        hardware counters of ports, like rdma statistic show
//	purerdma pingpong rc|uc|ud|srq [flags] [HOST]    ibv_{rc,uc,ud,srq}_pingpong
//	purerdma ping -s|-c [flags] [-json]              rping
//	purerdma bench TEST [flags] [SERVER]             perftest-like latency and bandwidth
//	purerdma bench connect (-b ADDR | -s SERVER)     cmtime-like connection set-up times
//	purerdma rstream [-s SERVER] [-b ADDR] [-S SIZE|all] [-C N] [-I N] [-T s|v] [-json]
//	                                                 rstream: stream latency and bandwidth over rsocket (or TCP)
//	purerdma riostream [-s SERVER] [-b ADDR] [-S SIZE|all] [-C N] [-I N] [-T v] [-json]
//	                                                 riostream: the same with rsocket's iomap (IOWrite)
//	purerdma rcopy [-p PORT] [-n N]                  rcopy's server: receives files over rsocket
//	purerdma rcopy SRC SERVER[:DST] [-p PORT]        rcopy: copies a file to that server
//	purerdma selftest [-d DEV] [-i PORT] [-g GIDIDX] [-iters N] [-json]
//	                                                 every fast-path operation of a device against itself
//	purerdma help [COMMAND]                          this list, or one command's help
//
// Every command takes -h (or --help), which prints its usage, flags and
// example command lines to stdout and exits with status 0.
//
// # JSON output
//
// The listings (devices, devinfo, link show, res, stat), the measurements
// (pingpong, ping, bench, rstream, riostream) and selftest take -json:
// stdout then holds one JSON document per invocation (rstream and
// riostream: one per row) instead of the text, with snake_case field
// names that stay stable:
//
//   - devices: {"devices": [{"name", "node_guid", "sys_image_guid",
//     "node_type", "transport", "node_desc", "fw_ver", "driver",
//     "uverbs_device", "dev_path", "ports": [{"port", "state",
//     "physical_state", "link_layer", "netdev"}]}]}
//   - link show: {"links": [{"device", "port", "state",
//     "physical_state", "netdev"}]}
//   - devinfo: {"devices": [{"hca_id", "transport", "fw_ver",
//     "node_guid", "sys_image_guid", "vendor_id", "vendor_part_id",
//     "hw_ver", "board_id", "phys_port_cnt", "ports": [{"port", "state",
//     "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc",
//     "link_layer"}]}]}; with -l {"devices": [{"hca_id"}]}
//   - pingpong: {"test", "role", "size", "iters", "bytes", "seconds",
//     "mbit_per_sec", "usec_per_iter", "invalid_pages"} (the bytes both
//     ways, as the text's; invalid_pages counts the server's -c failures)
//   - ping (one connection, so not with -P): {"role", "server", "size",
//     "pings", "validated", "seconds", "usec_per_ping"}, printed when the
//     connection ends well (the server: when the client disconnects)
//   - bench and bench connect: the fields docs/performance.md lists.
//   - rstream, riostream: one JSON object per result row, each on a line of its
//     own (no header): {"role", "transport", "name", "bytes", "xfers",
//     "iters", "total_bytes", "seconds", "gbit_per_sec",
//     "usec_per_xfer", "verified"}
//   - res and stat: what iproute2's "rdma -j resource show" and "rdma -j
//     statistic show" print, with the same keys and values: one array of
//     objects, the keys of each only those the kernel sent (rdma's own
//     output shape, not an object around a list).
//   - selftest: {"device", "driver", "provider", "kernel", "port",
//     "gid_index", "gid", "gid_type", "link_layer", "rows": [{"name", "result",
//     "detail", "usec"}], "passed", "failed", "not_applicable"}; result
//     is pass, fail or n/a, gid_index -1 means LID routing
//
// # Exit status
//
//	0  success; also -h and help
//	1  the operation failed: a kernel error, no RDMA device or no such
//	   device, a peer that failed or went away, an interrupt, a selftest
//	   check that failed
//	2  a bad command line (the usage follows the message on stderr)
//
// Errors say what to do about them: a machine without RDMA devices gets
// the command that adds a soft-RoCE device, an unknown device name the
// list of the devices there are, and a memory registration refused for
// the locked-memory limit (RLIMIT_MEMLOCK) the current limit and how to
// raise it.
//
// # Progress
//
// When stderr is a terminal, pingpong and bench show a progress line
// there, rewritten in place a few times a second and erased at the end;
// when stderr is a file or a pipe they print none.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/res"
	"github.com/purerdma/rdma/cmd/purerdma/internal/stat"
	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is a subcommand that lives in its own file of this package and
// registers itself in an init function. New commands are packages under
// internal/ exporting a cli.Command, which main registers in init below.
type command struct {
	name  string
	usage string // one or more "  name args   description" lines
	// help is what "-h" prints after usage: the flags and an
	// "Examples:" section of command lines.
	help string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]cli.Command{}

func register(c command) {
	registerCommand(cli.Command{Name: c.name, Usage: c.usage, Help: c.help, Run: c.run})
}

// registerCommand adds a command in the shape of cli.Command.
func registerCommand(c cli.Command) {
	if _, dup := commands[c.Name]; dup {
		panic("purerdma: command " + c.Name + " registered twice")
	}
	commands[c.Name] = c
}

// usage is the built-in commands' text followed by the registered ones'.
func usage() string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(usageText)
	for _, n := range names {
		b.WriteString(commands[n].Usage)
		if !strings.HasSuffix(commands[n].Usage, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString(exitText)
	return b.String()
}

// commandHelp is what "purerdma CMD -h" prints.
func commandHelp(c cli.Command) string {
	var b strings.Builder
	b.WriteString("usage:\n")
	b.WriteString(c.Usage)
	if !strings.HasSuffix(c.Usage, "\n") {
		b.WriteString("\n")
	}
	if c.Help != "" {
		b.WriteString("\n")
		b.WriteString(c.Help)
		if !strings.HasSuffix(c.Help, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
	b.WriteString(exitText)
	return b.String()
}

// isHelpFlag reports whether arg asks for help.
func isHelpFlag(arg string) bool { return cli.IsHelpFlag(arg) }

// linkClient is what the link commands need from *rdmactl.Client; tests
// substitute a fake.
type linkClient interface {
	AddLink(name, linkType, netdev string) error
	DeleteLink(name string) error
	Links() ([]rdmactl.Link, error)
	Close() error
}

// The system the commands act on; tests replace these.
var (
	listDevices = uverbs.Devices
	dialNetlink = func() (linkClient, error) {
		c, err := rdmactl.Open()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
)

const usageText = `usage: purerdma <command> [arguments]
       purerdma help [command]      (or purerdma <command> -h) for a command's flags and examples

commands:
`

// exitText documents the exit statuses.
const exitText = `exit status: 0 success, 1 the operation failed, 2 bad command line
`

func init() {
	register(command{
		name:  "devices",
		usage: "  devices [-json]                          list RDMA devices and their node GUIDs\n",
		help: `Flags:
  -json   print {"devices": [...]}: each device's name, node_guid, sys_image_guid,
          node_type, transport, node_desc, fw_ver, driver, uverbs_device, dev_path
          and ports (port, state, physical_state, link_layer, netdev)

Examples:
  purerdma devices
  purerdma devices -json
`,
		run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			jsonOut := false
			for _, a := range args {
				if a != "-json" && a != "--json" {
					return usageError("devices takes no arguments but -json")
				}
				jsonOut = true
			}
			return devices(stdout, jsonOut)
		},
	})
	register(command{
		name: "link",
		usage: "  link [show|list] [-json] [DEV[/PORT]]    list the ports of RDMA devices\n" +
			"  link add NAME type TYPE netdev NETDEV    add a software RDMA device (type rxe or siw)\n" +
			"  link del NAME                            remove a software RDMA device\n",
		help: `Flags of link show:
  -json   print {"links": [...]}: each port's device, port, state, physical_state
          and netdev (the network interface under a RoCE or iWARP port, or "")

Adding and removing devices needs root (CAP_NET_ADMIN) and the kernel's
rdma_rxe (type rxe) or siw module.

Examples:
  purerdma link
  purerdma link show rxe0/1
  purerdma link show -json
  purerdma link add rxe0 type rxe netdev eth0
  purerdma link del rxe0
`,
		run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			return link(args, stdout)
		},
	})
	for _, c := range packaged {
		registerCommand(c)
	}
}

// packaged are the commands in the shape every command is to take: a
// package under internal/ exporting one cli.Command.
var packaged = []cli.Command{res.Command, stat.Command}

// errUsage marks a command line that cannot be run; run prints the usage.
var errUsage = cli.ErrUsage

// usageError reports a bad command line.
func usageError(format string, args ...any) error { return cli.UsageError(format, args...) }

// run runs the command line args (without the program name) and returns
// the exit status: 0 on success, 1 when the command fails, 2 for a bad
// command line.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that ends on an interrupt.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()); msg != "" {
			fmt.Fprintf(stderr, "purerdma%s\n", msg)
		}
		io.WriteString(stderr, usage())
		return 2
	default:
		fmt.Fprintf(stderr, "purerdma: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		io.WriteString(stdout, usage())
		return nil
	case "help":
		switch len(args) {
		case 1:
			io.WriteString(stdout, usage())
			return nil
		case 2:
			c, ok := commands[args[1]]
			if !ok {
				return usageError("help: unknown command %q", args[1])
			}
			io.WriteString(stdout, commandHelp(c))
			return nil
		}
		return usageError("help takes at most one command")
	}
	c, ok := commands[args[0]]
	if !ok {
		return usageError("unknown command %q", args[0])
	}
	if len(args) > 1 && isHelpFlag(args[1]) {
		io.WriteString(stdout, commandHelp(c))
		return nil
	}
	err := c.Run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, errHelp) {
		io.WriteString(stdout, commandHelp(c))
		return nil
	}
	return err
}

// errHelp is what a command returns when a -h among its flags asks for
// its help, which dispatch prints.
var errHelp = cli.ErrHelp

// devices prints the devices in ibv_devices' format, or as JSON.
func devices(stdout io.Writer, jsonOut bool) error {
	devs, err := listDevices()
	if err != nil {
		return err
	}
	if jsonOut {
		out := struct {
			Devices []deviceJSON `json:"devices"`
		}{Devices: []deviceJSON{}}
		for _, d := range devs {
			out.Devices = append(out.Devices, newDeviceJSON(d))
		}
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "    %-16s\t   node GUID\n", "device")
	fmt.Fprintf(stdout, "    %-16s\t----------------\n", "------")
	for _, d := range devs {
		fmt.Fprintf(stdout, "    %-16s\t%16s\n", d.Name, d.NodeGUID)
	}
	return nil
}

// deviceJSON is one device of "devices -json".
type deviceJSON struct {
	Name         string     `json:"name"`
	NodeGUID     string     `json:"node_guid"`      // 16 hex digits, as the text
	SysImageGUID string     `json:"sys_image_guid"` // 16 hex digits
	NodeType     string     `json:"node_type"`
	Transport    string     `json:"transport"`
	NodeDesc     string     `json:"node_desc"`
	FWVersion    string     `json:"fw_ver"`
	Driver       string     `json:"driver"`
	UverbsDevice string     `json:"uverbs_device"`
	DevPath      string     `json:"dev_path"`
	Ports        []portJSON `json:"ports"`
}

type portJSON struct {
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	LinkLayer     string `json:"link_layer"`
	Netdev        string `json:"netdev"`
}

func newDeviceJSON(d uverbs.Device) deviceJSON {
	j := deviceJSON{
		Name: d.Name, NodeGUID: d.NodeGUID.String(), SysImageGUID: d.SysImageGUID.String(),
		NodeType: d.NodeType.String(), Transport: d.Transport.String(), NodeDesc: d.NodeDesc,
		FWVersion: d.FWVersion, Driver: d.DriverName, UverbsDevice: d.UverbsName, DevPath: d.DevPath,
		Ports: []portJSON{},
	}
	for _, p := range d.Ports {
		j.Ports = append(j.Ports, portJSON{Port: p.Num, State: p.State.String(), PhysicalState: p.PhysState,
			LinkLayer: p.LinkLayer, Netdev: p.Netdev})
	}
	return j
}

// writeJSON writes v as the one JSON document of an invocation.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func link(args []string, stdout io.Writer) error {
	verb := "show"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	if slices.ContainsFunc(args, isHelpFlag) {
		return errHelp
	}
	switch verb {
	case "show", "list":
		jsonOut := false
		var filters []string
		for _, a := range args {
			switch {
			case a == "-json" || a == "--json":
				jsonOut = true
			case strings.HasPrefix(a, "-"):
				return usageError("link %s: unknown flag %q", verb, a)
			default:
				filters = append(filters, a)
			}
		}
		if len(filters) > 1 {
			return usageError("link %s takes at most one device", verb)
		}
		filter := ""
		if len(filters) == 1 {
			filter = filters[0]
		}
		return linkShow(filter, jsonOut, stdout)
	case "add":
		name, linkType, netdev, err := parseLinkAdd(args)
		if err != nil {
			return err
		}
		return withNetlink(func(c linkClient) error { return c.AddLink(name, linkType, netdev) })
	case "del", "delete":
		if len(args) != 1 {
			return usageError("link %s takes one device name", verb)
		}
		return withNetlink(func(c linkClient) error { return c.DeleteLink(args[0]) })
	case "help":
		return errHelp
	}
	return usageError("unknown link command %q", verb)
}

// parseLinkAdd parses "NAME type TYPE netdev NETDEV", the words of
// iproute2's "rdma link add"; the two keyword pairs may come in either
// order.
func parseLinkAdd(args []string) (name, linkType, netdev string, err error) {
	if len(args) == 0 {
		return "", "", "", usageError("link add needs a device name")
	}
	name, args = args[0], args[1:]
	for len(args) > 0 {
		if len(args) < 2 {
			return "", "", "", usageError("link add: %q needs a value", args[0])
		}
		key, val := args[0], args[1]
		switch key {
		case "type":
			linkType = val
		case "netdev":
			netdev = val
		default:
			return "", "", "", usageError("link add: unknown keyword %q", key)
		}
		args = args[2:]
	}
	if linkType == "" || netdev == "" {
		return "", "", "", usageError("link add needs both type and netdev")
	}
	return name, linkType, netdev, nil
}

// linkShow prints the ports in the format of iproute2's "rdma link",
// optionally only those of one device ("rxe0") or one port ("rxe0/1").
func linkShow(filter string, jsonOut bool, stdout io.Writer) error {
	dev, port := filter, uint32(0)
	if d, p, ok := strings.Cut(filter, "/"); ok {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil || n == 0 {
			return usageError("bad port in %q", filter)
		}
		dev, port = d, uint32(n)
	}
	var links []rdmactl.Link
	err := withNetlink(func(c linkClient) error {
		var err error
		links, err = c.Links()
		return err
	})
	if err != nil {
		return err
	}
	shown := 0
	var out struct {
		Links []linkJSON `json:"links"`
	}
	out.Links = []linkJSON{}
	for _, l := range links {
		if dev != "" && l.Device != dev || port != 0 && l.Port != port {
			continue
		}
		if jsonOut {
			out.Links = append(out.Links, linkJSON{Device: l.Device, Port: int(l.Port), State: l.State,
				PhysicalState: l.PhysState, Netdev: l.Netdev})
			shown++
			continue
		}
		fmt.Fprintf(stdout, "link %s/%d state %s physical_state %s", l.Device, l.Port, l.State, l.PhysState)
		if l.Netdev != "" {
			fmt.Fprintf(stdout, " netdev %s", l.Netdev)
		}
		fmt.Fprintln(stdout)
		shown++
	}
	if filter != "" && shown == 0 {
		var names []string
		for _, l := range links {
			if !slices.Contains(names, l.Device) {
				names = append(names, l.Device)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("link show %s: %w; %s", filter, rdmactl.ErrNoDevice, linkAddHint)
		}
		return fmt.Errorf("link show %s: %w; the RDMA devices here: %s", filter, rdmactl.ErrNoDevice, strings.Join(names, ", "))
	}
	if jsonOut {
		return writeJSON(stdout, out)
	}
	return nil
}

// linkJSON is one port of "link show -json".
type linkJSON struct {
	Device        string `json:"device"`
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	Netdev        string `json:"netdev"`
}

// withNetlink runs f on a fresh RDMA netlink connection.
func withNetlink(f func(linkClient) error) error {
	c, err := dialNetlink()
	if err != nil {
		return err
	}
	err = f(c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}
