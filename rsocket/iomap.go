package rsocket

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/purerdma/rdma/uverbs"
)

// rsockets' iomap (riomap, riounmap, riowrite): each side may offer the
// other pieces of its memory, each named by an offset, and the other
// side writes there directly (a plain RDMA WRITE: no message, no copy
// on the receiving side, nothing to Read). A side accepts as many
// mappings as its Config.IOMapSize says; it advertises that size in
// the connect data, and the peer writes each mapping's address, key
// and offset into a table that follows its target SGL.

// ErrNoMapping is what IOWrite returns for an offset that none of the
// peer's mappings covers.
var ErrNoMapping = errors.New("rsocket: no mapping of the peer covers the offset")

// IOMap offers buf to the peer as the target of its IOWrite (riomap
// with PROT_WRITE): the peer's writes at offsets [off, off+len(buf))
// land in buf, where off is offset, or buf's address if offset is -1.
// It returns off.
//
// buf is registered with the device and stays referenced until IOUnmap
// or Close; the peer's writes arrive with no notice, so a program
// learns of them from its own protocol (riostream polls a byte) and
// reads buf with atomic loads or after a message that follows them.
// The mapping is sent to the peer at once, in order with Write's data
// (it takes one of the peer's credits, as in C); a peer that did not
// offer iomap (its Config.IOMapSize, or C's RDMA_IOMAPSIZE, is 0) or
// whose table is full refuses it. IOMap waits for room to send like
// Write and ends as it does (the write deadline, Close). If it returns
// an error the peer was told nothing.
func (c *Conn) IOMap(buf []byte, offset int64) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(buf) == 0 || uint64(len(buf)) > 1<<32-1 || offset < -1 {
		return 0, c.opError("iomap", fmt.Errorf("rsocket: iomap of %d bytes at offset %d: want 1 byte to 4 GiB at an offset >= 0 (or -1: the buffer's address)", len(buf), offset))
	}
	c.mu.Lock()
	idx, err := c.freeMapping()
	c.mu.Unlock()
	if err != nil {
		return 0, c.opError("iomap", err)
	}
	mr, err := c.id.PD().RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		return 0, c.opError("iomap", err)
	}
	off := uint64(offset)
	if offset == -1 {
		off = mr.Addr() // the I/O address is buf's own
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if err := c.writeErr(); err != nil {
			mr.Close()
			return 0, c.opError("iomap", err)
		}
		if c.canSend() {
			break
		}
		if err := c.await(func() bool { return c.canSend() || c.writeErr() != nil }, &c.wdl, true); err != nil {
			mr.Close()
			return 0, c.opError("iomap", err)
		}
	}
	var e [ioMapLen]byte
	putIOMap(e[:], ioMapping{Offset: off, sge: sge{Addr: mr.Addr(), Key: mr.RKey(), Length: uint32(len(buf))}}, c.peerOrder())
	nsge := c.toRing(e[:])
	c.sseqNo++
	c.sqeAvail -= c.msgWRs
	c.sbufAvail -= ioMapLen
	imm := msg(opIOMapSG, uint32(idx))
	c.swr = uverbs.SendWR{WRID: uint64(imm), SGL: c.ssgl[:nsge],
		RemoteAddr: c.peerIOTab.Addr + uint64(idx)*ioMapLen, RKey: c.peerIOTab.Key}
	if ioMapLen <= c.inline {
		c.swr.Flags = uverbs.SendInline
	}
	c.maps[idx] = &ioMap{mr: mr, buf: buf, offset: off}
	if err := c.postWriteMsg(imm); err != nil {
		c.postFailed("post an iomap entry", err)
		return 0, c.opError("iomap", c.writeErr())
	}
	return int64(off), nil
}

