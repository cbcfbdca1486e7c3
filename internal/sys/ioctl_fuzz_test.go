package sys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
)

// The attribute kinds a Method builds, as methodProgram reads them.
const (
	opIn = iota
	opInUint
	opOut
	opHandle
	opNewHandle
	opFD
	opEnum
	opOptional
	numOps
)

// wantAttr is what one builder call promises the kernel will see.
type wantAttr struct {
	op       int
	id       uint16
	optional bool
	buf      []byte // the caller's buffer (In, Out, Enum)
	orig     []byte // its contents before the call
	value    uint64 // InUint, Handle, FD: the value; for InUint truncated to size
	size     int    // InUint: the length the attribute must carry
	elem     uint8  // Enum
	write    int    // Out: how many bytes the fake kernel writes
}

// methodProgram turns fuzz bytes into builder calls on m and returns
// what each promised, and whether the builder must refuse the method
// (too many attributes, a buffer longer than 65535 bytes). Each call is
// an opcode byte, a 16-bit attribute id, then its operands; buffers are
// up to 8 KiB, or with the opcode's high bit 65534 to 65537 bytes, on
// both sides of the 16-bit limit. Parsing stops two attributes past the
// most a method takes.
func methodProgram(m *Method, prog []byte) (attrs []wantAttr, mustFail bool) {
	next := func(n int) []byte {
		b := make([]byte, n)
		k := copy(b, prog)
		prog = prog[k:]
		return b
	}
	buffer := func(long bool) []byte {
		h := next(3)
		n := int(binary.LittleEndian.Uint16(h) & 0x1fff)
		if long {
			n = 0xffff - 1 + int(h[0]&3) // 65534 to 65537: both sides of the limit
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = h[2] ^ byte(j*31)
		}
		return b
	}
	for len(prog) > 0 && len(attrs) < maxAttrs+2 {
		code := next(1)[0]
		op, long := int(code&0x7f)%numOps, code&0x80 != 0
		if op == opOptional {
			m.Optional()
			if len(attrs) > 0 {
				attrs[len(attrs)-1].optional = true
			}
			continue
		}
		a := wantAttr{op: op, id: binary.LittleEndian.Uint16(next(2))}
		switch op {
		case opIn, opEnum:
			a.buf = buffer(long)
			if op == opEnum {
				a.elem = next(1)[0]
				m.Enum(a.id, a.elem, a.buf)
			} else {
				m.In(a.id, a.buf)
			}
			mustFail = mustFail || len(a.buf) > 0xffff
		case opOut:
			a.buf = buffer(long)
			a.write = int(binary.LittleEndian.Uint16(next(2)))
			if len(a.buf) > 0 {
				a.write %= len(a.buf) + 1
			} else {
				a.write = 0
			}
			m.Out(a.id, a.buf)
			mustFail = mustFail || len(a.buf) > 0xffff
		case opInUint:
			a.size = int(next(1)[0] % 9)
			v := binary.LittleEndian.Uint64(next(8))
			m.InUint(a.id, v, a.size)
			switch a.size {
			case 1, 2, 4:
				a.value = v & (1<<(8*a.size) - 1)
			default:
				a.size, a.value = 8, v
			}
		case opHandle:
			h := binary.LittleEndian.Uint32(next(4))
			m.Handle(a.id, h)
			a.value = uint64(h)
		case opNewHandle:
			m.NewHandle(a.id)
		case opFD:
			fd := int(int32(binary.LittleEndian.Uint32(next(4))))
			m.FD(a.id, fd)
			a.value = uint64(int64(fd))
		}
		a.orig = bytes.Clone(a.buf)
		attrs = append(attrs, a)
	}
	return attrs, mustFail || len(attrs) > maxAttrs
}

// A fuzz program: one attribute of each kind, in a call's usual order.
func methodSeed() []byte {
	var b []byte
	add := func(op byte, id uint16, operands ...byte) {
		b = append(b, op)
		b = binary.LittleEndian.AppendUint16(b, id)
		b = append(b, operands...)
	}
	add(opHandle, 1, 7, 0, 0, 0)                // PD handle 7
	add(opNewHandle, 2)                         // the new object
	add(opInUint, 3, 4, 0x78, 0x56, 0x34, 0x12) // a 4-byte flag word
	b = append(b, 0, 0, 0, 0)
	add(opIn, 4, 40, 0, 9)               // a 40-byte request: by pointer
	add(opIn, 5, 8, 0, 1)                // 8 bytes: inline
	b = append(b, opOptional)            // makes the 8-byte In optional
	add(opFD, 6, 0xff, 0xff, 0xff, 0xff) // fd -1
	add(opOut, 7, 16, 0, 0, 12, 0)       // a 16-byte response, 12 written
	add(opOut, 8, 0, 0x10, 0, 0, 0x10)   // 4 KiB: past the scratch block
	add(opEnum, 9, 3, 0, 5, 2)           // an enum with 3 bytes of data
	return b
}

