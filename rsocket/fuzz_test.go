package rsocket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// goodConnData is connect data as C rsockets sends it (x86: no NET flag).
func goodConnData() []byte {
	b := make([]byte, connDataLen)
	d := connData{
		Version: 1, Flags: flagIOMap, Credits: 384,
		TargetSGL: sge{Addr: 0x7f0012345000, Key: 0x1234, Length: sglSize},
		DataBuf:   sge{Addr: 0x7f0012346000, Key: 0x5678, Length: 64 << 10},
	}
	d.marshal(b)
	return b
}

// FuzzParseConnData: parseConnData takes any bytes without panicking.
// What it accepts is version 1 with known flags, credits, a 2-entry
// target SGL and a first buffer a message can count, and marshals back
// to the first 40 bytes, except the reserved bytes 4-6, which it
// ignores (as C does) and marshal writes as zeros; bytes past 40 (the
// CM's padding) do not change the result. What it refuses is a
// *ConnectDataError.
func FuzzParseConnData(f *testing.F) {
	good := goodConnData()
	f.Add(good)
	f.Add(append(bytes.Clone(good), make([]byte, 16)...)) // padded, as the CM delivers it
	f.Add(good[:20])
	f.Add(good[:39])
	f.Add([]byte{})
	for _, edit := range []struct {
		off int
		v   byte
	}{
		{0, 2},     // version
		{1, 0x80},  // unknown flag
		{1, 3},     // NET | IOMAP
		{2, 0},     // credits 0 (with byte 3)
		{4, 0xff},  // reserved
		{7, 200},   // iomap size
		{23, 5},    // target SGL length 5
		{36, 0x20}, // data_buf length past 29 bits
	} {
		b := bytes.Clone(good)
		b[edit.off] = edit.v
		if edit.off == 2 {
			b[3] = 0
		}
		f.Add(b)
	}
	empty := bytes.Clone(good)
	copy(empty[36:40], []byte{0, 0, 0, 0})
	f.Add(empty)

	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConnData(b)
		if err != nil {
			var ce *ConnectDataError
			if !errors.As(err, &ce) || ce.Reason == "" {
				t.Fatalf("parseConnData(%x) = %v: not a *ConnectDataError with a reason", b, err)
			}
			if len(b) >= connDataLen {
				if _, err2 := parseConnData(b[:connDataLen]); err2 == nil {
					t.Fatalf("parseConnData(%x): %v, but accepts its first 40 bytes", b, err)
				}
			}
			return
		}
		if len(b) < connDataLen {
			t.Fatalf("parseConnData accepted %d bytes", len(b))
		}
		switch {
		case c.Version != 1, c.Flags&^(flagNet|flagIOMap) != 0, c.Credits == 0,
			c.TargetSGL.Length != sglSize, c.DataBuf.Length == 0, c.DataBuf.Length > maxMsgData:
			t.Fatalf("parseConnData(%x) accepted %+v", b, c)
		}
		out := make([]byte, connDataLen)
		c.marshal(out)
		want := bytes.Clone(b[:connDataLen])
		want[4], want[5], want[6] = 0, 0, 0
		if !bytes.Equal(out, want) {
			t.Fatalf("parseConnData(%x) = %+v, which marshals to %x", b, c, out)
		}
		if c2, err := parseConnData(b[:connDataLen]); err != nil || c2 != c {
			t.Fatalf("parseConnData of the first 40 bytes = %+v, %v; of all %d = %+v", c2, err, len(b), c)
		}
		if c2, err := parseConnData(out); err != nil || c2 != c {
			t.Fatalf("marshal then parse = %+v, %v; want %+v", c2, err, c)
		}
	})
}

