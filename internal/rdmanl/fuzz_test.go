package rdmanl

import (
	"bytes"
	"encoding/binary"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
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
	f.Add(new(attrList).u32(attrDevIndex, 1).str(attrDevName, "rxe0").bytes())
	f.Add(new(attrList).raw(attrDevName|0x8000, []byte("nested")).u8(attrPortState, 4).bytes()[:21]) // last one unpadded
	f.Add([]byte{4, 0, 1, 0})                                                                        // an empty attribute
	f.Add([]byte{3, 0, 1, 0})                                                                        // shorter than its header
	f.Add([]byte{0xff, 0xff, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs, err := parseAttrs(b)
		var e encoder
		for i, a := range attrs {
			if !within(a.Data, b) || cap(a.Data) != len(a.Data) {
				t.Fatalf("attribute %d: data outside the input or with spare capacity", i)
			}
			if a.Type&^attrTypeMask != 0 {
				t.Fatalf("attribute %d: type %#x keeps flag bits", i, a.Type)
			}
			e.attr(a.Type, a.Data)
		}
		if err == nil {
			if len(e.b) != align(len(b)) {
				t.Fatalf("%d bytes parse to %d attributes that encode to %d bytes", len(b), len(attrs), len(e.b))
			}
			for off := 0; off < len(b); {
				n := int(binary.NativeEndian.Uint16(b[off:]))
				if !bytes.Equal(e.b[off:off+2], b[off:off+2]) ||
					binary.NativeEndian.Uint16(e.b[off+2:])&attrTypeMask != binary.NativeEndian.Uint16(b[off+2:])&attrTypeMask ||
					!bytes.Equal(e.b[off+attrHdr:off+n], b[off+attrHdr:off+n]) {
					t.Fatalf("attribute at %d encodes back differently:\n%x\n%x", off, b, e.b)
				}
				off += align(n)
			}
		}

		// The other direction: the same bytes read as a list to encode.
		var want []attr
		var enc encoder
		for r := b; len(r) >= 3; {
			typ := binary.NativeEndian.Uint16(r) & attrTypeMask
			n := min(int(r[2]), len(r)-3)
			want = append(want, attr{Type: typ, Data: r[3 : 3+n]})
			enc.attr(typ, r[3:3+n])
			r = r[3+n:]
		}
		got, err := parseAttrs(enc.b)
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

// The reply attributes, by kind, as a reference for the decoders.
type replyField struct {
	typ  uint16
	size int // 1, 4 or 8 for integers, 0 for a string
}

var (
	deviceFields = []replyField{{attrDevIndex, 4}, {attrDevName, 0}, {attrPortIndex, 4}, {attrFWVersion, 0},
		{attrNodeGUID, 8}, {attrSysImageGUID, 8}, {attrDevNodeType, 1}, {attrDevProtocol, 0}}
	linkFields = []replyField{{attrDevIndex, 4}, {attrDevName, 0}, {attrPortIndex, 4}, {attrPortState, 1},
		{attrPortPhysState, 1}, {attrNdevIndex, 4}, {attrNdevName, 0}}
	chardevFields = []replyField{{attrChardevName, 0}, {attrChardevABI, 8}, {attrChardev, 8}, {attrUverbsDriver, 4}}
	systemFields  = []replyField{{attrSysCopyOnFork, 1}}
)

// referenceDecode decodes attribute bytes the way the nldev replies are
// specified: the last attribute of a known type wins, an integer must
// have its exact size, a string ends at its first NUL, unknown types are
// skipped. It returns each known type's value (uint64 or string).
func referenceDecode(b []byte, fields []replyField) (map[uint16]any, bool) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return nil, false
	}
	vals := map[uint16]any{}
	for _, a := range attrs {
		for _, f := range fields {
			if f.typ != a.Type {
				continue
			}
			if f.size == 0 {
				s, _, _ := strings.Cut(string(a.Data), "\x00")
				vals[f.typ] = s
				continue
			}
			if len(a.Data) != f.size {
				return nil, false
			}
			var v [8]byte
			copy(v[:], a.Data)
			vals[f.typ] = binary.LittleEndian.Uint64(v[:]) // the host is little-endian: littleEndian skips otherwise
		}
	}
	return vals, true
}

// encodeFields encodes vals as a reply's attributes.
func encodeFields(vals map[uint16]any, fields []replyField) []byte {
	var e encoder
	for _, f := range fields {
		switch v := vals[f.typ].(type) {
		case string:
			e.string(f.typ, v)
		case uint64:
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			e.attr(f.typ, b[:f.size])
		}
	}
	return e.b
}

func str(vals map[uint16]any, typ uint16) string {
	s, _ := vals[typ].(string)
	return s
}

func num(vals map[uint16]any, typ uint16) uint64 {
	v, _ := vals[typ].(uint64)
	return v
}

// FuzzParseReplies: the decoders of the device, port, character device
// and system replies agree with a table-driven reference decoder on
// every input (accepting the same ones, with the same values), and what
// they decode encodes to attributes that decode to the same again.
func FuzzParseReplies(f *testing.F) {
	f.Add(new(attrList).u32(attrDevIndex, 1).str(attrDevName, "rxe0").u32(attrPortIndex, 1).
		u64(attrNodeGUID, 0x505400fffe123456).u8(attrDevNodeType, 1).str(attrDevProtocol, "roce").bytes())
	f.Add(new(attrList).u32(attrDevIndex, 2).str(attrDevName, "rxe1").u32(attrPortIndex, 1).u8(attrPortState, 4).
		u8(attrPortPhysState, 5).u32(attrNdevIndex, 3).str(attrNdevName, "veth1").bytes())
	f.Add(new(attrList).str(attrChardevName, "uverbs0").u64(attrChardevABI, 6).u64(attrChardev, 231<<8|192).
		u32(attrUverbsDriver, 14).str(attrChardevType, "uverbs").bytes())
	f.Add(new(attrList).u8(attrSysCopyOnFork, 1).bytes())
	f.Add(new(attrList).u32(attrDevIndex, 1).raw(attrNodeGUID, []byte{1, 2, 3, 4}).bytes()) // a GUID of 4 bytes
	f.Fuzz(func(t *testing.T, b []byte) {
		littleEndian(t)
		type decoder struct {
			name   string
			fields []replyField
			decode func([]byte) (any, error)
			want   func(map[uint16]any) any
		}
		decoders := []decoder{
			{"device", deviceFields, func(b []byte) (any, error) { return parseDevice(b) }, func(v map[uint16]any) any {
				return Device{Index: uint32(num(v, attrDevIndex)), Name: str(v, attrDevName), PortCount: uint32(num(v, attrPortIndex)),
					FWVersion: str(v, attrFWVersion), NodeGUID: num(v, attrNodeGUID), SysImageGUID: num(v, attrSysImageGUID),
					NodeType: uint8(num(v, attrDevNodeType)), Protocol: str(v, attrDevProtocol)}
			}},
			{"link", linkFields, func(b []byte) (any, error) { return parseLink(b) }, func(v map[uint16]any) any {
				return Link{DevIndex: uint32(num(v, attrDevIndex)), DevName: str(v, attrDevName), Port: uint32(num(v, attrPortIndex)),
					State: uint8(num(v, attrPortState)), PhysState: uint8(num(v, attrPortPhysState)),
					NetdevIndex: uint32(num(v, attrNdevIndex)), Netdev: str(v, attrNdevName)}
			}},
			{"chardev", chardevFields, func(b []byte) (any, error) { return parseChardev(b) }, func(v map[uint16]any) any {
				return Chardev{Name: str(v, attrChardevName), ABI: num(v, attrChardevABI), Dev: num(v, attrChardev),
					DriverID: uint32(num(v, attrUverbsDriver))}
			}},
			{"system", systemFields, func(b []byte) (any, error) { return parseSystem(b) }, func(v map[uint16]any) any {
				return System{CopyOnFork: num(v, attrSysCopyOnFork) != 0}
			}},
		}
		for _, d := range decoders {
			got, err := d.decode(b)
			vals, ok := referenceDecode(b, d.fields)
			if (err == nil) != ok {
				t.Fatalf("%s: decoder error %v, reference accepts: %v", d.name, err, ok)
			}
			if !ok {
				continue
			}
			if diff := cmp.Diff(d.want(vals), got); diff != "" {
				t.Fatalf("%s: decoder and reference differ (-reference +decoder):\n%s", d.name, diff)
			}
			again, err := d.decode(encodeFields(vals, d.fields))
			if err != nil {
				t.Fatalf("%s: decoding the re-encoded reply: %v", d.name, err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Fatalf("%s: decode, encode, decode (-first +second):\n%s", d.name, diff)
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
	f.Add(int32(-17), []byte(" exists \x00tail"), newLinkRequest(1, "rxe0", "rxe", "eth0"))
	f.Add(int32(0), []byte{}, []byte{1, 2, 3})
	f.Add(int32(5), []byte("x"), make([]byte, headerLen))
	f.Fuzz(func(t *testing.T, code int32, msg, echoed []byte) {
		if len(msg) > 1024 || len(echoed) > 1024 {
			return
		}
		if len(echoed) >= headerLen {
			binary.NativeEndian.PutUint32(echoed, uint32(len(echoed)))
		}
		tlvs := new(attrList).raw(extAckMsg, append(bytes.Clone(msg), 0)).bytes()
		wantErrno := syscall.Errno(0)
		if code < 0 {
			wantErrno = syscall.Errno(-int64(code))
		}
		wantMsg, _, _ := strings.Cut(string(msg), "\x00")
		wantMsg = strings.TrimSpace(wantMsg)
		for _, flags := range []uint16{flagAckTLVs, flagAckTLVs | flagCapped, 0} {
			payload := errPayload(code, echoed, tlvs)
			if flags&flagCapped != 0 {
				hdr := make([]byte, headerLen)
				copy(hdr, echoed)
				payload = errPayload(code, hdr, tlvs)
			} else if len(echoed) < headerLen || len(echoed)%4 != 0 {
				continue // not a request the kernel could echo
			}
			ke, err := parseError(message{Header: header{Type: typeError, Flags: flags}, Data: payload})
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
		for _, flags := range []uint16{0, flagAckTLVs, flagAckTLVs | flagCapped} {
			m := message{Header: header{Flags: flags}, Data: raw}
			ke, _ := parseError(m)
			kd := parseDone(m)
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
