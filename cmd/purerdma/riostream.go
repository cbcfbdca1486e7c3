package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/rsocket"
)

// riostream is rdma-core's riostream (librdmacm/examples/riostream.c) in
// Go: rstream's command line, runs and output, but each transfer is an
// rsocket IOWrite (riowrite) straight into the peer's buffer, which the
// peer offered with IOMap (riomap) at offset 0, and the receiver learns
// of a transfer's end by polling the buffer's last byte for a marker,
// not by reading. Either end may be the C tool.
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
// Differences from riostream are rstream's (rstream.go), and: a client's
// -b sets its source address (riostream's client ignores -b); while it
// polls for the marker the Go side also checks, every few thousand
// polls, that the connection is up and the run not interrupted, where C
// spins for ever.

func init() {
	register(command{
		name: "riostream",
		usage: "  riostream [-s SERVER] [-b ADDR] [-p PORT] riostream's latency and bandwidth with rsocket's iomap\n" +
			"          [-S SIZE|all] [-C N] [-I N]      (IOWrite into the peer's mapped buffer); a server\n" +
			"          [-T v] [-json]                   without -s; either end may be rdma-core's riostream\n",
		help: riostreamHelp,
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return streamCmd(ctx, "riostream", args, stdout, stderr)
		},
	})
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

// rioPollCheck is how many polls of the marker pass between checks that
// the connection is up and the run not interrupted.
const rioPollCheck = 1 << 12

// runIOTest is riostream's run_test.
func (r *rstreamRun) runIOTest(ctx context.Context, c *rsocket.Conn, t rsTest) error {
	buf := r.buf[:t.size]
	poll := t.size - 1
	buf[poll] = 0xff
	if _, err := c.IOMap(buf, 0); err != nil {
		return err
	}
	// The sync: rsend and rrecv of the buffer's first 16 bytes, with no
	// counters.
	sync := r.buf[:rsSyncSize]
	client := r.o.dst != ""
	for i := range 2 {
		var err error
		if (i == 0) == client {
			_, err = c.Write(sync)
		} else {
			_, err = io.ReadFull(c, sync)
		}
		if err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	var marker byte
	send := func() error {
		for range t.count - 1 {
			if _, err := c.IOWrite(buf, 0); err != nil {
				return fmt.Errorf("iowrite %d bytes: %w", t.size, err)
			}
		}
		buf[poll] = marker
		marker++
		if r.o.verify {
			r.v.fill(buf[:poll])
		}
		if _, err := c.IOWrite(buf, 0); err != nil {
			return fmt.Errorf("iowrite %d bytes: %w", t.size, err)
		}
		return nil
	}
	recv := func() error {
		want := marker
		marker++
		for n := 1; rioByte(buf, poll) != want; n++ {
			if n%rioPollCheck == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				// A zero-length Read returns at once: an error if the
				// connection ended, nothing otherwise.
				if _, err := c.Read(nil); err != nil {
					// The peer may have written its last transfer and
					// closed: the write is placed before the disconnect
					// that ended the connection arrives (RC order), so
					// look at the marker once more before giving up.
					if rioByte(buf, poll) == want {
						break
					}
					return fmt.Errorf("waiting for the peer's transfer: %w", err)
				}
			}
		}
		if r.o.verify {
			return r.v.check(buf[:poll])
		}
		return nil
	}
	start := time.Now()
	for range t.iters {
		first, second := send, recv
		if !client {
			first, second = recv, send
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
	}
	if err := r.printRow(t, time.Since(start)); err != nil {
		return err
	}
	return c.IOUnmap(buf)
}

// rioByte loads buf[i], which the peer writes, with an atomic load of
// the aligned word that holds it (buf is page-aligned, and its capacity
// reaches past the word).
func rioByte(buf []byte, i int) byte {
	w := i &^ 3
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], mmio.LoadUint32(buf[:cap(buf)], w))
	return b[i-w]
}