// FuzzMsgImm: every immediate splits into an opcode of 3 bits and a
// value of 29 that build it again; an opcode and value build an
// immediate that splits back into them (the value cut to 29 bits).
func FuzzMsgImm(f *testing.F) {
	for _, imm := range []uint32{0, 5, msg(opSGL, 384), msg(opCtrl, ctrlShutdown), msg(opIOMapSG, 0),
		1 << 29, 5 << 29, msg(opCtrl, 9), 0xffffffff, maxMsgData} {
		f.Add(imm, uint8(msgOp(imm)), msgData(imm))
	}
	f.Add(uint32(0), uint8(7), uint32(0xffffffff))
	f.Add(uint32(0), uint8(200), uint32(1))
	f.Fuzz(func(t *testing.T, imm uint32, op uint8, data uint32) {
		o, d := msgOp(imm), msgData(imm)
		if o > 7 || d > maxMsgData {
			t.Fatalf("%#x splits into op %d, data %#x", imm, o, d)
		}
		if got := msg(o, d); got != imm {
			t.Fatalf("%#x splits into op %d, data %#x, which build %#x", imm, o, d, got)
		}
		op &= 7
		m := msg(uint32(op), data)
		if msgOp(m) != uint32(op) || msgData(m) != data&msgDataMask {
			t.Fatalf("msg(%d, %#x) = %#x: op %d, data %#x", op, data, m, msgOp(m), msgData(m))
		}
	})
}

// FuzzSGE: a peer's 16-byte rs_sge (written into the target SGL in
// this host's order, or big-endian in connect data) decodes and encodes
// back to the same bytes in either byte order.
func FuzzSGE(f *testing.F) {
	f.Add(make([]byte, sgeLen))
	b := make([]byte, sgeLen)
	putSGE(b, sge{Addr: 0x7f0012346000, Key: 0x5678, Length: 64 << 10}, binary.LittleEndian)
	f.Add(b)
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < sgeLen {
			return
		}
		for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			s := getSGE(b, o)
			out := make([]byte, sgeLen)
			putSGE(out, s, o)
			if !bytes.Equal(out, b[:sgeLen]) {
				t.Fatalf("%v: %x decodes to %+v, which encodes to %x", o, b[:sgeLen], s, out)
			}
		}
	})
}

// FuzzSendMsg: on iWARP a message is what a receive took into its
// 4-byte slot. sendMsg accepts exactly a SEND of 4 bytes without
// immediate data, and decodes the slot as this host's 32-bit word (the
// sender writes the receiver's order), which splits into an opcode and
// value that build it again; anything else is an error saying why.
func FuzzSendMsg(f *testing.F) {
	word := func(m uint32) []byte {
		b := make([]byte, sendMsgLen)
		binary.NativeEndian.PutUint32(b, m)
		return b
	}
	f.Add(word(msg(opData, 5)), uint32(sendMsgLen), false)
	f.Add(word(msg(opSGL, 384)), uint32(sendMsgLen), false)
	f.Add(word(msg(opCtrl, ctrlDisconnect)), uint32(sendMsgLen), false)
	f.Add(word(msg(opIOMapSG, 1)), uint32(sendMsgLen), false)
	f.Add(word(0xffffffff), uint32(sendMsgLen), false)
	f.Add(word(msg(opData, 5)), uint32(0), false)
	f.Add(word(msg(opData, 5)), uint32(8), false)
	f.Add(word(msg(opData, 5)), uint32(sendMsgLen), true)
	f.Add([]byte{1, 2}, uint32(sendMsgLen), false)
	f.Fuzz(func(t *testing.T, slot []byte, n uint32, imm bool) {
		m, err := sendMsg(slot, n, imm)
		want := !imm && n == sendMsgLen && len(slot) >= sendMsgLen
		if (err == nil) != want {
			t.Fatalf("sendMsg(%x, %d, %v) = %#x, %v", slot, n, imm, m, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("sendMsg(%x, %d, %v): an error without a reason", slot, n, imm)
			}
			return
		}
		if !bytes.Equal(word(m), slot[:sendMsgLen]) {
			t.Fatalf("sendMsg(%x) = %#x, which encodes to %x", slot, m, word(m))
		}
		if got := msg(msgOp(m), msgData(m)); got != m {
			t.Fatalf("%#x splits into op %d, data %#x, which build %#x", m, msgOp(m), msgData(m), got)
		}
	})
}
