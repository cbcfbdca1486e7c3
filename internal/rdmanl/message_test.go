package rdmanl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/netlink"
)

func littleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the expected bytes are written for a little-endian host")
	}
}

func TestRequestBytes(t *testing.T) {
	littleEndian(t)
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{
			name: "NEWLINK",
			got:  newLinkRequest(0x01020304, "rxe0", "rxe", "eth0"),
			want: []byte{
				// nlmsghdr: len 48, type 5<<10|3 = 0x1403,
				// flags REQUEST|ACK = 0x5 (no EXCL: it would read as a dump), seq, pid 0
				48, 0, 0, 0, 0x03, 0x14, 0x05, 0x00,
				0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0,
				// DEV_NAME "rxe0\0": len 9, type 2, 3 bytes of padding
				9, 0, 2, 0, 'r', 'x', 'e', '0', 0, 0, 0, 0,
				// LINK_TYPE "rxe\0": len 8, type 65, no padding
				8, 0, 65, 0, 'r', 'x', 'e', 0,
				// NDEV_NAME "eth0\0": len 9, type 51, 3 bytes of padding
				9, 0, 51, 0, 'e', 't', 'h', '0', 0, 0, 0, 0,
			},
		},
		{
			name: "NEWLINK long names",
			got:  newLinkRequest(7, "rxetest", "siw", "veth10"),
			want: []byte{
				48, 0, 0, 0, 0x03, 0x14, 0x05, 0x00,
				7, 0, 0, 0, 0, 0, 0, 0,
				// "rxetest\0": len 12, no padding
				12, 0, 2, 0, 'r', 'x', 'e', 't', 'e', 's', 't', 0,
				8, 0, 65, 0, 's', 'i', 'w', 0,
				// "veth10\0": len 11, 1 byte of padding
				11, 0, 51, 0, 'v', 'e', 't', 'h', '1', '0', 0, 0,
			},
		},
		{
			name: "DELLINK",
			got:  delLinkRequest(9, 3),
			want: []byte{
				// len 24, type 0x1404, flags REQUEST|ACK
				24, 0, 0, 0, 0x04, 0x14, 0x05, 0x00,
				9, 0, 0, 0, 0, 0, 0, 0,
				// DEV_INDEX u32 3
				8, 0, 1, 0, 3, 0, 0, 0,
			},
		},
		{
			name: "GET dump",
			got:  getDumpRequest(1),
			want: []byte{
				// len 16, type 0x1401, flags REQUEST|ROOT|MATCH
				16, 0, 0, 0, 0x01, 0x14, 0x01, 0x03,
				1, 0, 0, 0, 0, 0, 0, 0,
			},
		},
		{
			name: "PORT_GET dump",
			got:  portDumpRequest(2, 0x11223344),
			want: []byte{
				24, 0, 0, 0, 0x05, 0x14, 0x01, 0x03,
				2, 0, 0, 0, 0, 0, 0, 0,
				8, 0, 1, 0, 0x44, 0x33, 0x22, 0x11,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("request bytes mismatch (-want +got):\n%s", diff)
			}
			if len(tt.got)%4 != 0 {
				t.Errorf("request length %d is not 4-byte aligned", len(tt.got))
			}
		})
	}
}

// msgBuilder builds reply datagrams the way the kernel lays them out.
type msgBuilder struct{ b []byte }

func (mb *msgBuilder) msg(typ, flags uint16, seq, pid uint32, payload []byte) *msgBuilder {
	ne := binary.NativeEndian
	n := netlink.HeaderLen + len(payload)
	mb.b = ne.AppendUint32(mb.b, uint32(n))
	mb.b = ne.AppendUint16(mb.b, typ)
	mb.b = ne.AppendUint16(mb.b, flags)
	mb.b = ne.AppendUint32(mb.b, seq)
	mb.b = ne.AppendUint32(mb.b, pid)
	mb.b = append(mb.b, payload...)
	for len(mb.b)%4 != 0 {
		mb.b = append(mb.b, 0)
	}
	return mb
}

// attrs encodes attributes with the production encoder, minus its header.
type attrList struct{ e netlink.Encoder }

