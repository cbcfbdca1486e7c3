// Command purerdma inspects and manages RDMA devices and measures them,
// without libibverbs, librdmacm or iproute2. Its usage, as "purerdma -h"
// prints it:
//
//	usage: purerdma <command> [arguments]
//	       purerdma help [command]      (or purerdma <command> -h) for a command's flags and examples
//
//	commands:
//	  bench TEST [-d DEV] [-i PORT] [-x GIDIDX] [-s SIZE] [-n ITERS] [-p TCPPORT] [-json] [SERVER]
//	                                           measure latency or bandwidth like perftest's ib_TEST (TEST: write_lat,
//	                                           read_lat, send_lat, atomic_lat, write_bw, read_bw, send_bw); without
//	                                           SERVER wait for a client, with it connect to that server; also
//	                                           -w WARMUP -t TXDEPTH -Q CQMOD -yield DUR -cpuprofile FILE
//	                                           -allocprofile FILE
//	  bench connect (-b ADDR | -s SERVER) [-c CONNS] [-p PORT] [-json] [-accepters N] [-percq]
//	                                           time rdma_cm connection set-up and tear-down, like cmtime
//	  bench rpma TEST [-s SIZE] [-n ITERS] [-w WARMUP] [-t DEPTH] [-f EVERY] [-flush auto|emulated|native]
//	             [-p PORT] [-json] [-yield DUR] [-verify] (-b ADDR | SERVER)
//	                                           measure the rpma package like testdata/rpmabench.c measures librpma
//	                                           (TEST: write_lat = write + flush, read_lat, send_lat, write_bw with a
//	                                           flush every -f writes); -b ADDR serves, SERVER connects
//	  devices [-json]                          list RDMA devices and their node GUIDs
//	  devinfo [-d DEV] [-i PORT] [-v] [-l] [-json]
//	                                           print device and port attributes, as ibv_devinfo does
//	  link [show|list] [-json] [DEV[/PORT]]    list the ports of RDMA devices
//	  link add NAME type TYPE netdev NETDEV    add a software RDMA device (type rxe or siw)
//	  link del NAME                            remove a software RDMA device
//	  ping -s|-c [-vVdPq] [-a ADDR] [-I ADDR]  rping's RDMA read/write ping over the rdma_cm, as server or
//	       [-p PORT] [-C COUNT] [-S SIZE]      client; either end may be rdma-core's rping; -json prints a
//	       [-json]                             summary as JSON; ping -h lists the flags
//	  pingpong rc|uc|ud|srq [flags] [HOST]     exchange messages with ibv_{rc,uc,ud,srq}_pingpong, a server without HOST
//	                                           flags: -d DEV -i IBPORT -g GIDIDX -s SIZE -n ITERS -r RXDEPTH -e -p TCPPORT
//	                                           -m MTU -l SL -c, -q NUMQP (srq), -json; pingpong rc -h lists them
//	  rcopy [-p PORT] [-n N]                    rcopy's server: receives files over rsocket; either end
//	  rcopy SRC SERVER[:DST] [-p PORT]          may be rdma-core's rcopy; rcopy -h lists the flags
//	  res [show] [-json] [DEV]                 count each device's RDMA objects, like rdma resource show
//	  res [show] [-json] OBJECT [DEV[/PORT]]   list objects: qp, cq, mr, pd, cm_id or ctx
//	  riostream [-s SERVER] [-b ADDR] [-p PORT] riostream's latency and bandwidth with rsocket's iomap
//	          [-S SIZE|all] [-C N] [-I N]      (IOWrite into the peer's mapped buffer); a server
//	          [-T v] [-json]                   without -s; either end may be rdma-core's riostream
//	  rstream [-s SERVER] [-b ADDR] [-p PORT]  rstream's stream latency and bandwidth over rsocket (or
//	          [-S SIZE|all] [-C N] [-I N]      TCP: -T s), a server without -s; either end may be
//	          [-T s|v] [-json]                 rdma-core's rstream; rstream -h lists the flags
//	  selftest [-d DEV] [-i PORT] [-g GIDIDX] [-iters N] [-json]
//	                                           check every fast-path operation of a device against itself
//	  stat [show] [-json] [DEV[/PORT]]         hardware counters of ports, like rdma statistic show
//	exit status: 0 success, 1 the operation failed, 2 bad command line
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
//     "gid_index", "gid", "gid_type", "link_layer", "connect", "rows":
//     [{"name", "result", "detail", "usec"}], "passed", "failed",
//     "not_applicable"}; result is pass, fail or n/a, gid_index -1 means
//     LID routing, connect says how the QPs were connected
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
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/purerdma/rdma/cmd/purerdma/internal/bench"
	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devices"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devinfo"
	"github.com/purerdma/rdma/cmd/purerdma/internal/link"
	"github.com/purerdma/rdma/cmd/purerdma/internal/ping"
	"github.com/purerdma/rdma/cmd/purerdma/internal/pingpong"
	"github.com/purerdma/rdma/cmd/purerdma/internal/rcopy"
	"github.com/purerdma/rdma/cmd/purerdma/internal/res"
	"github.com/purerdma/rdma/cmd/purerdma/internal/riostream"
	"github.com/purerdma/rdma/cmd/purerdma/internal/rstream"
	"github.com/purerdma/rdma/cmd/purerdma/internal/selftest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/stat"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// commands are purerdma's commands, each a package under internal/
// exporting one cli.Command; the usage lists them by name.
var commands = cli.Set{}

func init() {
	for _, c := range []cli.Command{bench.Command, devices.Command, devinfo.Command, link.Command, ping.Command,
		pingpong.Command, rcopy.Command, res.Command, riostream.Command, rstream.Command, selftest.Command, stat.Command} {
		commands.Add(c)
	}
}

// usage is what "purerdma -h" prints.
func usage() string { return commands.Usage() }

// commandHelp is what "purerdma CMD -h" prints.
func commandHelp(c cli.Command) string { return c.HelpText() }

// exitText documents the exit statuses.
const exitText = cli.ExitText

// run runs the command line args (without the program name) and returns
// the exit status: 0 on success, 1 when the command fails, 2 for a bad
// command line.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that ends on an interrupt.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return commands.Run(ctx, args, stdout, stderr)
}
