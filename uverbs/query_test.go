package uverbs

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"net"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/abi"
)

// QueryDeviceLegacy and QueryPortLegacy run the write() commands the
// queries fall back to, for the VM tests in package uverbs_test to
// compare with the ioctl and extended paths.
func QueryDeviceLegacy(c *Context) (DeviceAttr, error) {
	var resp abi.ExQueryDeviceResp
	var err error
	if resp.Base, err = c.queryDeviceLegacy(); err != nil {
		return DeviceAttr{}, err
	}
	resp.ResponseLength = uint32(len(abi.Bytes(&resp.Base)))
	return decodeDeviceAttr(&resp), nil
}

func QueryPortLegacy(c *Context, port int) (PortAttr, error) {
	var resp abi.QueryPortRespEx
	var err error
	if resp.LegacyResp, err = c.queryPortLegacy(port); err != nil {
		return PortAttr{}, err
	}
	return decodePortAttr(&resp), nil
}

// rxeDeviceResp is the extended QUERY_DEVICE response of rxe on Linux
// 6.12, as the kernel sends it.
func rxeDeviceResp() abi.ExQueryDeviceResp {
	var r abi.ExQueryDeviceResp
	b := &r.Base
	binary.BigEndian.PutUint64(abi.Bytes(&b.NodeGUID), 0xf8abc8fffe7dd19c)
	binary.BigEndian.PutUint64(abi.Bytes(&b.SysImageGUID), 0xf8abc8fffe7dd19c)
	b.MaxMRSize = 0xffffffffffffffff
	b.PageSizeCap = 0xfffff000
	b.VendorID = 0xffffff
	b.MaxQP = 1048560
	b.MaxQPWR = 1048576
	b.DeviceCapFlags = 0x01223c76
	b.MaxSGE = 32
	b.MaxSGERD = 32
	b.MaxCQ = 1048576
	b.MaxCQE = 32767
	b.MaxMR = 524287
	b.MaxPD = 1048576
	b.MaxQPRDAtom = 128
	b.MaxResRDAtom = 258048
	b.MaxQPInitRDAtom = 128
	b.AtomicCap = 1
	b.MaxMW = 524287
	b.MaxMcastGrp = 8192
	b.MaxMcastQPAttach = 56
	b.MaxTotalMcastQPAttach = 458752
	b.MaxAH = 32767
	b.MaxSRQ = 917503
	b.MaxSRQWR = 1048576
	b.MaxSRQSGE = 27
	b.MaxPKeys = 64
	b.LocalCAAckDelay = 15
	b.PhysPortCnt = 1
	r.ResponseLength = uint32(len(abi.Bytes(&r)))
	r.DeviceCapFlagsEx = 0x1C001223C76
	return r
}

func rxeDeviceAttr() DeviceAttr {
	return DeviceAttr{
		NodeGUID:              0xf8abc8fffe7dd19c,
		SysImageGUID:          0xf8abc8fffe7dd19c,
		MaxMRSize:             0xffffffffffffffff,
		PageSizeCap:           0xfffff000,
		VendorID:              0xffffff,
		MaxQP:                 1048560,
		MaxQPWR:               1048576,
		DeviceCapFlags:        0x01223c76,
		MaxSGE:                32,
		MaxSGERd:              32,
		MaxCQ:                 1048576,
		MaxCQE:                32767,
		MaxMR:                 524287,
		MaxPD:                 1048576,
		MaxQPRdAtom:           128,
		MaxResRdAtom:          258048,
		MaxQPInitRdAtom:       128,
		AtomicCap:             AtomicHCA,
		MaxMW:                 524287,
		MaxMcastGrp:           8192,
		MaxMcastQPAttach:      56,
		MaxTotalMcastQPAttach: 458752,
		MaxAH:                 32767,
		MaxSRQ:                917503,
		MaxSRQWR:              1048576,
		MaxSRQSGE:             27,
		MaxPKeys:              64,
		LocalCAAckDelay:       15,
		PhysPortCnt:           1,
		DeviceCapFlagsEx:      0x1C001223C76,
	}
}

