package rstream

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/rsocket"
)

// riostream's tests (package riostream has its command): each transfer
// is an rsocket IOWrite into the peer's buffer, which the peer offered
// with IOMap at offset 0, and the receiver learns of a transfer's end by
// polling the buffer's last byte for a marker (package riostream's doc
// has the protocol).

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
