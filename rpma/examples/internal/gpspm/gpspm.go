// Package gpspm is the General Purpose Server Persistency Method of
// librpma's examples 09 and 09scch: the client writes to the server's
// memory, then asks it in a message to persist a range, and the server
// answers when it has.
//
// The two messages are protocol buffers (examples/common/gpspm/
// GPSPM_flush.proto, proto2), encoded and decoded here by hand so the
// bytes are those protobuf-c puts on the wire, without a protobuf
// dependency:
//
//	message GPSPM_flush_request {
//	    required fixed64 offset = 1;
//	    required fixed64 length = 2;
//	    required fixed64 op_context = 3;
//	}
//	message GPSPM_flush_response {
//	    required fixed64 op_context = 1;
//	}
//
// protobuf-c packs required fields in field-number order, each as its
// key (field number << 3 | wire type 1, one varint byte here) and the
// value as 8 little-endian bytes. Its decoder takes fields in any
// order, the last of a repeated field winning, skips fields it does not
// know, and fails on a known field with another wire type, a missing
// required field, a group, or a truncated field; the decoders here do
// the same.
package gpspm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The messaging buffer's layout (flush-to-persistent-GPSPM.h): one
// buffer of two MsgSizeMax halves, sends from the first, receives into
// the second.
const (
	MsgSizeMax = 512
	SendOffset = 0
	RecvOffset = SendOffset + MsgSizeMax
	// RCQSize is the size of the receive CQ both sides configure.
	RCQSize = 1
)

// Wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wire64      = 1
	wireBytes   = 2
	wireStart   = 3 // groups: protobuf-c does not support them
	wireEnd     = 4
	wire32      = 5
	fixed64Size = 8
)

// Field numbers of GPSPM_flush.proto.
const (
	fieldReqOffset    = 1
	fieldReqLength    = 2
	fieldReqOpContext = 3
	fieldRespContext  = 1
)

// FlushRequest is GPSPM_flush_request: persist Length bytes at Offset
// of the server's registered memory, answering with OpContext.
type FlushRequest struct {
	Offset    uint64
	Length    uint64
	OpContext uint64
}

// FlushResponse is GPSPM_flush_response: the request with OpContext is
// persistent.
type FlushResponse struct {
	OpContext uint64
}

// FlushRequestSize and FlushResponseSize are the packed sizes
// (gpspm_flush_*__get_packed_size): a one-byte key and 8 bytes per
// field.
const (
	FlushRequestSize  = 3 * (1 + fixed64Size)
	FlushResponseSize = 1 + fixed64Size
)

func appendFixed64(b []byte, field int, v uint64) []byte {
	b = append(b, byte(field<<3|wire64))
	return binary.LittleEndian.AppendUint64(b, v)
}

// Append appends the packed request to b (gpspm_flush_request__pack).
func (r FlushRequest) Append(b []byte) []byte {
	b = appendFixed64(b, fieldReqOffset, r.Offset)
	b = appendFixed64(b, fieldReqLength, r.Length)
	return appendFixed64(b, fieldReqOpContext, r.OpContext)
}

// Append appends the packed response to b (gpspm_flush_response__pack).
func (r FlushResponse) Append(b []byte) []byte {
	return appendFixed64(b, fieldRespContext, r.OpContext)
}

// ErrDecode is the class of every decoding error.
var ErrDecode = errors.New("gpspm: cannot unpack")

func decodeErr(msg string, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrDecode, msg, fmt.Sprintf(format, args...))
}

// field is one scanned field: its number and, for a fixed64, its value.
type field struct {
	num   uint32
	wire  uint8
	value uint64
}

