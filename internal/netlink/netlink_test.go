package netlink

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// TestEncoder checks a request with a fixed header and nested attributes
// byte for byte, and that it parses back.
func TestEncoder(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected bytes are little-endian")
	}
	e := NewRequest(16, FlagRequest|FlagAck, 7)
	e.Fixed([]byte{1, 2, 3}) // padded to 4
	e.String(3, "ab")
	e.Begin(18)
	e.Attr(1, []byte("veth")) // no padding needed
	e.Begin(2)
	e.Uint32(4, 0x01020304)
	e.End()
	e.End()
	b := e.Finish()
	want := "34000000" + "1000" + "0500" + "07000000" + "00000000" + // header: length 52, type 16, REQUEST|ACK, seq 7
		"01020300" + // fixed header
		"07000300" + "61620000" + // "ab\x00"
		"18001200" + "08000100" + "76657468" + // nest 18 { kind "veth"
		"0c000200" + "08000400" + "04030201" // nest 2 { u32 } }
	if got := fmt.Sprintf("%x", b); got != want {
		t.Fatalf("request:\n got %s\nwant %s", got, want)
	}
	msgs, err := ParseMessages(b)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ParseMessages = %d messages, %v", len(msgs), err)
	}
	attrs, err := ParseAttrs(msgs[0].Data[4:])
	if err != nil || len(attrs) != 2 || attrs[0].String() != "ab" || attrs[1].Type != 18 {
		t.Fatalf("ParseAttrs = %+v, %v", attrs, err)
	}
	inner, err := ParseAttrs(attrs[1].Data)
	if err != nil || len(inner) != 2 || inner[0].String() != "veth" {
		t.Fatalf("nested attributes = %+v, %v", inner, err)
	}
	deepest, err := ParseAttrs(inner[1].Data)
	if err != nil || len(deepest) != 1 {
		t.Fatalf("innermost attributes = %+v, %v", deepest, err)
	}
	if v, err := deepest[0].Uint32(); err != nil || v != 0x01020304 {
		t.Errorf("Uint32 = %#x, %v", v, err)
	}
	if _, err := deepest[0].Uint64(); err == nil {
		t.Error("Uint64 of a 4-byte attribute: no error")
	}
}
