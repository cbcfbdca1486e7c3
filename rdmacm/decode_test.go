package rdmacm

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs"
)

func TestSockaddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []byte // the encoding, past the family
		out  string // decoded back
	}{
		{"198.18.0.1:7471", []byte{0x1d, 0x2f, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, "198.18.0.1:7471"},
		{"0.0.0.0:0", make([]byte, 14), "0.0.0.0:0"},
		{"[::ffff:10.1.2.3]:1", []byte{0, 1, 10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}, "10.1.2.3:1"},
		{"[ff0e::1]:2", append([]byte{0, 2, 0, 0, 0, 0, 0xff, 0x0e}, append(make([]byte, 13), 1, 0, 0, 0, 0)...), "[ff0e::1]:2"},
		{"[fe80::1%7]:3", append([]byte{0, 3, 0, 0, 0, 0, 0xfe, 0x80}, append(make([]byte, 13), 1, 7, 0, 0, 0)...), ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, err := encodeSockaddr(netip.MustParseAddrPort(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b[2:]); diff != "" {
				t.Errorf("encoding (-want +got):\n%s", diff)
			}
			got := decodeSockaddr(b)
			if tc.out != "" && got != netip.MustParseAddrPort(tc.out) {
				t.Errorf("decoded %v, want %v", got, tc.out)
			}
			if tc.out == "" && (got.Addr().WithZone("") != netip.MustParseAddr("fe80::1") || got.Addr().Zone() == "" || got.Port() != 3) {
				t.Errorf("decoded %v, want fe80::1 with a zone, port 3", got)
			}
		})
	}
	if _, err := encodeSockaddr(netip.AddrPort{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("encoding no address = %v, want EINVAL", err)
	}
	for _, b := range [][]byte{nil, {2}, {2, 0, 1}, {27, 0, 0, 0}, make([]byte, 128)} {
		if got := decodeSockaddr(b); got.IsValid() {
			t.Errorf("decodeSockaddr(%x) = %v, want nothing", b, got)
		}
	}
}

func FuzzDecodeSockaddr(f *testing.F) {
	for _, s := range []string{"198.18.0.1:7471", "[ff0e::1]:2", "[::]:0"} {
		b, _ := encodeSockaddr(netip.MustParseAddrPort(s))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a := decodeSockaddr(b)
		if !a.IsValid() || a.Addr().Zone() != "" {
			return
		}
		e, err := encodeSockaddr(a)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", a, err)
		}
		// IPv4-mapped addresses are encoded as IPv4.
		if got, want := decodeSockaddr(e), netip.AddrPortFrom(a.Addr().Unmap(), a.Port()); got != want {
			t.Fatalf("round trip %v -> %v, want %v", a, got, want)
		}
	})
}

// eventResp builds a kernel event response.
func eventResp(typ EventType, status int32, setup func(*abi.UCMEventResp)) *abi.UCMEventResp {
	r := &abi.UCMEventResp{Event: uint32(typ), Status: uint32(status)}
	if setup != nil {
		setup(r)
	}
	return r
}

