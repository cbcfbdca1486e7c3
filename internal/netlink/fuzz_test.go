package netlink

import (
	"bytes"
	"encoding/binary"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// within reports whether sub lies inside b's memory.
func within(sub, b []byte) bool {
	if len(sub) == 0 {
		return true
	}
	if len(b) == 0 {
		return false
	}
	s, e := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b))
	p := uintptr(unsafe.Pointer(&sub[0]))
	return p >= s && p+uintptr(len(sub)) <= e
}

// FuzzParseAttrs: the attribute walker takes any bytes without panicking;
// each attribute it returns views the input, with the flag bits cleared
// from its type, and capacity limited to its own bytes (so appending
// cannot overwrite the next one); what it parses completely encodes back
// to the same bytes, up to the padding and the flag bits; and any list
// of attributes encoded by the request encoder parses back to itself.
func FuzzParseAttrs(f *testing.F) {
	var e1, e2 Encoder
	e1.Uint32(1, 1)
	e1.String(2, "rxe0")
	f.Add(e1.Bytes())
	e2.Attr(2|0x8000, []byte("nested"))
	e2.Attr(12, []byte{4})
	f.Add(e2.Bytes()[:21])    // last one unpadded
	f.Add([]byte{4, 0, 1, 0}) // an empty attribute
	f.Add([]byte{3, 0, 1, 0}) // shorter than its header
	f.Add([]byte{0xff, 0xff, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs, err := ParseAttrs(b)
		var e Encoder
		for i, a := range attrs {
			if !within(a.Data, b) || cap(a.Data) != len(a.Data) {
				t.Fatalf("attribute %d: data outside the input or with spare capacity", i)
			}
			if a.Type&^AttrTypeMask != 0 {
				t.Fatalf("attribute %d: type %#x keeps flag bits", i, a.Type)
			}
			e.Attr(a.Type, a.Data)
		}
		if err == nil {
			if len(e.Bytes()) != Align(len(b)) {
				t.Fatalf("%d bytes parse to %d attributes that encode to %d bytes", len(b), len(attrs), len(e.Bytes()))
			}
			for off := 0; off < len(b); {
				n := int(binary.NativeEndian.Uint16(b[off:]))
				if !bytes.Equal(e.Bytes()[off:off+2], b[off:off+2]) ||
					binary.NativeEndian.Uint16(e.Bytes()[off+2:])&AttrTypeMask != binary.NativeEndian.Uint16(b[off+2:])&AttrTypeMask ||
					!bytes.Equal(e.Bytes()[off+AttrHeaderLen:off+n], b[off+AttrHeaderLen:off+n]) {
					t.Fatalf("attribute at %d encodes back differently:\n%x\n%x", off, b, e.Bytes())
				}
				off += Align(n)
			}
		}

		// The other direction: the same bytes read as a list to encode.
		var want []Attr
		var enc Encoder
		for r := b; len(r) >= 3; {
			typ := binary.NativeEndian.Uint16(r) & AttrTypeMask
			n := min(int(r[2]), len(r)-3)
			want = append(want, Attr{Type: typ, Data: r[3 : 3+n]})
			enc.Attr(typ, r[3:3+n])
			r = r[3+n:]
		}
		got, err := ParseAttrs(enc.Bytes())
		if err != nil {
			t.Fatalf("parsing encoded attributes: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d attributes encoded, %d parsed", len(want), len(got))
		}
		for i := range want {
			if got[i].Type != want[i].Type || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("attribute %d: encoded %d %x, parsed %d %x", i, want[i].Type, want[i].Data, got[i].Type, got[i].Data)
			}
		}
	})
}

// FuzzParseError: NLMSG_ERROR and NLMSG_DONE payloads decode without
// panicking, negative codes to their errno and others to none, and the
// extended ACK message, when one is found, is text without NULs or
// surrounding space. A kernel error built with a message decodes to that
// message, whether the request is echoed in full or capped.
func FuzzParseError(f *testing.F) {
	f.Add(int32(-22), []byte("rxe0: bad name"), []byte{})
	f.Add(int32(-17), []byte(" exists \x00tail"), func() []byte {
		e := NewRequest(5<<10+3, FlagRequest|FlagAck, 1)
		e.String(2, "rxe0")
		return e.Finish()
	}())
	f.Add(int32(0), []byte{}, []byte{1, 2, 3})
	f.Add(int32(5), []byte("x"), make([]byte, HeaderLen))
	f.Fuzz(func(t *testing.T, code int32, msg, echoed []byte) {
		if len(msg) > 1024 || len(echoed) > 1024 {
			return
		}
		if len(echoed) >= HeaderLen {
			binary.NativeEndian.PutUint32(echoed, uint32(len(echoed)))
		}
		var tl Encoder
		tl.Attr(AttrExtAckMsg, append(bytes.Clone(msg), 0))
		tlvs := tl.Bytes()
		wantErrno := syscall.Errno(0)
		if code < 0 {
			wantErrno = syscall.Errno(-int64(code))
		}
		wantMsg, _, _ := strings.Cut(string(msg), "\x00")
		wantMsg = strings.TrimSpace(wantMsg)
		for _, flags := range []uint16{FlagAckTLVs, FlagAckTLVs | FlagCapped, 0} {
			payload := errPayload(code, echoed, tlvs)
			if flags&FlagCapped != 0 {
				hdr := make([]byte, HeaderLen)
				copy(hdr, echoed)
				payload = errPayload(code, hdr, tlvs)
			} else if len(echoed) < HeaderLen || len(echoed)%4 != 0 {
				continue // not a request the kernel could echo
			}
			ke, err := ParseError(Message{Header: Header{Type: TypeError, Flags: flags}, Data: payload})
			if err != nil {
				t.Fatalf("flags %#x: %v", flags, err)
			}
			if ke.Errno != wantErrno {
				t.Fatalf("flags %#x: errno %d, want %d", flags, ke.Errno, wantErrno)
			}
			if want := map[bool]string{true: wantMsg}[flags != 0]; ke.Message != want {
				t.Fatalf("flags %#x: message %q, want %q", flags, ke.Message, want)
			}
		}
		// Arbitrary payloads: no panic, and a sane message.
		raw := append(binary.NativeEndian.AppendUint32(nil, uint32(code)), append(echoed, msg...)...)
		for _, flags := range []uint16{0, FlagAckTLVs, FlagAckTLVs | FlagCapped} {
			m := Message{Header: Header{Flags: flags}, Data: raw}
			ke, _ := ParseError(m)
			kd := ParseDone(m)
			for _, s := range []string{ke.Message, kd.Message} {
				if strings.ContainsRune(s, 0) || s != strings.TrimSpace(s) {
					t.Fatalf("message %q", s)
				}
			}
			if ke.Errno != wantErrno || kd.Errno != wantErrno {
				t.Fatalf("errno %d and %d from code %d", ke.Errno, kd.Errno, code)
			}
			_ = ke.Error()
		}
	})
}

func errPayload(code int32, echoed []byte, tlvs []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(code))
	b = append(b, echoed...)
	return append(b, tlvs...)
}
