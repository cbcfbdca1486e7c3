package gpspm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The golden bytes, by hand from GPSPM_flush.proto and the protobuf
// encoding: each field is its key, field number << 3 | 1 (wire type 1,
// fixed64), one byte for numbers below 16, then the value as 8
// little-endian bytes; protobuf-c writes required fields in field
// order.
var (
	goldenReq      = FlushRequest{Offset: 0x11, Length: 0x400, OpContext: 0xf01d}
	goldenReqBytes = []byte{
		0x09, 0x11, 0, 0, 0, 0, 0, 0, 0, // 1: offset = 0x11 (1<<3|1 = 0x09)
		0x11, 0x00, 0x04, 0, 0, 0, 0, 0, 0, // 2: length = 0x400 (2<<3|1 = 0x11)
		0x19, 0x1d, 0xf0, 0, 0, 0, 0, 0, 0, // 3: op_context = 0xf01d (3<<3|1 = 0x19)
	}
	goldenResp      = FlushResponse{OpContext: 0xf01d}
	goldenRespBytes = []byte{0x09, 0x1d, 0xf0, 0, 0, 0, 0, 0, 0}
)

func TestEncode(t *testing.T) {
	if got := goldenReq.Append(nil); !bytes.Equal(got, goldenReqBytes) {
		t.Errorf("request: % x, want % x", got, goldenReqBytes)
	}
	if got := goldenResp.Append(nil); !bytes.Equal(got, goldenRespBytes) {
		t.Errorf("response: % x, want % x", got, goldenRespBytes)
	}
	// Zero values are written too: the fields are required, not
	// optional with a default.
	zero := []byte{0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0x19, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := (FlushRequest{}).Append(nil); !bytes.Equal(got, zero) {
		t.Errorf("zero request: % x, want % x", got, zero)
	}
	max := FlushResponse{OpContext: ^uint64(0)}.Append([]byte{0xaa})
	if want := []byte{0xaa, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; !bytes.Equal(max, want) {
		t.Errorf("appended response: % x, want % x", max, want)
	}
	if FlushRequestSize != len(goldenReqBytes) || FlushResponseSize != len(goldenRespBytes) {
		t.Errorf("sizes %d, %d; want %d, %d", FlushRequestSize, FlushResponseSize, len(goldenReqBytes), len(goldenRespBytes))
	}
	if RecvOffset+MsgSizeMax != 1024 || FlushRequestSize > MsgSizeMax {
		t.Errorf("buffer layout: receive at %d, %d bytes each", RecvOffset, MsgSizeMax)
	}
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func f64(key byte, v byte) []byte { return []byte{key, v, 0, 0, 0, 0, 0, 0, 0} }

func TestDecodeFlushRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want FlushRequest
		ok   bool
	}{
		{"golden", goldenReqBytes, goldenReq, true},
		{"reordered", cat(f64(0x19, 3), f64(0x09, 1), f64(0x11, 2)), FlushRequest{1, 2, 3}, true},
		{"repeated field, the last wins", cat(f64(0x09, 1), f64(0x11, 2), f64(0x19, 3), f64(0x09, 9)), FlushRequest{9, 2, 3}, true},
		{"unknown fields skipped", cat(
			[]byte{0x20, 0x96, 0x01}, // 4: varint 150
			f64(0x09, 1),
			[]byte{0x2a, 0x02, 'h', 'i'}, // 5: 2 bytes
			f64(0x11, 2),
			[]byte{0x35, 1, 2, 3, 4}, // 6: fixed32
			f64(0x79, 7),             // 15: fixed64
			f64(0x19, 3),
			[]byte{0x81, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}, // 16: a two-byte key, fixed64
			[]byte{0x80, 0x00, 0x05},                   // 0 in a two-byte key, varint: unknown, kept by protobuf-c
		), FlushRequest{1, 2, 3}, true},
		{"empty", nil, FlushRequest{}, false},
		{"missing op_context", cat(f64(0x09, 1), f64(0x11, 2)), FlushRequest{}, false},
		{"missing offset", cat(f64(0x11, 2), f64(0x19, 3)), FlushRequest{}, false},
		{"known field as varint", cat([]byte{0x08, 0x01}, f64(0x11, 2), f64(0x19, 3)), FlushRequest{}, false},
		{"known field as fixed32", cat(f64(0x09, 1), []byte{0x15, 1, 2, 3, 4}, f64(0x19, 3)), FlushRequest{}, false},
		{"known field length-delimited", cat(f64(0x09, 1), f64(0x11, 2), []byte{0x1a, 0x08, 1, 2, 3, 4, 5, 6, 7, 8}), FlushRequest{}, false},
		{"truncated fixed64", goldenReqBytes[:len(goldenReqBytes)-1], FlushRequest{}, false},
		{"trailing key", cat(goldenReqBytes, []byte{0x09}), FlushRequest{}, false},
		{"field 0", cat(goldenReqBytes, []byte{0x01, 1, 2, 3, 4, 5, 6, 7, 8}), FlushRequest{}, false},
		{"zero byte", cat(goldenReqBytes, []byte{0}), FlushRequest{}, false},
		{"group", cat(goldenReqBytes, []byte{0x23, 0x24}), FlushRequest{}, false},
		{"wire type 6", cat(goldenReqBytes, []byte{0x26}), FlushRequest{}, false},
		{"six-byte key", cat(goldenReqBytes, []byte{0x89, 0x80, 0x80, 0x80, 0x80, 0x00}), FlushRequest{}, false},
		{"unterminated key", cat(goldenReqBytes, []byte{0x89, 0x80}), FlushRequest{}, false},
		{"unterminated varint", cat(goldenReqBytes, []byte{0x20}, bytes.Repeat([]byte{0x80}, 10), []byte{0}), FlushRequest{}, false},
		{"varint at the end", cat(goldenReqBytes, []byte{0x20}), FlushRequest{}, false},
		{"length past the end", cat(goldenReqBytes, []byte{0x2a, 0x03, 1, 2}), FlushRequest{}, false},
		{"length prefix too large", cat(goldenReqBytes, []byte{0x2a, 0x80, 0x80, 0x80, 0x80, 0x08}), FlushRequest{}, false},
		{"six-byte length prefix", cat(goldenReqBytes, []byte{0x2a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}), FlushRequest{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeFlushRequest(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("DecodeFlushRequest(% x) = %+v, %v; want success %v", tc.in, got, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrDecode) {
				t.Errorf("error %v does not match ErrDecode", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestDecodeFlushResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want FlushResponse
		ok   bool
	}{
		{"golden", goldenRespBytes, goldenResp, true},
		{"a request is a response with unknown fields", goldenReqBytes, FlushResponse{0x11}, true},
		{"empty", nil, FlushResponse{}, false},
		{"only unknown fields", f64(0x11, 2), FlushResponse{}, false},
		{"as varint", []byte{0x08, 0x01}, FlushResponse{}, false},
		{"truncated", goldenRespBytes[:8], FlushResponse{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeFlushResponse(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("DecodeFlushResponse(% x) = %+v, %v; want success %v", tc.in, got, err, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// FuzzDecodeFlushRequest: the decoder never panics, a request it
// accepts had every field (27 bytes at least), and what it decodes
// encodes to bytes it decodes the same.
func FuzzDecodeFlushRequest(f *testing.F) {
	f.Add(goldenReqBytes)
	f.Add(cat(f64(0x19, 3), []byte{0x2a, 0x02, 'h', 'i'}, f64(0x09, 1), f64(0x11, 2)))
	f.Add([]byte{0x81, 0x01, 0x20, 0x96, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeFlushRequest(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not match ErrDecode", err)
			}
			return
		}
		if len(b) < FlushRequestSize {
			t.Fatalf("accepted %d bytes (% x): %+v", len(b), b, r)
		}
		again, err := DecodeFlushRequest(r.Append(nil))
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}

// FuzzDecodeFlushResponse is FuzzDecodeFlushRequest for responses.
func FuzzDecodeFlushResponse(f *testing.F) {
	f.Add(goldenRespBytes)
	f.Add(goldenReqBytes)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeFlushResponse(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not match ErrDecode", err)
			}
			return
		}
		if len(b) < FlushResponseSize {
			t.Fatalf("accepted %d bytes (% x): %+v", len(b), b, r)
		}
		again, err := DecodeFlushResponse(r.Append(nil))
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}