// FuzzMethod builds uverbs ioctl methods from random attribute lists and
// checks the buffer the kernel would read against struct
// ib_uverbs_ioctl_hdr and struct ib_uverbs_attr
// (rdma/rdma_user_ioctl_cmds.h): the header's length and count, each
// attribute's id, length, flags and reserved bytes, data up to 8 bytes
// inline and longer data (and every Out buffer) by a pointer to an
// 8-byte aligned copy of the caller's bytes that lies inside the scratch
// block past the attributes, or in a pinned copy, with no two buffers
// overlapping; a method with too many attributes or a buffer over 65535
// bytes fails before any kernel call. Then a fake kernel answers: new
// handles, output lengths, and Out data written in part, which must
// reach the caller's buffers with the bytes the kernel did not write
// left as the caller had them (not what an earlier call left in the
// block). Nothing may panic.
func FuzzMethod(f *testing.F) {
	f.Add(uint16(abi.UVERBS_OBJECT_QP), uint16(abi.UVERBS_METHOD_QP_CREATE), uint32(abi.RDMA_DRIVER_RXE), methodSeed())
	f.Add(uint16(1), uint16(2), uint32(0), []byte{})
	f.Add(uint16(0xffff), uint16(0xffff), uint32(0xffffffff), bytes.Repeat([]byte{opNewHandle, 1, 0}, maxAttrs+1))
	f.Add(uint16(3), uint16(4), uint32(5), []byte{opIn | 0x80, 1, 0, 2, 0, 0}) // 65536 bytes
	f.Fuzz(func(t *testing.T, object, method uint16, driverID uint32, prog []byte) {
		if len(prog) > 1024 {
			return
		}
		m := NewMethod("fuzz method", object, method)
		want, mustFail := methodProgram(m, prog)
		if mustFail {
			closed := &FD{raw: -1}
			err := m.Exec(closed, driverID)
			if err == nil || errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "fuzz method") {
				t.Fatalf("Exec of a method the builder must refuse = %v, want its own error naming the call, before the fd is used", err)
			}
			return
		}
		s, err := GetScratch()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		mem := s.Bytes()
		for i := range mem {
			mem[i] = 0xa5 // what an earlier call left
		}
		var pin pinner
		defer pin.Unpin()
		var at [maxAttrs][]byte
		buf := m.encode(mem, driverID, &pin, &at)
		if unsafe.Pointer(buf) != unsafe.Pointer(&mem[0]) {
			t.Fatalf("the call is not at the start of the block")
		}
		checkEncoded(t, mem, &at, object, method, driverID, want)

		// The fake kernel's answer.
		for i, a := range want {
			k := &buf.attrs[i]
			switch a.op {
			case opOut:
				for j := range a.write {
					at[i][j] = ^a.orig[j]
				}
				k.Flags |= abi.UVERBS_ATTR_F_VALID_OUTPUT
				k.Len = uint16(a.write)
			case opHandle, opNewHandle, opFD:
				*k.Data.Data() = 1000 + uint64(i)
			}
		}
		m.decode(buf, &at)
		for i, a := range want {
			switch a.op {
			case opOut:
				wantBuf := bytes.Clone(a.orig)
				for j := range a.write {
					wantBuf[j] = ^a.orig[j]
				}
				if !bytes.Equal(a.buf, wantBuf) {
					t.Fatalf("attribute %d: Out buffer after the call\n%x\nwant the kernel's %d bytes, then the caller's own\n%x", i, a.buf, a.write, wantBuf)
				}
				if got := m.OutLen(Attr(i)); got != a.write {
					t.Fatalf("attribute %d: OutLen = %d, want %d", i, got, a.write)
				}
			case opIn, opEnum:
				if !bytes.Equal(a.buf, a.orig) {
					t.Fatalf("attribute %d: the call changed an In buffer", i)
				}
				if got := m.OutLen(Attr(i)); got != -1 {
					t.Fatalf("attribute %d: OutLen of an attribute without VALID_OUTPUT = %d, want -1", i, got)
				}
			case opHandle, opNewHandle, opFD:
				if got := m.Result(Attr(i)); got != 1000+uint64(i) {
					t.Fatalf("attribute %d: Result = %d, want the kernel's %d", i, got, 1000+i)
				}
			}
		}
	})
}