func (a *attrList) str(typ uint16, s string) *attrList { a.e.String(typ, s); return a }
func (a *attrList) u8(typ uint16, v uint8) *attrList   { a.e.Attr(typ, []byte{v}); return a }
func (a *attrList) u32(typ uint16, v uint32) *attrList { a.e.Uint32(typ, v); return a }
func (a *attrList) u64(typ uint16, v uint64) *attrList {
	a.e.Attr(typ, binary.NativeEndian.AppendUint64(nil, v))
	return a
}
func (a *attrList) raw(typ uint16, b []byte) *attrList { a.e.Attr(typ, b); return a }
func (a *attrList) bytes() []byte                      { return a.e.Bytes() }

func errPayload(code int32, echoed []byte, tlvs []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(code))
	b = append(b, echoed...)
	return append(b, tlvs...)
}

const (
	testSeq = 1000
	testPID = 4242
)

// deviceDump is a GET dump reply for two devices, as two datagrams' worth
// of messages in one buffer, ending in NLMSG_DONE.
func deviceDump() []byte {
	rxe0 := new(attrList).
		u32(attrDevIndex, 1).str(attrDevName, "rxe0").u32(attrPortIndex, 1).
		u64(4 /* CAP_FLAGS */, 0x1234).str(attrFWVersion, "").
		u64(attrNodeGUID, 0x505400fffe123456).u64(attrSysImageGUID, 0x505400fffe123456).
		u8(attrDevNodeType, 1).str(attrDevProtocol, "roce").bytes()
	// A device without FW_VERSION, with a PAD attribute and an attribute
	// this package does not know; the NESTED flag bit must be ignored.
	mlx := new(attrList).
		raw(0 /* PAD */, nil).u32(attrDevIndex, 7).str(attrDevName, "mlx5_0").
		u32(attrPortIndex, 2).u64(attrNodeGUID, 0x0002c90300a0b0c0).
		u8(attrDevNodeType, 1).raw(1<<15|99, []byte{1, 2, 3}).str(attrDevProtocol, "ib").bytes()
	mb := new(msgBuilder).
		msg(nldevType(cmdGet), netlink.FlagMulti, testSeq, testPID, rxe0).
		msg(nldevType(cmdGet), netlink.FlagMulti, testSeq, testPID, mlx).
		msg(netlink.TypeDone, netlink.FlagMulti, testSeq, testPID, []byte{0, 0, 0, 0})
	return mb.b
}