// fullExtended sets every extended field of a response to a distinct
// value.
func fullExtended(r *abi.ExQueryDeviceResp) {
	r.Base.FWVer = 0x0010_0023_07d0
	r.ODPCaps.GeneralCaps = 3
	r.ODPCaps.PerTransportCaps.RCODPCaps = 0x3f
	r.ODPCaps.PerTransportCaps.UCODPCaps = 0x1
	r.ODPCaps.PerTransportCaps.UDODPCaps = 0x2
	r.TimestampMask = 0x7fffffffffffffff
	r.HCACoreClock = 156250
	r.RSSCaps = abi.RSSCaps{SupportedQPTs: 1<<8 | 1<<4, MaxRWQIndirectionTables: 64, MaxRWQIndirectionTableSize: 2048}
	r.MaxWQTypeRQ = 16384
	r.RawPacketCaps = 0xf
	r.TMCaps = abi.TMCaps{MaxRndvHdrSize: 64, MaxNumTags: 127, Flags: 1, MaxOps: 32768, MaxSGE: 1}
	r.CQModerationCaps = abi.CQModerationCaps{MaxCQModerationCount: 65535, MaxCQModerationPeriod: 4095}
	r.MaxDMSize = 131072
	r.XRCODPCaps = 0x7
}

func TestDecodeDeviceAttr(t *testing.T) {
	withExtended := func(length uint32) abi.ExQueryDeviceResp {
		r := rxeDeviceResp()
		fullExtended(&r)
		r.ResponseLength = length
		return r
	}
	all := rxeDeviceAttr()
	all.RawFWVer = 0x0010_0023_07d0
	all.ODPCaps = ODPCaps{General: 3, RC: 0x3f, UC: 1, UD: 2, XRC: 7}
	all.CompletionTimestampMask = 0x7fffffffffffffff
	all.HCACoreClock = 156250
	all.RSSCaps = RSSCaps{SupportedQPTs: 1<<8 | 1<<4, MaxRWQIndirectionTables: 64, MaxRWQIndirectionTableSize: 2048}
	all.MaxWQTypeRQ = 16384
	all.RawPacketCaps = 0xf
	all.TMCaps = TMCaps{MaxRndvHdrSize: 64, MaxNumTags: 127, Flags: 1, MaxOps: 32768, MaxSGE: 1}
	all.CQModCaps = CQModCaps{MaxCQCount: 65535, MaxCQPeriod: 4095}
	all.MaxDMSize = 131072

	// upTo returns all with the extended fields past the first n zeroed.
	upTo := func(n int) DeviceAttr {
		a := all
		zero := []func(){
			func() { a.ODPCaps = ODPCaps{XRC: a.ODPCaps.XRC} },
			func() { a.CompletionTimestampMask = 0 },
			func() { a.HCACoreClock = 0 },
			func() { a.DeviceCapFlagsEx = 0 },
			func() { a.RSSCaps = RSSCaps{} },
			func() { a.MaxWQTypeRQ = 0 },
			func() { a.RawPacketCaps = 0 },
			func() { a.TMCaps = TMCaps{} },
			func() { a.CQModCaps = CQModCaps{} },
			func() { a.MaxDMSize = 0 },
			func() { a.ODPCaps.XRC = 0 },
		}
		for _, z := range zero[n:] {
			z()
		}
		return a
	}

	tests := []struct {
		name string
		resp abi.ExQueryDeviceResp
		want DeviceAttr
	}{
		{"rxe on 6.12", rxeDeviceResp(), rxeDeviceAttr()},
		{"every field", withExtended(304), all},
		{"longer than this library knows", withExtended(400), all},
		// The offsets just past each extended member of
		// ib_uverbs_ex_query_device_resp: a response ending there has
		// that member and none after it.
		{"legacy length", withExtended(176), upTo(0)},
		{"up to comp_mask and response_length", withExtended(184), upTo(0)},
		{"up to odp_caps", withExtended(208), upTo(1)},
		{"half of timestamp_mask", withExtended(212), upTo(1)},
		{"up to timestamp_mask", withExtended(216), upTo(2)},
		{"up to hca_core_clock", withExtended(224), upTo(3)},
		{"up to device_cap_flags_ex", withExtended(232), upTo(4)},
		{"up to rss_caps", withExtended(248), upTo(5)},
		{"up to max_wq_type_rq", withExtended(252), upTo(6)},
		{"up to raw_packet_caps", withExtended(256), upTo(7)},
		{"up to tm_caps", withExtended(280), upTo(8)},
		{"up to cq_moderation_caps", withExtended(288), upTo(9)},
		{"up to max_dm_size", withExtended(296), upTo(10)},
		{"up to xrc_odp_caps", withExtended(300), upTo(11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeDeviceAttr(&tt.resp)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decodeDeviceAttr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSupports(t *testing.T) {
	tests := []struct {
		flags                     DeviceCap
		global, persistent, write bool
	}{
		{0x1223c76, false, false, false},               // rxe on 6.1
		{0x1C001223C76, true, true, true},              // rxe on 6.12
		{DeviceCapFlushGlobal, true, false, false},     // global only
		{DeviceCapFlushPersistent, false, true, false}, // persistent only
		{DeviceCapAtomicWrite, false, false, true},     // atomic write only
		{0x1223c76 | 1<<38, true, false, false},        // with the 32-bit flags
		{DeviceCap(abi.IB_UVERBS_DEVICE_ATOMIC_WRITE), false, false, true},
	}
	for _, tt := range tests {
		a := DeviceAttr{DeviceCapFlagsEx: tt.flags}
		g, p := a.SupportsFlush()
		if g != tt.global || p != tt.persistent || a.SupportsAtomicWrite() != tt.write {
			t.Errorf("%v: SupportsFlush = %v, %v, SupportsAtomicWrite = %v; want %v, %v, %v",
				tt.flags, g, p, a.SupportsAtomicWrite(), tt.global, tt.persistent, tt.write)
		}
	}
}

func TestFlagStrings(t *testing.T) {
	tests := []struct {
		v    interface{ String() string }
		want string
	}{
		{DeviceCap(0), "0"},
		{DeviceCap(0x01223c76), "BAD_PKEY_CNTR|BAD_QKEY_CNTR|AUTO_PATH_MIG|CHANGE_PHY_PORT|UD_AV_PORT_ENFORCE|" +
			"PORT_ACTIVE_EVENT|SYS_IMAGE_GUID|RC_RNR_NAK_GEN|SRQ_RESIZE|MEM_WINDOW|MEM_MGT_EXTENSIONS|MEM_WINDOW_TYPE_2B"},
		{DeviceCapFlushGlobal | DeviceCapFlushPersistent | DeviceCapAtomicWrite, "FLUSH_GLOBAL|FLUSH_PERSISTENT|ATOMIC_WRITE"},
		{DeviceCapResizeMaxWR | 1<<15 | 1<<63, "RESIZE_MAX_WR|0x8000000000008000"},
		{DeviceCap(1 << 16), "0x10000"},
		{DeviceCapInitType | DeviceCapManagedFlowSteering | DeviceCapRawScatterFCS | DeviceCapPCIWriteEndPadding | DeviceCapCCDMABounce,
			"INIT_TYPE|MANAGED_FLOW_STEERING|RAW_SCATTER_FCS|PCI_WRITE_END_PADDING|CC_DMA_BOUNCE"},
		{AtomicNone, "ATOMIC_NONE"},
		{AtomicHCA, "ATOMIC_HCA"},
		{AtomicGlob, "ATOMIC_GLOB"},
		{AtomicCap(3), "AtomicCap(3)"},
		{ODPGeneralCaps(0), "0"},
		{ODPSupport | ODPSupportImplicit, "ODP_SUPPORT|ODP_SUPPORT_IMPLICIT"},
		{ODPGeneralCaps(1 << 5), "0x20"},
		{ODPTransportCaps(0xff), "SUPPORT_SEND|SUPPORT_RECV|SUPPORT_WRITE|SUPPORT_READ|SUPPORT_ATOMIC|SUPPORT_SRQ|SUPPORT_FLUSH|SUPPORT_ATOMIC_WRITE"},
		{ODPSupportSRQRecv | 1<<9, "SUPPORT_SRQ|0x200"},
		{RawPacketCaps(0xf), "CVLAN_STRIPPING|SCATTER_FCS|IP_CSUM|DELAY_DROP"},
		{RawPacketCaps(0x10), "0x10"},
		{LinkLayerUnspecified, "Unspecified"},
		{LinkLayerInfiniBand, "InfiniBand"},
		{LinkLayerEthernet, "Ethernet"},
		{LinkLayer(3), "LinkLayer(3)"},
		{GIDTypeIB, "IB"},
		{GIDTypeRoCEv1, "RoCE v1"},
		{GIDTypeRoCEv2, "RoCE v2"},
		{GIDType(7), "GIDType(7)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%#x).String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
}

func TestMTU(t *testing.T) {
	tests := []struct {
		m     MTU
		bytes int
		str   string
	}{
		{0, 0, "MTU(0)"},
		{MTU256, 256, "256"},
		{MTU512, 512, "512"},
		{MTU1024, 1024, "1024"},
		{MTU2048, 2048, "2048"},
		{MTU4096, 4096, "4096"},
		{6, 0, "MTU(6)"},
		{255, 0, "MTU(255)"},
	}
	for _, tt := range tests {
		if got := tt.m.Bytes(); got != tt.bytes {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", tt.m, got, tt.bytes)
		}
		if got := tt.m.String(); got != tt.str {
			t.Errorf("MTU(%d).String() = %q, want %q", tt.m, got, tt.str)
		}
	}
}

func TestProviderFWVer(t *testing.T) {
	tests := []struct {
		driver uint32
		raw    uint64
		want   string
	}{
		{abi.RDMA_DRIVER_RXE, 0, "0.0.0"},
		{abi.RDMA_DRIVER_SIW, 0x0001_0002_0003, "1.2.3"},
		{abi.RDMA_DRIVER_RXE, 0xffff_ffff_ffff_ffff, "65535.65535.65535"},
		{abi.RDMA_DRIVER_MLX5, 0x0010_0023_07d0, ""},
		{abi.RDMA_DRIVER_UNKNOWN, 0, ""},
	}
	for _, tt := range tests {
		if got := providerFWVer(tt.driver, tt.raw); got != tt.want {
			t.Errorf("providerFWVer(%d, %#x) = %q, want %q", tt.driver, tt.raw, got, tt.want)
		}
	}
}

func TestDecodePortAttr(t *testing.T) {
	rxe := abi.QueryPortRespEx{LegacyResp: abi.QueryPortResp{
		PortCapFlags: 0x00010000, MaxMsgSz: 0x80000000, GIDTblLen: 1024, PKeyTblLen: 1,
		State: 4, MaxMTU: 5, ActiveMTU: 3, MaxVLNum: 1, ActiveWidth: 1, ActiveSpeed: 8,
		PhysState: 5, LinkLayer: 2, Flags: abi.IB_UVERBS_QPF_GRH_REQUIRED,
	}}
	rxeAttr := PortAttr{
		State: PortActive, MaxMTU: MTU4096, ActiveMTU: MTU1024, GIDTblLen: 1024, PortCapFlags: 0x00010000,
		MaxMsgSz: 0x80000000, PKeyTblLen: 1, MaxVLNum: 1, ActiveWidth: 1, ActiveSpeed: 8, PhysState: 5,
		LinkLayer: LinkLayerEthernet, GRHRequired: true,
	}
	xdr := abi.QueryPortRespEx{
		LegacyResp: abi.QueryPortResp{
			PortCapFlags: 0x2651e848, MaxMsgSz: 0x40000000, BadPKeyCntr: 3, QKeyViolCntr: 4,
			GIDTblLen: 255, PKeyTblLen: 128, LID: 7, SMLID: 1, State: 4, MaxMTU: 5, ActiveMTU: 5,
			LMC: 2, MaxVLNum: 4, SMSL: 3, SubnetTimeout: 18, InitTypeReply: 1, ActiveWidth: 2,
			ActiveSpeed: 0, PhysState: 5, LinkLayer: 1,
		},
		PortCapFlags2: 0x32,
	}
	binary.NativeEndian.PutUint32(xdr.Reserved[2:], 256)
	xdrAttr := PortAttr{
		State: PortActive, MaxMTU: MTU4096, ActiveMTU: MTU4096, GIDTblLen: 255, PortCapFlags: 0x2651e848,
		PortCapFlags2: 0x32, MaxMsgSz: 0x40000000, BadPKeyCntr: 3, QKeyViolCntr: 4, PKeyTblLen: 128,
		LID: 7, SMLID: 1, LMC: 2, MaxVLNum: 4, SMSL: 3, SubnetTimeout: 18, InitTypeReply: 1,
		ActiveWidth: 2, ActiveSpeedEx: 256, PhysState: 5, LinkLayer: LinkLayerInfiniBand,
	}
	tests := []struct {
		name string
		resp abi.QueryPortRespEx
		want PortAttr
	}{
		{"rxe", rxe, rxeAttr},
		{"InfiniBand XDR", xdr, xdrAttr},
		{"zero", abi.QueryPortRespEx{}, PortAttr{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, decodePortAttr(&tt.resp)); diff != "" {
				t.Errorf("decodePortAttr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGID(t *testing.T) {
	tests := []struct {
		gid  GID
		str  string
		ip   string
		ip4  bool
		zero bool
	}{
		{GID{}, "0000:0000:0000:0000:0000:0000:0000:0000", "::", false, true},
		{GID{0xfe, 0x80, 8: 0xf8, 0xab, 0xc8, 0xff, 0xfe, 0x7d, 0xd1, 0x9c},
			"fe80:0000:0000:0000:f8ab:c8ff:fe7d:d19c", "fe80::f8ab:c8ff:fe7d:d19c", false, false},
		{GID{10: 0xff, 0xff, 198, 18, 0, 1}, "0000:0000:0000:0000:0000:ffff:c612:0001", "198.18.0.1", true, false},
		{GID{15: 1}, "0000:0000:0000:0000:0000:0000:0000:0001", "::1", false, false},
		{GID{0x20, 0x01, 0x0d, 0xb8, 15: 0xff}, "2001:0db8:0000:0000:0000:0000:0000:00ff", "2001:db8::ff", false, false},
	}
	for _, tt := range tests {
		if got := tt.gid.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
		ip := tt.gid.IP()
		if got := ip.String(); got != tt.ip {
			t.Errorf("%s: IP() = %s, want %s", tt.str, got, tt.ip)
		}
		if (len(ip) == net.IPv4len) != tt.ip4 {
			t.Errorf("%s: IP() has %d bytes; want IPv4 %v", tt.str, len(ip), tt.ip4)
		}
		if got := tt.gid.IsZero(); got != tt.zero {
			t.Errorf("%s: IsZero() = %v, want %v", tt.str, got, tt.zero)
		}
		// Both forms parse back.
		for _, s := range []string{tt.str, tt.ip} {
			if g, err := ParseGID(s); err != nil || g != tt.gid {
				t.Errorf("ParseGID(%q) = %v, %v; want %v", s, g, err, tt.gid)
			}
		}
	}
	// IP must not alias the GID.
	g := GID{15: 1}
	g.IP()[15] = 2
	if g[15] != 1 {
		t.Error("changing IP() changed the GID")
	}
}

func TestParseGIDErrors(t *testing.T) {
	for _, s := range []string{"", "fe80", "fe80::1%eth0", "fe80:0000:0000:0000:f8ab:c8ff:fe7d", "1.2.3", "g::1", "fe80:0000:0000:0000:f8ab:c8ff:fe7d:d19c:1"} {
		if g, err := ParseGID(s); err == nil {
			t.Errorf("ParseGID(%q) = %v, want an error", s, g)
		}
	}
}

func gidRaw(port, index, typ, ifindex uint32, gid GID) abi.GIDEntry {
	e := abi.GIDEntry{GIDIndex: index, PortNum: port, GIDType: typ, NetdevIfindex: ifindex}
	copy(abi.Bytes(&e.GID), gid[:])
	return e
}

func TestDecodeGIDTable(t *testing.T) {
	ll := GID{0xfe, 0x80, 8: 0xf8, 0xab, 0xc8, 0xff, 0xfe, 0x7d, 0xd1, 0x9c}
	v4 := GID{10: 0xff, 0xff, 198, 18, 0, 1}
	ib := GID{0xfe, 0x80, 8: 0x00, 0x02, 0xc9, 0x03, 0x00, 0xa0, 0xb0, 0xc1}
	raw := []abi.GIDEntry{
		gidRaw(1, 1, 2, 7, v4),
		gidRaw(2, 0, 0, 0, ib),
		gidRaw(1, 0, 1, 7, ll),
		gidRaw(1, 3, 2, 9, v4),
		gidRaw(1, 2, 2, 7, ll),
	}
	names := func() map[int]string { return map[int]string{7: "veth0"} }
	got := decodeGIDTable(raw, 1, names)
	want := []GIDEntry{
		{GID: ll, Index: 0, Port: 1, Type: GIDTypeRoCEv1, Netdev: "veth0", NetdevIndex: 7},
		{GID: v4, Index: 1, Port: 1, Type: GIDTypeRoCEv2, Netdev: "veth0", NetdevIndex: 7},
		{GID: ll, Index: 2, Port: 1, Type: GIDTypeRoCEv2, Netdev: "veth0", NetdevIndex: 7},
		{GID: v4, Index: 3, Port: 1, Type: GIDTypeRoCEv2, NetdevIndex: 9}, // gone from the namespace
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("port 1 (-want +got):\n%s", diff)
	}
	// Without network devices the names are not looked up.
	noLookup := func() map[int]string { t.Error("names looked up for an InfiniBand port"); return nil }
	got = decodeGIDTable(raw, 2, noLookup)
	want = []GIDEntry{{GID: ib, Port: 2, Type: GIDTypeIB}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("port 2 (-want +got):\n%s", diff)
	}
	if got := decodeGIDTable(raw, 3, noLookup); len(got) != 0 {
		t.Errorf("port 3: %v, want none", got)
	}
}

func TestFieldEnd(t *testing.T) {
	var r abi.ExQueryDeviceResp
	whole := abi.Bytes(&r)
	for _, tt := range []struct {
		name  string
		field []byte
		want  int
	}{
		{"base", abi.Bytes(&r.Base), 176},
		{"odp_caps", abi.Bytes(&r.ODPCaps), 208},
		{"xrc_odp_caps", abi.Bytes(&r.XRCODPCaps), 300},
		{"reserved", abi.Bytes(&r.Reserved), 304},
	} {
		if got := fieldEnd(whole, tt.field); got != tt.want {
			t.Errorf("fieldEnd(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("fieldEnd of a foreign field did not panic")
		}
	}()
	var other abi.ExQueryDeviceResp
	fieldEnd(whole, abi.Bytes(&other.MaxDMSize))
}

// fakeContext is a context on a device described by the fake sysfs tree;
// it has no command fd, so only checks made before a kernel call and
// sysfs reads work.
func fakeContext(name string, ports ...int) *Context {
	c := &Context{dev: Device{Name: name}}
	for _, p := range ports {
		c.dev.Ports = append(c.dev.Ports, Port{Num: p})
	}
	return c
}

func TestQueryPKey(t *testing.T) {
	fakeSysfs(t, merge(rxeTree("rxe0", "uverbs0", "veth0", "5454:06ff:feba:78fd"), map[string]string{
		"devices/virtual/infiniband/rxe0/ports/1/pkeys/0": "0xffff\n",
		"devices/virtual/infiniband/rxe0/ports/1/pkeys/1": "0x8001\n",
		"devices/virtual/infiniband/rxe0/ports/1/pkeys/2": "0x7fff\n",
		"devices/virtual/infiniband/rxe0/ports/1/pkeys/3": "junk\n",
	}))
	c := fakeContext("rxe0", 1)
	for _, tt := range []struct {
		index int
		want  uint16
	}{{0, 0xffff}, {1, 0x8001}, {2, 0x7fff}} {
		if got, err := c.QueryPKey(1, tt.index); err != nil || got != tt.want {
			t.Errorf("QueryPKey(1, %d) = %#x, %v; want %#x", tt.index, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		port, index int
		is          error
		msg         string
	}{
		{0, 0, syscall.EINVAL, "rxe0 has no port 0 (its ports are 1 to 1)"},
		{2, 0, syscall.EINVAL, "rxe0 has no port 2 (its ports are 1 to 1)"},
		{1, -1, syscall.EINVAL, "negative index"},
		{1, 4, fs.ErrNotExist, "pkeys/4"},
		{1, 3, nil, `malformed P_Key "junk"`},
	} {
		_, err := c.QueryPKey(tt.port, tt.index)
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("QueryPKey(%d, %d) = %v; want an error matching %v, saying %q", tt.port, tt.index, err, tt.is, tt.msg)
		}
	}
}

func TestCheckPort(t *testing.T) {
	tests := []struct {
		ports []int
		port  int
		msg   string // "" when valid
	}{
		{[]int{1}, 1, ""},
		{[]int{1}, 0, "rxe0 has no port 0 (its ports are 1 to 1)"},
		{[]int{1}, -1, "rxe0 has no port -1 (its ports are 1 to 1)"},
		{[]int{1}, 2, "rxe0 has no port 2 (its ports are 1 to 1)"},
		{[]int{2, 1}, 2, ""},
		{[]int{1, 2}, 3, "rxe0 has no port 3 (its ports are 1 to 2)"},
		{nil, 1, ""},
		{nil, 255, ""},
		{nil, 0, "port numbers start at 1"},
		{nil, 256, "port 256 is out of range (at most 255)"},
	}
	for _, tt := range tests {
		err := fakeContext("rxe0", tt.ports...).checkPort("op", tt.port)
		if tt.msg == "" {
			if err != nil {
				t.Errorf("ports %v: checkPort(%d) = %v, want nil", tt.ports, tt.port, err)
			}
			continue
		}
		if want := "op: " + tt.msg + ": invalid argument"; err == nil || err.Error() != want || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ports %v: checkPort(%d) = %v, want %q matching EINVAL", tt.ports, tt.port, err, want)
		}
	}
}

func TestQueryOnClosedContext(t *testing.T) {
	c := fakeContext("rxe0", 1)
	c.closed.Store(true)
	calls := map[string]func() error{
		"QueryDevice":   func() error { _, err := c.QueryDevice(); return err },
		"QueryPort":     func() error { _, err := c.QueryPort(1); return err },
		"GIDTable":      func() error { _, err := c.GIDTable(1); return err },
		"QueryGID":      func() error { _, err := c.QueryGID(1, 0); return err },
		"QueryGIDEntry": func() error { _, err := c.QueryGIDEntry(1, 0); return err },
		"QueryPKey":     func() error { _, err := c.QueryPKey(1, 0); return err },
		// Closed is checked first, before the port.
		"QueryPort(0)": func() error { _, err := c.QueryPort(0); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed context = %v, want ErrClosed", name, err)
		}
	}
}

func FuzzDecodeDeviceAttr(f *testing.F) {
	r := rxeDeviceResp()
	f.Add(abi.Bytes(&r))
	fullExtended(&r)
	r.ResponseLength = 250
	f.Add(abi.Bytes(&r))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r abi.ExQueryDeviceResp
		copy(abi.Bytes(&r), b)
		a := decodeDeviceAttr(&r)
		if r.ResponseLength < 232 && a.DeviceCapFlagsEx != 0 {
			t.Errorf("response_length %d, but device_cap_flags_ex decoded as %v", r.ResponseLength, a.DeviceCapFlagsEx)
		}
		if r.ResponseLength < 300 && a.ODPCaps.XRC != 0 {
			t.Errorf("response_length %d, but xrc_odp_caps decoded as %v", r.ResponseLength, a.ODPCaps.XRC)
		}
		if a.MaxQP < 0 || a.PhysPortCnt > 255 {
			t.Errorf("out of range: MaxQP %d, PhysPortCnt %d", a.MaxQP, a.PhysPortCnt)
		}
	})
}

func FuzzDecodePortAttr(f *testing.F) {
	f.Add(make([]byte, 48))
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 1, 0, 0, 0, 0, 0, 4, 5, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r abi.QueryPortRespEx
		copy(abi.Bytes(&r), b)
		a := decodePortAttr(&r)
		_ = a.MaxMTU.String() + a.ActiveMTU.String() + a.LinkLayer.String() + a.State.String()
		l := &r.LegacyResp
		if a.GIDTblLen != int(l.GIDTblLen) || a.PKeyTblLen != int(l.PKeyTblLen) || a.GIDTblLen < 0 || a.PKeyTblLen < 0 {
			t.Errorf("table lengths %d and %d from %d and %d", a.GIDTblLen, a.PKeyTblLen, l.GIDTblLen, l.PKeyTblLen)
		}
		if a.GRHRequired != (l.Flags&abi.IB_UVERBS_QPF_GRH_REQUIRED != 0) {
			t.Errorf("GRHRequired %v from flags %#x", a.GRHRequired, l.Flags)
		}
		// active_speed_ex: the 4 bytes after reserved[2] (Linux 6.7's layout).
		off := int(unsafe.Offsetof(r.Reserved)) + 2
		if want := binary.NativeEndian.Uint32(abi.Bytes(&r)[off:]); a.ActiveSpeedEx != want {
			t.Errorf("ActiveSpeedEx %#x, want the %#x at byte %d", a.ActiveSpeedEx, want, off)
		}
	})
}

func FuzzDecodeGIDTable(f *testing.F) {
	e := gidRaw(1, 1, 2, 7, GID{10: 0xff, 0xff, 198, 18, 0, 1})
	f.Add(abi.Bytes(&e), 1)
	f.Fuzz(func(t *testing.T, b []byte, port int) {
		raw := make([]abi.GIDEntry, len(b)/sizeofGIDEntry+1)
		copy(abi.BytesOfSlice(raw), b)
		got := decodeGIDTable(raw, port, func() map[int]string { return nil })
		for i, e := range got {
			if e.Port != port || i > 0 && got[i-1].Index > e.Index {
				t.Fatalf("entry %d: %+v (port %d, unsorted or foreign)", i, e, port)
			}
			_ = e.GID.String() + e.Type.String()
			e.GID.IP()
		}
	})
}