// freeMapping finds a free entry of the peer's table.
func (c *Conn) freeMapping() (int, error) {
	if c.st.closed {
		return 0, net.ErrClosed
	}
	if len(c.maps) == 0 {
		return 0, errors.New("rsocket: the peer offers no iomap (its IOMapSize, or C's RDMA_IOMAPSIZE, is 0)")
	}
	for i, m := range c.maps {
		if m == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("rsocket: the peer's iomap table is full (%d mappings): IOUnmap one first", len(c.maps))
}

// IOUnmap ends the mapping of buf (riounmap): the same slice IOMap took
// (the same first byte and length). The peer is not told, as in C: its
// IOWrites into the mapping fail from now on and end the connection, so
// unmap only what the peer will not write again (riostream unmaps after
// a test's last exchange).
func (c *Conn) IOUnmap(buf []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.closed {
		return c.opError("iounmap", net.ErrClosed)
	}
	for i, m := range c.maps {
		if m != nil && len(buf) == len(m.buf) && len(buf) > 0 && &buf[0] == &m.buf[0] {
			c.maps[i] = nil
			if err := m.mr.Close(); err != nil {
				return c.opError("iounmap", err)
			}
			return nil
		}
	}
	return c.opError("iounmap", errors.New("rsocket: the buffer is not mapped (IOUnmap takes the slice IOMap took)"))
}

// IOWrite writes p into the peer's mapping at offset (riowrite): into
// the memory the peer offered with IOMap, with plain RDMA WRITEs; the
// peer's Read sees nothing of it. It returns when all of p is posted
// (copied into the send buffer), or with the count posted and an
// error: ErrNoMapping where the peer's mappings end (a write may span
// adjacent mappings), or what ends a Write (the write deadline, a
// failed connection, CloseWrite, Close). Writes are done in order with
// Write's data: data written after an IOWrite arrives after it.
func (c *Conn) IOWrite(p []byte, offset int64) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if offset < 0 {
		return 0, c.opError("iowrite", fmt.Errorf("rsocket: iowrite at offset %d: offsets are >= 0", offset))
	}
	if err := c.writeErr(); err == nil && expired(c.wdl) {
		return 0, c.opError("iowrite", os.ErrDeadlineExceeded)
	}
	off := uint64(offset)
	n, olen := 0, olapStart
	var m ioMapping
	for {
		if err := c.writeErr(); err != nil {
			return n, c.opError("iowrite", err)
		}
		if n == len(p) {
			return n, nil
		}
		if !c.canSend() {
			err := c.await(func() bool { return c.canSend() || c.writeErr() != nil }, &c.wdl, true)
			if err != nil {
				return n, c.opError("iowrite", err)
			}
			continue
		}
		if !m.covers(off) {
			var ok bool
			if m, ok = c.peerMapping(off); !ok {
				return n, c.opError("iowrite", fmt.Errorf("%w: offset %d (%d mappings offered)", ErrNoMapping, off, c.peerMappings()))
			}
		}
		x := len(p) - n
		if olen < x {
			x = olen
			if olen < maxTransfer {
				olen <<= 1
			}
		}
		x = min(x, c.sbufAvail)
		if left := uint64(m.Length) - (off - m.Offset); uint64(x) > left {
			x = int(left)
		}
		nsge := c.toRing(p[n : n+x])
		c.sqeAvail--
		c.sbufAvail -= x
		c.swr = uverbs.SendWR{WRID: uint64(msg(opWrite, uint32(x))), Opcode: uverbs.WRRDMAWrite,
			SGL: c.ssgl[:nsge], RemoteAddr: m.Addr + (off - m.Offset), RKey: m.Key}
		if x <= c.inline {
			c.swr.Flags = uverbs.SendInline
		}
		if err := c.qp.PostSend(&c.swr); err != nil {
			c.postFailed("post an iomap write", err)
			return n, c.opError("iowrite", c.writeErr())
		}
		n += x
		off += uint64(x)
	}
}

// peerMapping finds the peer's mapping that covers off.
func (c *Conn) peerMapping(off uint64) (ioMapping, bool) {
	for _, m := range c.peerMaps {
		if m.covers(off) {
			return m, true
		}
	}
	return ioMapping{}, false
}

func (c *Conn) peerMappings() int {
	n := 0
	for _, m := range c.peerMaps {
		if m.Length > 0 {
			n++
		}
	}
	return n
}
