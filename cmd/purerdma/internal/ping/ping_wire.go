package ping

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
)

// What rping (rdma-core's librdmacm/examples/rping.c) puts on the wire
// and in its buffers.

const (
	// rpingInfoLen is sizeof(struct rping_rdma_info): every message the
	// two ends send each other is one of these.
	rpingInfoLen = 16
	// rpingMinSize is RPING_MIN_BUFSIZE, sizeof(stringify(INT_MAX)) +
	// sizeof(RPING_MSG_FMT). rping.c does not include <limits.h>, so
	// INT_MAX is not expanded and the first term is sizeof("INT_MAX"),
	// 8: 8 + 15 = 23, as "rping -S 1" reports. It is just enough for
	// "rdma-ping-2147483647: " and its NUL.
	rpingMinSize = 23
	// rpingMaxSize is RPING_BUFSIZE - 1, the largest -S rping takes (its
	// message says 65536, but it refuses that).
	rpingMaxSize = 64*1024 - 1
	// rpingDefaultSize and rpingDefaultPort are rping's defaults.
	rpingDefaultSize = 64
	rpingDefaultPort = 7174
	// rpingSQDepth is RPING_SQ_DEPTH: the send queue's depth, and half
	// the CQ's. The receive queue holds 2.
	rpingSQDepth = 16
	rpingRQDepth = 2
)

// rpingInfo is struct rping_rdma_info: the address, rkey and length of a
// buffer the peer may read or write. Only the server's RDMA read and
// write use it; the server's "go ahead" messages are the same struct with
// content that means nothing.
type rpingInfo struct {
	Addr uint64 // buf, big-endian on the wire
	RKey uint32
	Size uint32
}

// marshal encodes the struct as rping sends it: three big-endian fields,
// no padding.
func (in rpingInfo) marshal() [rpingInfoLen]byte {
	var b [rpingInfoLen]byte
	binary.BigEndian.PutUint64(b[0:], in.Addr)
	binary.BigEndian.PutUint32(b[8:], in.RKey)
	binary.BigEndian.PutUint32(b[12:], in.Size)
	return b
}

// parseRPingInfo decodes a received message. rping accepts only a
// completion of exactly sizeof(struct rping_rdma_info) bytes ("Received
// bogus data").
func parseRPingInfo(b []byte) (rpingInfo, error) {
	if len(b) != rpingInfoLen {
		return rpingInfo{}, fmt.Errorf("received bogus data, size %d (want %d)", len(b), rpingInfoLen)
	}
	return rpingInfo{
		Addr: binary.BigEndian.Uint64(b[0:]),
		RKey: binary.BigEndian.Uint32(b[8:]),
		Size: binary.BigEndian.Uint32(b[12:]),
	}, nil
}

func (in rpingInfo) String() string {
	return fmt.Sprintf("rkey %x addr %x len %d", in.RKey, in.Addr, in.Size)
}

// rpingFill writes ping number ping into buf the way rping_test_client
// does: snprintf of "rdma-ping-%d: " (truncated to the buffer, a C int),
// then from where the untruncated text would end the letters 'A' (65) to
// 'z' (122) over and over, starting at 65 + ping % 58 (the start moves
// on by one each ping), and a NUL in the last byte. buf must not be
// empty.
func rpingFill(buf []byte, ping int64) {
	prefix := "rdma-ping-" + strconv.Itoa(int(int32(ping))) + ": "
	cc := len(prefix)
	n := copy(buf[:len(buf)-1], prefix)
	buf[n] = 0 // snprintf's terminator
	c := byte(65 + ping%58)
	for i := cc; i < len(buf); i++ {
		buf[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	buf[len(buf)-1] = 0
}

// cString is b up to its first NUL (all of b without one): what printf's
// %s and strlen see.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