func TestDecodeEvent(t *testing.T) {
	gid := uverbs.GID(netip.MustParseAddr("::ffff:239.1.2.3").As16())
	for _, tc := range []struct {
		name string
		r    *abi.UCMEventResp
		ud   bool
		want Event
	}{
		{"connect request", eventResp(EventConnectRequest, 0, func(r *abi.UCMEventResp) {
			p := r.Param.Conn()
			copy(p.PrivateData[:], "hello")
			p.PrivateDataLen = 56
			p.ResponderResources, p.InitiatorDepth, p.RetryCount, p.RNRRetryCount = 1, 2, 7, 6
			p.FlowControl, p.SRQ, p.QPNum = 1, 1, 0x123456
		}), false, Event{Type: EventConnectRequest, PrivateData: padded("hello", 56),
			Conn: ConnInfo{ResponderResources: 1, InitiatorDepth: 2, FlowControl: true, RetryCount: 7, RNRRetryCount: 6, SRQ: true, QPNum: 0x123456}}},
		{"rejected", eventResp(EventRejected, 28, func(r *abi.UCMEventResp) {
			r.Param.Conn().PrivateDataLen = 148
		}), false, Event{Type: EventRejected, Status: 28, PrivateData: make([]byte, 148)}},
		{"addr error", eventResp(EventAddrError, -110, nil), false, Event{Type: EventAddrError, Status: -110}},
		{"multicast join", eventResp(EventMulticastJoin, 0, func(r *abi.UCMEventResp) {
			p := r.Param.UD()
			p.QPNum, p.QKey = 0xffffff, 0x01234567
			p.AHAttr = abi.AHAttr{GRH: abi.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}, IsGlobal: 1, PortNum: 1}
		}), true, Event{Type: EventMulticastJoin, UD: &UDParam{QPNum: 0xffffff, QKey: 0x01234567,
			AHAttr: uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}, IsGlobal: true, PortNum: 1}}}},
		{"length past the buffer", eventResp(EventEstablished, 0, func(r *abi.UCMEventResp) {
			p := r.Param.UD()
			p.PrivateDataLen = 255 // more than the UD member's 256-byte array holds is impossible, 255 fits
			p.PrivateData[254] = 9
		}), true, Event{Type: EventEstablished, PrivateData: append(make([]byte, 254), 9), UD: &UDParam{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Event
			decodeEvent(tc.r, tc.ud, &got)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *ID) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func padded(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(make([]byte, 336), false)
	f.Fuzz(func(t *testing.T, b []byte, ud bool) {
		var r abi.UCMEventResp
		copy(abi.Bytes(&r), b)
		var ev Event
		decodeEvent(&r, ud, &ev)
		if len(ev.PrivateData) > abi.RDMA_MAX_PRIVATE_DATA {
			t.Fatalf("%d bytes of private data", len(ev.PrivateData))
		}
		_ = ev.String()
		if err := ev.Err(); (err == nil) != (ev.Status == 0) {
			t.Fatalf("status %d, Err %v", ev.Status, err)
		}
		if err := ev.Err(); err != nil {
			_ = err.Error()
		}
	})
}

func TestEventErr(t *testing.T) {
	for _, tc := range []struct {
		ev      Event
		is      []error
		isNot   []error
		message string
	}{
		{Event{Type: EventAddrResolved}, nil, nil, ""},
		{Event{Type: EventAddrError, Status: -int(syscall.ETIMEDOUT)}, []error{syscall.ETIMEDOUT}, []error{ErrRejected},
			"rdmacm Event.Err: ADDR_ERROR: connection timed out"},
		{Event{Type: EventRejected, Status: 28}, []error{ErrRejected, syscall.ECONNREFUSED}, []error{syscall.Errno(28)},
			"rdmacm Event.Err: REJECTED (reason CONSUMER_DEFINED)"},
		{Event{Type: EventUnreachable, Status: 2}, []error{ErrRejected, syscall.ECONNREFUSED}, []error{syscall.ENOENT},
			"rdmacm Event.Err: UNREACHABLE (SIDR status 2)"},
		{Event{Type: EventUnreachable, Status: -int(syscall.ETIMEDOUT)}, []error{syscall.ETIMEDOUT}, []error{ErrRejected},
			"rdmacm Event.Err: UNREACHABLE: connection timed out"},
		{Event{Type: EventConnectError, Status: -int(syscall.EINVAL)}, []error{syscall.EINVAL}, nil,
			"rdmacm Event.Err: CONNECT_ERROR: invalid argument"},
	} {
		t.Run(tc.ev.Type.String(), func(t *testing.T) {
			err := tc.ev.Err()
			if tc.message == "" {
				if err != nil {
					t.Fatalf("Err = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.message {
				t.Fatalf("Err = %v, want %q", err, tc.message)
			}
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("%v does not match %v", err, target)
				}
			}
			for _, target := range tc.isNot {
				if errors.Is(err, target) {
					t.Errorf("%v matches %v", err, target)
				}
			}
		})
	}
	ee := &EventError{Op: "ConnectContext", Want: EventEstablished, Event: &Event{Type: EventDisconnected}}
	if got, want := ee.Error(), "rdmacm ConnectContext: DISCONNECTED instead of ESTABLISHED"; got != want {
		t.Errorf("EventError = %q, want %q", got, want)
	}
}

func TestKernelNumbers(t *testing.T) {
	for _, tc := range []struct{ got, want uint64 }{
		{uint64(PortSpaceTCP), abi.RDMA_PS_TCP},
		{uint64(PortSpaceUDP), abi.RDMA_PS_UDP},
		{uint64(sizeofSockaddrIn), uint64(len(abi.Bytes(&abi.SockaddrIn{})))},
		{uint64(sizeofSockaddrIn6), uint64(len(abi.Bytes(&abi.SockaddrIn6{})))},
	} {
		if tc.got != tc.want {
			t.Errorf("%#x, want the kernel's %#x", tc.got, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{EventAddrResolved.String(), "ADDR_RESOLVED"},
		{EventTimewaitExit.String(), "TIMEWAIT_EXIT"},
		{EventType(16).String(), "EventType(16)"},
		{RejectInvalidServiceID.String(), "INVALID_SERVICE_ID"},
		{RejectReason(99).String(), "RejectReason(99)"},
		{PortSpaceTCP.String(), "TCP"},
		{PortSpaceUDP.String(), "UDP"},
		{PortSpace(2).String(), "PortSpace(2)"},
		{(&Event{Type: EventRejected, Status: 8, PrivateData: []byte{1}}).String(), "REJECTED reason INVALID_SERVICE_ID private data 1 bytes"},
		{(&Event{Type: EventAddrError, Status: -110}).String(), "ADDR_ERROR status connection timed out"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestPrivateDataLimits(t *testing.T) {
	for _, tc := range []struct {
		ps  PortSpace
		op  string
		max int
	}{
		{PortSpaceTCP, "Connect", 56},
		{PortSpaceTCP, "Accept", 196},
		{PortSpaceTCP, "Reject", 148},
		{PortSpaceUDP, "Connect", 180},
		{PortSpaceUDP, "Accept", 136},
		{PortSpaceUDP, "Reject", 136},
	} {
		id := &ID{ps: tc.ps}
		if err := id.checkPrivateData(tc.op, make([]byte, tc.max)); err != nil {
			t.Errorf("%v %s with %d bytes: %v", tc.ps, tc.op, tc.max, err)
		}
		err := id.checkPrivateData(tc.op, make([]byte, tc.max+1))
		if !errors.Is(err, syscall.EINVAL) || !bytes.Contains([]byte(err.Error()), []byte("at most")) {
			t.Errorf("%v %s with %d bytes = %v, want EINVAL naming the limit", tc.ps, tc.op, tc.max+1, err)
		}
	}
}

func TestKernelTimeout(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want uint32
		err  bool
	}{
		{time.Second, 1000, false},
		{time.Microsecond, 1, false},
		{1000 * time.Hour, 1<<31 - 1, false},
		{0, 0, true},
		{-time.Second, 0, true},
	} {
		got, err := kernelTimeout("resolve", tc.d)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("kernelTimeout(%v) = %d, %v; want %d, error %v", tc.d, got, err, tc.want, tc.err)
		}
	}
}

func TestConvertQPAttr(t *testing.T) {
	r := &abi.QPAttr{
		QPAttrMask: uint32(uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
			uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer) | 0xf<<21 | 1<<25,
		QPState: uint32(uverbs.QPStateRTR), PathMTU: uint32(uverbs.MTU1024), DestQPNum: 0x11, RQPSN: 0x22,
		MaxDestRDAtomic: 4, MinRNRTimer: 12, PortNum: 1, QKey: 5, QPAccessFlags: uint32(uverbs.AccessRemoteWrite),
		AHAttr: abi.AHAttr{GRH: abi.GlobalRoute{SGIDIndex: 3, HopLimit: 64}, IsGlobal: 1, PortNum: 1},
	}
	a, mask := convertQPAttr(r)
	wantMask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
		uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	if mask != wantMask {
		t.Errorf("mask %v, want %v (RoCE bits 21-24 and the rate limit dropped)", mask, wantMask)
	}
	want := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPNum: 0x11, RQPSN: 0x22,
		MaxDestRdAtomic: 4, MinRNRTimer: 12, PortNum: 1, QKey: 5, AccessFlags: uverbs.AccessRemoteWrite,
		AHAttr: uverbs.AHAttr{GRH: uverbs.GlobalRoute{SGIDIndex: 3, HopLimit: 64}, IsGlobal: true, PortNum: 1}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