func TestParseDeviceDump(t *testing.T) {
	msgs, err := netlink.ParseMessages(deviceDump())
	if err != nil {
		t.Fatal(err)
	}
	x := netlink.Exchange{Dump: true, Seq: testSeq, PID: testPID}
	done, err := x.Handle(msgs)
	if err != nil || !done {
		t.Fatalf("handle = %v, %v; want done", done, err)
	}
	var got []Device
	for _, m := range x.Replies {
		d, err := parseDevice(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	want := []Device{
		{Index: 1, Name: "rxe0", PortCount: 1, NodeGUID: 0x505400fffe123456,
			SysImageGUID: 0x505400fffe123456, NodeType: 1, Protocol: "roce"},
		{Index: 7, Name: "mlx5_0", PortCount: 2, NodeGUID: 0x0002c90300a0b0c0,
			NodeType: 1, Protocol: "ib"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices mismatch (-want +got):\n%s", diff)
	}
}

func TestParseLink(t *testing.T) {
	tests := []struct {
		name  string
		attrs []byte
		want  Link
	}{
		{
			name: "rxe",
			attrs: new(attrList).u32(attrDevIndex, 1).str(attrDevName, "rxe0").
				u32(attrPortIndex, 1).u64(4, 0x10000).u8(attrPortState, 4).
				u8(attrPortPhysState, 5).u32(attrNdevIndex, 3).str(attrNdevName, "veth0").bytes(),
			want: Link{DevIndex: 1, DevName: "rxe0", Port: 1, State: 4, PhysState: 5,
				NetdevIndex: 3, Netdev: "veth0"},
		},
		{
			name: "IB port without netdev",
			attrs: new(attrList).u32(attrDevIndex, 2).str(attrDevName, "mlx5_0").
				u32(attrPortIndex, 2).u64(8 /* SUBNET_PREFIX */, 0xfe80<<48).
				u32(9 /* LID */, 5).u32(10 /* SM_LID */, 1).u8(11 /* LMC */, 0).
				u8(attrPortState, 1).u8(attrPortPhysState, 3).bytes(),
			want: Link{DevIndex: 2, DevName: "mlx5_0", Port: 2, State: 1, PhysState: 3},
		},
		{
			name:  "empty",
			attrs: nil,
			want:  Link{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLink(tt.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("link mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAttrErrors(t *testing.T) {
	tests := []struct {
		name  string
		attrs []byte
	}{
		{"u32 too short", new(attrList).raw(attrDevIndex, []byte{1, 2}).bytes()},
		{"u64 too long", new(attrList).raw(attrNodeGUID, make([]byte, 12)).bytes()},
		{"u8 empty", new(attrList).raw(attrDevNodeType, nil).bytes()},
		{"length below header", []byte{2, 0, 1, 0}},
		{"length past end", []byte{200, 0, 1, 0, 0, 0, 0, 0}},
		{"trailing bytes", []byte{4, 0, 1, 0, 9, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseDevice(tt.attrs); err == nil {
				t.Error("parseDevice succeeded, want an error")
			}
			if tt.name != "u64 too long" && tt.name != "u8 empty" {
				if _, err := parseLink(tt.attrs); err == nil {
					t.Error("parseLink succeeded, want an error")
				}
			}
		})
	}
}

func TestParseMessagesErrors(t *testing.T) {
	good := new(msgBuilder).msg(netlink.TypeDone, 0, 1, 1, []byte{0, 0, 0, 0}).b
	tests := []struct {
		name string
		b    []byte
		n    int // messages parsed before the error
	}{
		{"short header", good[:10], 0},
		{"length below header", append([]byte{8, 0, 0, 0}, good[4:]...), 0},
		{"length past end", append([]byte{200, 0, 0, 0}, good[4:]...), 0},
		{"trailing garbage", append(append([]byte{}, good...), 1, 2, 3), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, err := netlink.ParseMessages(tt.b)
			if !errors.Is(err, netlink.ErrShort) {
				t.Errorf("err = %v, want netlink.ErrShort", err)
			}
			if len(msgs) != tt.n {
				t.Errorf("parsed %d messages before the error, want %d", len(msgs), tt.n)
			}
		})
	}
	// The last message may omit its padding.
	unpadded := new(msgBuilder).msg(netlink.TypeError, 0, 1, 1, []byte{0, 0, 0, 0, 7}).b
	msgs, err := netlink.ParseMessages(unpadded[:netlink.HeaderLen+5])
	if err != nil || len(msgs) != 1 || len(msgs[0].Data) != 5 {
		t.Errorf("unpadded message: %d messages, err %v", len(msgs), err)
	}
}

func TestParseError(t *testing.T) {
	echoedHdr := new(msgBuilder).msg(nldevType(cmdNewLink), netlink.FlagRequest|netlink.FlagAck, testSeq, 0, nil).b
	echoedFull := newLinkRequest(testSeq, "rxe0", "rxe", "eth0")
	tlvs := new(attrList).str(netlink.AttrExtAckMsg, "Unknown device type").u32(2 /* OFFS */, 20).bytes()
	tests := []struct {
		name  string
		flags uint16
		data  []byte
		want  netlink.KernelError
	}{
		{"ACK", netlink.FlagCapped, errPayload(0, echoedHdr, nil), netlink.KernelError{}},
		{"errno capped", netlink.FlagCapped, errPayload(-17, echoedHdr, nil), netlink.KernelError{Errno: syscall.EEXIST}},
		{"errno with request echoed", 0, errPayload(-19, echoedFull, nil), netlink.KernelError{Errno: syscall.ENODEV}},
		{"ext ack capped", netlink.FlagCapped | netlink.FlagAckTLVs, errPayload(-22, echoedHdr, tlvs),
			netlink.KernelError{Errno: syscall.EINVAL, Message: "Unknown device type"}},
		{"ext ack after echoed request", netlink.FlagAckTLVs, errPayload(-22, echoedFull, tlvs),
			netlink.KernelError{Errno: syscall.EINVAL, Message: "Unknown device type"}},
		{"ext ack cut short", netlink.FlagCapped | netlink.FlagAckTLVs, errPayload(-1, echoedHdr[:8], nil),
			netlink.KernelError{Errno: syscall.EPERM}},
		{"echoed length lies", netlink.FlagAckTLVs, errPayload(-1, append([]byte{255, 255, 0, 0}, echoedFull[4:]...), tlvs),
			netlink.KernelError{Errno: syscall.EPERM}},
		{"positive code", netlink.FlagCapped, errPayload(5, echoedHdr, nil), netlink.KernelError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := netlink.Message{Header: netlink.Header{Type: netlink.TypeError, Flags: tt.flags}, Data: tt.data}
			got, err := netlink.ParseError(m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseError mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := netlink.ParseError(netlink.Message{Data: []byte{1, 2}}); !errors.Is(err, netlink.ErrShort) {
		t.Errorf("short NLMSG_ERROR: err = %v, want netlink.ErrShort", err)
	}
}

func TestExchange(t *testing.T) {
	reply := new(attrList).u32(attrDevIndex, 1).str(attrDevName, "rxe0").bytes()
	ackPayload := errPayload(0, make([]byte, netlink.HeaderLen), nil)
	eexist := errPayload(-17, make([]byte, netlink.HeaderLen),
		new(attrList).str(netlink.AttrExtAckMsg, "already configured").bytes())
	tests := []struct {
		name     string
		dump     bool
		datagram []*msgBuilder
		replies  int
		done     bool
		err      error
		errText  string
	}{
		{
			name:     "ACK ends a plain request",
			datagram: []*msgBuilder{new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped, testSeq, testPID, ackPayload)},
			done:     true,
		},
		{
			name: "kernel error with ext ack",
			datagram: []*msgBuilder{new(msgBuilder).
				msg(netlink.TypeError, netlink.FlagCapped|netlink.FlagAckTLVs, testSeq, testPID, eexist)},
			err:     syscall.EEXIST,
			errText: "already configured",
		},
		{
			name: "stale replies are dropped",
			datagram: []*msgBuilder{
				new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped, testSeq-1, testPID, eexist),
				new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped, testSeq, testPID, ackPayload),
			},
			done: true,
		},
		{
			name:     "future sequence number",
			datagram: []*msgBuilder{new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped, testSeq+1, testPID, ackPayload)},
			errText:  "sequence number",
		},
		{
			name:     "wrong port id",
			datagram: []*msgBuilder{new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped, testSeq, testPID+1, ackPayload)},
			errText:  "port id",
		},
		{
			name: "dump across datagrams",
			dump: true,
			datagram: []*msgBuilder{
				new(msgBuilder).msg(nldevType(cmdGet), netlink.FlagMulti, testSeq, testPID, reply).
					msg(netlink.TypeNoop, 0, testSeq, testPID, nil),
				new(msgBuilder).msg(nldevType(cmdGet), netlink.FlagMulti, testSeq, testPID, reply),
				new(msgBuilder).msg(netlink.TypeDone, netlink.FlagMulti, testSeq, testPID, []byte{0, 0, 0, 0}),
			},
			replies: 2,
			done:    true,
		},
		{
			name: "dump failing in NLMSG_DONE",
			dump: true,
			datagram: []*msgBuilder{new(msgBuilder).
				msg(netlink.TypeDone, netlink.FlagMulti, testSeq, testPID, errPayload(-22, nil, nil))},
			err: syscall.EINVAL,
		},
		{
			name: "dump failing in NLMSG_DONE with ext ack",
			dump: true,
			datagram: []*msgBuilder{new(msgBuilder).msg(netlink.TypeDone, netlink.FlagMulti|netlink.FlagAckTLVs, testSeq, testPID,
				errPayload(-22, nil, new(attrList).str(netlink.AttrExtAckMsg, "bad index").bytes()))},
			err:     syscall.EINVAL,
			errText: "bad index",
		},
		{
			name: "dump interrupted",
			dump: true,
			datagram: []*msgBuilder{new(msgBuilder).
				msg(nldevType(cmdGet), netlink.FlagMulti|netlink.FlagDumpIntr, testSeq, testPID, reply)},
			err: syscall.EINTR,
		},
		{
			name: "overrun",
			dump: true,
			datagram: []*msgBuilder{new(msgBuilder).
				msg(netlink.TypeOverrun, 0, testSeq, testPID, nil)},
			err: syscall.ENOBUFS,
		},
		{
			name: "dump not finished",
			dump: true,
			datagram: []*msgBuilder{new(msgBuilder).
				msg(nldevType(cmdGet), netlink.FlagMulti, testSeq, testPID, reply)},
			replies: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := netlink.Exchange{Dump: tt.dump, Seq: testSeq, PID: testPID}
			var (
				done bool
				err  error
			)
			for _, d := range tt.datagram {
				msgs, perr := netlink.ParseMessages(d.b)
				if perr != nil {
					t.Fatal(perr)
				}
				done, err = x.Handle(msgs)
				if done || err != nil {
					break
				}
			}
			if done != tt.done {
				t.Errorf("done = %v, want %v", done, tt.done)
			}
			if len(x.Replies) != tt.replies {
				t.Errorf("%d replies, want %d", len(x.Replies), tt.replies)
			}
			switch {
			case tt.err == nil && tt.errText == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Errorf("err = %v, want %v", err, tt.err)
			case tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)):
				t.Errorf("err = %v, want it to mention %q", err, tt.errText)
			}
		})
	}
}

func TestStateNames(t *testing.T) {
	tests := []struct {
		state, phys uint8
		want, wantP string
	}{
		{0, 0, "NOP", "NOP"},
		{1, 3, "DOWN", "DISABLED"},
		{2, 2, "INIT", "POLLING"},
		{3, 1, "ARMED", "SLEEP"},
		{4, 5, "ACTIVE", "LINK_UP"},
		{5, 6, "ACTIVE_DEFER", "LINK_ERROR_RECOVER"},
		{6, 7, "UNKNOWN", "PHY_TEST"},
		{255, 9, "UNKNOWN", "OPA_OFFLINE"},
		{4, 11, "ACTIVE", "OPA_TEST"},
		{4, 12, "ACTIVE", "UNKNOWN"},
	}
	for _, tt := range tests {
		l := Link{State: tt.state, PhysState: tt.phys}
		if got := l.StateName(); got != tt.want {
			t.Errorf("StateName(%d) = %q, want %q", tt.state, got, tt.want)
		}
		if got := l.PhysStateName(); got != tt.wantP {
			t.Errorf("PhysStateName(%d) = %q, want %q", tt.phys, got, tt.wantP)
		}
	}
}

func TestOpError(t *testing.T) {
	err := error(&OpError{Op: "NEWLINK", Device: "rxe0", Err: syscall.EEXIST, Message: "already configured"})
	if !errors.Is(err, syscall.EEXIST) {
		t.Errorf("errors.Is(%v, EEXIST) = false", err)
	}
	for _, s := range []string{"rdma netlink NEWLINK rxe0", "file exists", "already configured"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not mention %q", err, s)
		}
	}
	missing := error(&OpError{Op: "DELLINK", Device: "rxe9", Err: ErrNoDevice})
	if !errors.Is(missing, os.ErrNotExist) {
		t.Errorf("errors.Is(%v, os.ErrNotExist) = false", missing)
	}
	if want := "rdma netlink DELLINK rxe9: no such RDMA device"; missing.Error() != want {
		t.Errorf("missing device error = %q, want %q", missing, want)
	}
	if got := (&OpError{Op: "GET"}).Error(); got != "rdma netlink GET: unknown error" {
		t.Errorf("empty OpError = %q", got)
	}
}

func FuzzParseMessages(f *testing.F) {
	f.Add(deviceDump())
	f.Add(newLinkRequest(1, "rxe0", "rxe", "eth0"))
	f.Add(new(msgBuilder).msg(netlink.TypeError, netlink.FlagCapped|netlink.FlagAckTLVs, 1, 1,
		errPayload(-22, make([]byte, netlink.HeaderLen), new(attrList).str(netlink.AttrExtAckMsg, "msg").bytes())).b)
	f.Add(new(msgBuilder).msg(netlink.TypeError, netlink.FlagAckTLVs, 1, 1,
		errPayload(-22, newLinkRequest(1, "a", "b", "c"), new(attrList).str(netlink.AttrExtAckMsg, "msg").bytes())).b)
	f.Add(new(msgBuilder).msg(netlink.TypeDone, netlink.FlagAckTLVs, 1, 1, errPayload(-1, nil, nil)).b)
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := netlink.ParseMessages(b)
		x := netlink.Exchange{Dump: true, Seq: 1, PID: 1}
		x.Handle(msgs)
		for _, m := range msgs {
			netlink.ParseError(m)
			netlink.ParseDone(m)
			parseDevice(m.Data)
			parseLink(m.Data)
			if m.Header.Len < netlink.HeaderLen || int(m.Header.Len)-netlink.HeaderLen != len(m.Data) {
				t.Fatalf("message length %d with %d payload bytes", m.Header.Len, len(m.Data))
			}
		}
	})
}