// scan walks b as protobuf-c's protobuf_c_message_unpack does and
// calls f for each field, failing as it fails.
func scan(msg string, b []byte, f func(field) error) error {
	at := 0
	for at < len(b) {
		num, wire, n := parseKey(b[at:])
		if n == 0 {
			return decodeErr(msg, "error parsing tag/wiretype at offset %d", at)
		}
		at += n
		fl := field{num: num, wire: wire}
		rem := len(b) - at
		switch wire {
		case wireVarint:
			i := 0
			for i < min(rem, 10) && b[at+i]&0x80 != 0 {
				i++
			}
			if i == min(rem, 10) {
				return decodeErr(msg, "unterminated varint at offset %d", at)
			}
			at += i + 1
		case wire64:
			if rem < fixed64Size {
				return decodeErr(msg, "too short after 64bit wiretype at offset %d", at)
			}
			fl.value = binary.LittleEndian.Uint64(b[at:])
			at += fixed64Size
		case wireBytes:
			n, err := lengthPrefixed(msg, b[at:])
			if err != nil {
				return err
			}
			at += n
		case wire32:
			if rem < 4 {
				return decodeErr(msg, "too short after 32bit wiretype at offset %d", at)
			}
			at += 4
		default:
			return decodeErr(msg, "unsupported tag %d at offset %d", wire, at)
		}
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// parseKey reads a field's key as protobuf-c's parse_tag_and_wiretype:
// at most 5 bytes, a 32-bit field number, and a first byte whose
// field-number bits are not all zero. n is 0 when the key is bad.
func parseKey(b []byte) (num uint32, wire uint8, n int) {
	if len(b) == 0 || b[0]&0xf8 == 0 {
		return 0, 0, 0
	}
	wire = b[0] & 7
	num = uint32(b[0]&0x7f) >> 3
	if b[0]&0x80 == 0 {
		return num, wire, 1
	}
	shift := 4
	for i := 1; i < min(len(b), 5); i++ {
		num |= uint32(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return num, wire, i + 1
		}
		shift += 7
	}
	return 0, 0, 0
}

// lengthPrefixed is the length of a length-delimited field with its
// prefix, as protobuf-c's scan_length_prefixed_data reads it.
func lengthPrefixed(msg string, b []byte) (int, error) {
	var v uint64
	i := 0
	for ; i < min(len(b), 5); i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			break
		}
	}
	if i == min(len(b), 5) {
		return 0, decodeErr(msg, "error parsing length for length-prefixed data")
	}
	if v > 1<<31-1 {
		return 0, decodeErr(msg, "length prefix of %d is too large", v)
	}
	if uint64(i+1)+v > uint64(len(b)) {
		return 0, decodeErr(msg, "data too short after length-prefix of %d", v)
	}
	return i + 1 + int(v), nil
}

// fixed64 stores a known fixed64 field, refusing another wire type as
// protobuf-c does ("error parsing member").
func fixed64(msg, name string, fl field, dst *uint64, seen *bool) error {
	*seen = true
	if fl.wire != wire64 {
		return decodeErr(msg, "error parsing member %s: wire type %d, want %d (fixed64)", name, fl.wire, wire64)
	}
	*dst = fl.value
	return nil
}

func missing(msg, name string) error {
	return decodeErr(msg, "missing required field '%s'", name)
}

// DecodeFlushRequest unpacks a request (gpspm_flush_request__unpack);
// b is what was received (the completion's byte length).
func DecodeFlushRequest(b []byte) (FlushRequest, error) {
	const msg = "GPSPM_flush_request"
	var r FlushRequest
	var off, length, ctx bool
	err := scan(msg, b, func(fl field) error {
		switch fl.num {
		case fieldReqOffset:
			return fixed64(msg, "offset", fl, &r.Offset, &off)
		case fieldReqLength:
			return fixed64(msg, "length", fl, &r.Length, &length)
		case fieldReqOpContext:
			return fixed64(msg, "op_context", fl, &r.OpContext, &ctx)
		}
		return nil
	})
	switch {
	case err != nil:
		return FlushRequest{}, err
	case !off:
		return FlushRequest{}, missing(msg, "offset")
	case !length:
		return FlushRequest{}, missing(msg, "length")
	case !ctx:
		return FlushRequest{}, missing(msg, "op_context")
	}
	return r, nil
}

// DecodeFlushResponse unpacks a response (gpspm_flush_response__unpack).
func DecodeFlushResponse(b []byte) (FlushResponse, error) {
	const msg = "GPSPM_flush_response"
	var r FlushResponse
	var ctx bool
	err := scan(msg, b, func(fl field) error {
		if fl.num == fieldRespContext {
			return fixed64(msg, "op_context", fl, &r.OpContext, &ctx)
		}
		return nil
	})
	switch {
	case err != nil:
		return FlushResponse{}, err
	case !ctx:
		return FlushResponse{}, missing(msg, "op_context")
	}
	return r, nil
}