// checkEncoded checks the bytes the kernel reads, decoded here from the
// C layout (not through the Go structs), against what the builder calls
// promised.
func checkEncoded(t *testing.T, mem []byte, at *[maxAttrs][]byte, object, method uint16, driverID uint32, want []wantAttr) {
	t.Helper()
	le := binary.LittleEndian
	length := int(le.Uint16(mem[0:]))
	if length != 24+16*len(want) || length > len(mem) {
		t.Fatalf("header length %d for %d attributes, want %d", length, len(want), 24+16*len(want))
	}
	if got := le.Uint16(mem[2:]); got != object {
		t.Fatalf("object_id %d, want %d", got, object)
	}
	if got := le.Uint16(mem[4:]); got != method {
		t.Fatalf("method_id %d, want %d", got, method)
	}
	if got := int(le.Uint16(mem[6:])); got != len(want) {
		t.Fatalf("num_attrs %d, want %d", got, len(want))
	}
	if r1, r2 := le.Uint64(mem[8:]), le.Uint32(mem[20:]); r1 != 0 || r2 != 0 {
		t.Fatalf("reserved1 %#x, reserved2 %#x, want 0", r1, r2)
	}
	if got := le.Uint32(mem[16:]); got != driverID {
		t.Fatalf("driver_id %d, want %d", got, driverID)
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	end := base + uint64(len(mem))
	type region struct{ start, end uint64 }
	regions := []region{{base, base + uint64(length)}}
	for i, a := range want {
		r := mem[24+16*i : 24+16*(i+1)]
		id, n, flags := le.Uint16(r[0:]), int(le.Uint16(r[2:])), le.Uint16(r[4:])
		attrData, data := r[6:8], le.Uint64(r[8:])
		if id != a.id {
			t.Fatalf("attribute %d: attr_id %d, want %d", i, id, a.id)
		}
		wantFlags := uint16(abi.UVERBS_ATTR_F_MANDATORY)
		if a.optional {
			wantFlags = 0
		}
		if flags != wantFlags {
			t.Fatalf("attribute %d: flags %#x, want %#x", i, flags, wantFlags)
		}
		if a.op == opEnum {
			if attrData[0] != a.elem || attrData[1] != 0 {
				t.Fatalf("attribute %d: enum_data %x, want elem_id %d and reserved 0", i, attrData, a.elem)
			}
		} else if attrData[0] != 0 || attrData[1] != 0 {
			t.Fatalf("attribute %d: attr_data.reserved %x, want 0", i, attrData)
		}
		wantLen := len(a.buf)
		switch a.op {
		case opInUint:
			wantLen = a.size
		case opHandle, opNewHandle, opFD:
			wantLen = 0
		}
		if n != wantLen {
			t.Fatalf("attribute %d: len %d, want %d", i, n, wantLen)
		}
		switch {
		case a.op == opInUint || a.op == opHandle || a.op == opNewHandle || a.op == opFD:
			if data != a.value {
				t.Fatalf("attribute %d: data %#x, want %#x", i, data, a.value)
			}
		case a.op != opOut && n <= 8:
			var inline [8]byte
			copy(inline[:], a.orig)
			if data != le.Uint64(inline[:]) {
				t.Fatalf("attribute %d: inline data %#x, want the %d bytes %x", i, data, n, a.orig)
			}
			if at[i] != nil {
				t.Fatalf("attribute %d: inline data also has a buffer", i)
			}
		case n == 0: // an empty Out
			if data != 0 {
				t.Fatalf("attribute %d: an empty Out buffer with pointer %#x", i, data)
			}
		default: // by pointer
			if len(at[i]) != n || data != uint64(PointerTo(at[i])) {
				t.Fatalf("attribute %d: pointer %#x to %d bytes, want the kernel's copy", i, data, n)
			}
			inBlock := data >= base && data < end
			if inBlock && (data%8 != 0 || data < base+uint64(length) || data+uint64(n) > end) {
				t.Fatalf("attribute %d: %d bytes at block offset %d: unaligned, over the attributes or past the %d-byte block", i, n, data-base, len(mem))
			}
			if !inBlock && data+uint64(n) > base && data < end {
				t.Fatalf("attribute %d: a copy outside the block overlaps it", i)
			}
			if !bytes.Equal(at[i], a.orig) {
				t.Fatalf("attribute %d: the kernel's copy differs from the caller's bytes", i)
			}
			regions = append(regions, region{data, data + uint64(n)})
		}
	}
	slices.SortFunc(regions, func(a, b region) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	for i := 1; i < len(regions); i++ {
		if regions[i].start < regions[i-1].end {
			t.Fatalf("buffers overlap: [%#x, %#x) and [%#x, %#x)", regions[i-1].start, regions[i-1].end, regions[i].start, regions[i].end)
		}
	}
}
