package rdmanl

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/netlink"
)

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
	attrs, err := netlink.ParseAttrs(b)
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
	var e netlink.Encoder
	for _, f := range fields {
		switch v := vals[f.typ].(type) {
		case string:
			e.String(f.typ, v)
		case uint64:
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			e.Attr(f.typ, b[:f.size])
		}
	}
	return e.Bytes()
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
