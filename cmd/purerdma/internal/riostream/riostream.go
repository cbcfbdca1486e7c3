// Package riostream is "purerdma riostream": rdma-core's riostream
// (librdmacm/examples/riostream.c) in Go: rstream's command line, runs
// and output, but each transfer is an rsocket IOWrite (riowrite)
// straight into the peer's buffer, which the peer offered with IOMap
// (riomap) at offset 0, and the receiver learns of a transfer's end by
// polling the buffer's last byte for a marker, not by reading. Either
// end may be the C tool. Package rstream runs the tests (its Stream).
//
// Each test maps the buffer of its transfer size (rsocket's iomap table
// has one entry, RDMA_IOMAPSIZE 1), syncs with 16 bytes each way (rsend
// and rrecv), then per iteration the client writes transfer_count
// transfers, the last ending with the marker, and waits for the
// server's marker; the server waits first, then writes as many back.
// With -T v the last transfer of each iteration is filled from the
// running byte counter and checked on arrival (its last byte, the
// marker, excepted), as riostream's format_buf and verify_buf do.
//
// Differences from riostream are rstream's (package rstream), and: a
// client's -b sets its source address (riostream's client ignores -b);
// while it polls for the marker the Go side also checks, every few
// thousand polls, that the connection is up and the run not interrupted,
// where C spins for ever.
package riostream

import (
	"context"
	"io"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/rstream"
)

// Command is "purerdma riostream".
var Command = cli.Command{
	Name: "riostream",
	Usage: "  riostream [-s SERVER] [-b ADDR] [-p PORT] riostream's latency and bandwidth with rsocket's iomap\n" +
		"          [-S SIZE|all] [-C N] [-I N]      (IOWrite into the peer's mapped buffer); a server\n" +
		"          [-T v] [-json]                   without -s; either end may be rdma-core's riostream\n",
	Help: riostreamHelp,
	Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return rstream.Stream(ctx, "riostream", args, stdout, stderr)
	},
}

const riostreamHelp = `Usage:
  purerdma riostream [-b bind_address] [-p port] [options]            server
  purerdma riostream -s server_address [-b bind_address] [options]    client

Options are rstream's (purerdma rstream -h), except that there is no -k, and
-T takes a|async, b|block, n|nonblock (these three change nothing: the
transfers are IOWrites and the receiver polls memory) and v|verify.

Each test maps a buffer of its transfer size for the peer (an iomap table of
one entry on both sides), syncs with 16 bytes each way, then per iteration the
client writes xfers transfers of bytes into the server's buffer, the last
ending with a marker byte, and polls its own buffer for the server's marker;
the server does the same the other way. With -T v the last transfer of each
iteration carries a running byte count, checked on arrival.

Examples:
  purerdma riostream -b 198.18.0.1
  purerdma riostream -s 198.18.0.1 -b 198.18.0.2 -S 65536 -C 100 -T v
`
