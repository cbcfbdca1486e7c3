package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// This file holds the device and port queries (ibv_query_device_ex,
// ibv_query_port, ibv_query_pkey) and the types they return; gid.go has
// the GID queries. All of them are safe to call from any goroutine.

// DeviceAttr is what the kernel reports about a device
// (ibv_device_attr_ex). Fields past PhysPortCnt come from the extended
// query and are zero when the kernel did not report them. The few
// members of ibv_device_attr_ex that only a provider's private response
// carries (tso_caps, packet_pacing_caps, pci_atomic_caps, the RSS hash
// function and fields) are not here: the kernel's core response has no
// room for them.
type DeviceAttr struct {
	// FWVer is the firmware version: the device's sysfs fw_ver when it
	// has one, else, for rxe and siw, RawFWVer as major.minor.subminor
	// (16 bits each, "0.0.0"), the way their libibverbs providers
	// format it. It is what ibv_devinfo prints as fw_ver; "" when
	// neither applies.
	FWVer string
	// RawFWVer is the firmware version number the kernel reported.
	RawFWVer uint64
	// BoardID is the device's sysfs board_id, "" when it has none.
	BoardID string

	NodeGUID     GUID
	SysImageGUID GUID
	MaxMRSize    uint64
	PageSizeCap  uint64
	VendorID     uint32
	VendorPartID uint32
	HWVer        uint32
	MaxQP        int
	MaxQPWR      int
	// DeviceCapFlags is the low 32 bits of the capability flags, the
	// part ibv_device_attr has; DeviceCapFlagsEx has all 64.
	DeviceCapFlags        DeviceCap
	MaxSGE                int
	MaxSGERd              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRdAtom           int
	MaxEERdAtom           int
	MaxResRdAtom          int
	MaxQPInitRdAtom       int
	MaxEEInitRdAtom       int
	AtomicCap             AtomicCap
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPKeys              int
	LocalCAAckDelay       uint8
	PhysPortCnt           int

	ODPCaps                 ODPCaps
	CompletionTimestampMask uint64
	HCACoreClock            uint64 // kHz
	// DeviceCapFlagsEx is the full 64-bit capability set, including the
	// bits above 32 (FLUSH and ATOMIC_WRITE from Linux 6.2).
	DeviceCapFlagsEx DeviceCap
	RSSCaps          RSSCaps
	MaxWQTypeRQ      int
	RawPacketCaps    RawPacketCaps
	TMCaps           TMCaps
	CQModCaps        CQModCaps
	MaxDMSize        uint64 // bytes of device memory; 0 without any
}

// SupportsFlush reports whether the device executes RDMA FLUSH to the
// global visibility and the persistence placement types
// (IB_UVERBS_DEVICE_FLUSH_GLOBAL, _PERSISTENT; Linux 6.2).
func (a *DeviceAttr) SupportsFlush() (global, persistent bool) {
	if a == nil {
		return false, false
	}
	return a.DeviceCapFlagsEx&DeviceCapFlushGlobal != 0, a.DeviceCapFlagsEx&DeviceCapFlushPersistent != 0
}

// SupportsAtomicWrite reports whether the device executes RDMA ATOMIC
// WRITE (IB_UVERBS_DEVICE_ATOMIC_WRITE; Linux 6.2).
func (a *DeviceAttr) SupportsAtomicWrite() bool {
	if a == nil {
		return false
	}
	return a.DeviceCapFlagsEx&DeviceCapAtomicWrite != 0
}

// DeviceCap is a set of device capability flags (ibv_device_cap_flags
// and the 64-bit IBV_DEVICE_* flags of device_cap_flags_ex, numbered as
// the kernel's ib_uverbs_device_cap_flags).
type DeviceCap uint64

// Device capabilities. DeviceCapInitType is libibverbs' and no kernel
// sets it.
const (
	DeviceCapResizeMaxWR         DeviceCap = 1 << 0
	DeviceCapBadPKeyCntr         DeviceCap = 1 << 1
	DeviceCapBadQKeyCntr         DeviceCap = 1 << 2
	DeviceCapRawMulti            DeviceCap = 1 << 3
	DeviceCapAutoPathMig         DeviceCap = 1 << 4
	DeviceCapChangePhyPort       DeviceCap = 1 << 5
	DeviceCapUDAVPortEnforce     DeviceCap = 1 << 6
	DeviceCapCurrQPStateMod      DeviceCap = 1 << 7
	DeviceCapShutdownPort        DeviceCap = 1 << 8
	DeviceCapInitType            DeviceCap = 1 << 9
	DeviceCapPortActiveEvent     DeviceCap = 1 << 10
	DeviceCapSysImageGUID        DeviceCap = 1 << 11
	DeviceCapRCRNRNAKGen         DeviceCap = 1 << 12
	DeviceCapSRQResize           DeviceCap = 1 << 13
	DeviceCapNNotifyCQ           DeviceCap = 1 << 14
	DeviceCapMemWindow           DeviceCap = 1 << 17
	DeviceCapUDIPCsum            DeviceCap = 1 << 18
	DeviceCapXRC                 DeviceCap = 1 << 20
	DeviceCapMemMgtExtensions    DeviceCap = 1 << 21
	DeviceCapMemWindowType2A     DeviceCap = 1 << 23
	DeviceCapMemWindowType2B     DeviceCap = 1 << 24
	DeviceCapRCIPCsum            DeviceCap = 1 << 25
	DeviceCapRawIPCsum           DeviceCap = 1 << 26
	DeviceCapManagedFlowSteering DeviceCap = 1 << 29
	DeviceCapRawScatterFCS       DeviceCap = 1 << 34
	DeviceCapPCIWriteEndPadding  DeviceCap = 1 << 36
	DeviceCapFlushGlobal         DeviceCap = abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL     // 1 << 38, Linux 6.2
	DeviceCapFlushPersistent     DeviceCap = abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT // 1 << 39, Linux 6.2
	DeviceCapAtomicWrite         DeviceCap = abi.IB_UVERBS_DEVICE_ATOMIC_WRITE     // 1 << 40, Linux 6.2
	DeviceCapCCDMABounce         DeviceCap = 1 << 41
)

// deviceCapNames are the names ibv_devinfo prints for the flags (the
// IBV_DEVICE_ names without the prefix), in bit order.
var deviceCapNames = []bitName{
	{uint64(DeviceCapResizeMaxWR), "RESIZE_MAX_WR"},
	{uint64(DeviceCapBadPKeyCntr), "BAD_PKEY_CNTR"},
	{uint64(DeviceCapBadQKeyCntr), "BAD_QKEY_CNTR"},
	{uint64(DeviceCapRawMulti), "RAW_MULTI"},
	{uint64(DeviceCapAutoPathMig), "AUTO_PATH_MIG"},
	{uint64(DeviceCapChangePhyPort), "CHANGE_PHY_PORT"},
	{uint64(DeviceCapUDAVPortEnforce), "UD_AV_PORT_ENFORCE"},
	{uint64(DeviceCapCurrQPStateMod), "CURR_QP_STATE_MOD"},
	{uint64(DeviceCapShutdownPort), "SHUTDOWN_PORT"},
	{uint64(DeviceCapInitType), "INIT_TYPE"},
	{uint64(DeviceCapPortActiveEvent), "PORT_ACTIVE_EVENT"},
	{uint64(DeviceCapSysImageGUID), "SYS_IMAGE_GUID"},
	{uint64(DeviceCapRCRNRNAKGen), "RC_RNR_NAK_GEN"},
	{uint64(DeviceCapSRQResize), "SRQ_RESIZE"},
	{uint64(DeviceCapNNotifyCQ), "N_NOTIFY_CQ"},
	{uint64(DeviceCapMemWindow), "MEM_WINDOW"},
	{uint64(DeviceCapUDIPCsum), "UD_IP_CSUM"},
	{uint64(DeviceCapXRC), "XRC"},
	{uint64(DeviceCapMemMgtExtensions), "MEM_MGT_EXTENSIONS"},
	{uint64(DeviceCapMemWindowType2A), "MEM_WINDOW_TYPE_2A"},
	{uint64(DeviceCapMemWindowType2B), "MEM_WINDOW_TYPE_2B"},
	{uint64(DeviceCapRCIPCsum), "RC_IP_CSUM"},
	{uint64(DeviceCapRawIPCsum), "RAW_IP_CSUM"},
	{uint64(DeviceCapManagedFlowSteering), "MANAGED_FLOW_STEERING"},
	{uint64(DeviceCapRawScatterFCS), "RAW_SCATTER_FCS"},
	{uint64(DeviceCapPCIWriteEndPadding), "PCI_WRITE_END_PADDING"},
	{uint64(DeviceCapFlushGlobal), "FLUSH_GLOBAL"},
	{uint64(DeviceCapFlushPersistent), "FLUSH_PERSISTENT"},
	{uint64(DeviceCapAtomicWrite), "ATOMIC_WRITE"},
	{uint64(DeviceCapCCDMABounce), "CC_DMA_BOUNCE"},
}

// String lists the flags by the names ibv_devinfo prints, separated by
// "|", with any unnamed bits last in hex: "BAD_PKEY_CNTR|SRQ_RESIZE".
func (f DeviceCap) String() string { return bitsString(uint64(f), deviceCapNames) }

// AtomicCap is how far a device guarantees atomicity (ibv_atomic_cap).
type AtomicCap uint32

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // no atomic operations
	AtomicHCA  AtomicCap = 1 // atomic among the device's own operations
	AtomicGlob AtomicCap = 2 // atomic with the CPUs and other devices too
)

// String returns the name ibv_devinfo prints, such as "ATOMIC_HCA".
func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "AtomicCap(" + strconv.FormatUint(uint64(a), 10) + ")"
}

// ODPCaps are the device's on-demand paging capabilities (ibv_odp_caps,
// plus xrc_odp_caps).
type ODPCaps struct {
	General ODPGeneralCaps
	RC      ODPTransportCaps
	UC      ODPTransportCaps
	UD      ODPTransportCaps
	XRC     ODPTransportCaps
}

// ODPGeneralCaps are the general ODP capabilities (ibv_odp_general_caps).
type ODPGeneralCaps uint64

// General ODP capabilities.
const (
	ODPSupport         ODPGeneralCaps = 1 << 0
	ODPSupportImplicit ODPGeneralCaps = 1 << 1
)

var odpGeneralNames = []bitName{{1 << 0, "ODP_SUPPORT"}, {1 << 1, "ODP_SUPPORT_IMPLICIT"}}

// String lists the capabilities as ibv_devinfo names them.
func (c ODPGeneralCaps) String() string { return bitsString(uint64(c), odpGeneralNames) }

// ODPTransportCaps are the operations a transport supports on ODP memory
// (ibv_odp_transport_cap_bits).
type ODPTransportCaps uint32

// ODP transport capabilities.
const (
	ODPSupportSend        ODPTransportCaps = 1 << 0
	ODPSupportRecv        ODPTransportCaps = 1 << 1
	ODPSupportWrite       ODPTransportCaps = 1 << 2
	ODPSupportRead        ODPTransportCaps = 1 << 3
	ODPSupportAtomic      ODPTransportCaps = 1 << 4
	ODPSupportSRQRecv     ODPTransportCaps = 1 << 5
	ODPSupportFlush       ODPTransportCaps = 1 << 6
	ODPSupportAtomicWrite ODPTransportCaps = 1 << 7
)

var odpTransportNames = []bitName{
	{1 << 0, "SUPPORT_SEND"}, {1 << 1, "SUPPORT_RECV"}, {1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"}, {1 << 4, "SUPPORT_ATOMIC"}, {1 << 5, "SUPPORT_SRQ"},
	{1 << 6, "SUPPORT_FLUSH"}, {1 << 7, "SUPPORT_ATOMIC_WRITE"},
}

// String lists the capabilities as ibv_devinfo names them.
func (c ODPTransportCaps) String() string { return bitsString(uint64(c), odpTransportNames) }

// RSSCaps are the receive-side scaling capabilities the kernel reports
// (ibv_rss_caps without the provider-specific hash fields).
type RSSCaps struct {
	// SupportedQPTs has bit 1<<t set for each QP type t (IBV_QPT_*) that
	// can use RSS.
	SupportedQPTs              uint32
	MaxRWQIndirectionTables    int
	MaxRWQIndirectionTableSize int
}

// RawPacketCaps are offloads of raw packet QPs (ibv_raw_packet_caps).
type RawPacketCaps uint32

// Raw packet capabilities.
const (
	RawPacketCVLANStripping RawPacketCaps = 1 << 0
	RawPacketScatterFCS     RawPacketCaps = 1 << 1
	RawPacketIPCsum         RawPacketCaps = 1 << 2
	RawPacketDelayDrop      RawPacketCaps = 1 << 3
)

var rawPacketNames = []bitName{
	{1 << 0, "CVLAN_STRIPPING"}, {1 << 1, "SCATTER_FCS"}, {1 << 2, "IP_CSUM"}, {1 << 3, "DELAY_DROP"},
}

// String lists the capabilities by their IBV_RAW_PACKET_CAP_ names.
func (c RawPacketCaps) String() string { return bitsString(uint64(c), rawPacketNames) }

// TMCaps are the tag matching capabilities (ibv_tm_caps); all zero when
// the device has no tag matching.
type TMCaps struct {
	MaxRndvHdrSize int
	MaxNumTags     int
	Flags          uint32 // IBV_TM_CAP_RC (1): tag matching on RC QPs
	MaxOps         int
	MaxSGE         int
}

// CQModCaps are the CQ moderation limits (ibv_cq_moderation_caps).
type CQModCaps struct {
	MaxCQCount  int // completions
	MaxCQPeriod int // microseconds
}

// QueryDevice returns the device's attributes (ibv_query_device_ex).
// It uses the extended query and falls back to the legacy one, which
// fills only the fields up to PhysPortCnt, on a kernel without it.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	if c == nil {
		return DeviceAttr{}, errNil("QueryDevice", "Context")
	}
	if c.closed.Load() {
		return DeviceAttr{}, closedContext("uverbs QueryDevice")
	}
	var resp abi.ExQueryDeviceResp
	out, err := c.fd.CommandEx("uverbs QueryDevice "+c.dev.Name+": EX_QUERY_DEVICE", abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
		abi.Bytes(&abi.ExQueryDevice{}), nil, len(abi.Bytes(&resp)), 0)
	switch {
	case err == nil:
		copy(abi.Bytes(&resp), out)
	case errors.Is(err, ErrNotSupported):
		// ibv_cmd_query_device_any falls back on EOPNOTSUPP and ENOSYS.
		if resp.Base, err = c.queryDeviceLegacy(); err != nil {
			return DeviceAttr{}, err
		}
		resp.ResponseLength = uint32(len(abi.Bytes(&resp.Base)))
	default:
		return DeviceAttr{}, err
	}
	a := decodeDeviceAttr(&resp)
	if a.FWVer, err = readOptional(c.sysfsPath("fw_ver")); err != nil {
		return DeviceAttr{}, fmt.Errorf("uverbs QueryDevice %s: %w", c.dev.Name, err)
	}
	if a.FWVer == "" {
		a.FWVer = providerFWVer(c.driverID, a.RawFWVer)
	}
	if a.BoardID, err = readOptional(c.sysfsPath("board_id")); err != nil {
		return DeviceAttr{}, fmt.Errorf("uverbs QueryDevice %s: %w", c.dev.Name, err)
	}
	return a, nil
}

// queryDeviceLegacy runs the write() command IB_USER_VERBS_CMD_QUERY_DEVICE.
func (c *Context) queryDeviceLegacy() (abi.QueryDeviceResp, error) {
	if c.closed.Load() {
		return abi.QueryDeviceResp{}, closedContext("uverbs QueryDevice")
	}
	var resp abi.QueryDeviceResp
	req := abi.QueryDevice{Response: sys.PointerTo(abi.Bytes(&resp))}
	err := c.fd.Command("uverbs QueryDevice "+c.dev.Name+": QUERY_DEVICE", abi.IB_USER_VERBS_CMD_QUERY_DEVICE, abi.Bytes(&req), abi.Bytes(&resp))
	return resp, err
}

// providerFWVer formats a raw firmware version the way the libibverbs
// provider of the driver does when sysfs has no fw_ver: rxe and siw print
// the three 16-bit fields as major.minor.subminor.
func providerFWVer(driverID uint32, raw uint64) string {
	switch driverID {
	case abi.RDMA_DRIVER_RXE, abi.RDMA_DRIVER_SIW:
		return fmt.Sprintf("%d.%d.%d", uint16(raw>>32), uint16(raw>>16), uint16(raw))
	}
	return ""
}

// decodeDeviceAttr converts the kernel's response. Extended fields are
// taken only when response_length covers them, as libibverbs does: a
// kernel older than this library's headers writes a shorter response.
func decodeDeviceAttr(r *abi.ExQueryDeviceResp) DeviceAttr {
	b := &r.Base
	a := DeviceAttr{
		RawFWVer:              b.FWVer,
		NodeGUID:              beGUID(&b.NodeGUID),
		SysImageGUID:          beGUID(&b.SysImageGUID),
		MaxMRSize:             b.MaxMRSize,
		PageSizeCap:           b.PageSizeCap,
		VendorID:              b.VendorID,
		VendorPartID:          b.VendorPartID,
		HWVer:                 b.HWVer,
		MaxQP:                 int(b.MaxQP),
		MaxQPWR:               int(b.MaxQPWR),
		DeviceCapFlags:        DeviceCap(b.DeviceCapFlags),
		MaxSGE:                int(b.MaxSGE),
		MaxSGERd:              int(b.MaxSGERD),
		MaxCQ:                 int(b.MaxCQ),
		MaxCQE:                int(b.MaxCQE),
		MaxMR:                 int(b.MaxMR),
		MaxPD:                 int(b.MaxPD),
		MaxQPRdAtom:           int(b.MaxQPRDAtom),
		MaxEERdAtom:           int(b.MaxEERDAtom),
		MaxResRdAtom:          int(b.MaxResRDAtom),
		MaxQPInitRdAtom:       int(b.MaxQPInitRDAtom),
		MaxEEInitRdAtom:       int(b.MaxEEInitRDAtom),
		AtomicCap:             AtomicCap(b.AtomicCap),
		MaxEE:                 int(b.MaxEE),
		MaxRDD:                int(b.MaxRDD),
		MaxMW:                 int(b.MaxMW),
		MaxRawIPv6QP:          int(b.MaxRawIPv6QP),
		MaxRawEthyQP:          int(b.MaxRawEthyQP),
		MaxMcastGrp:           int(b.MaxMcastGrp),
		MaxMcastQPAttach:      int(b.MaxMcastQPAttach),
		MaxTotalMcastQPAttach: int(b.MaxTotalMcastQPAttach),
		MaxAH:                 int(b.MaxAH),
		MaxFMR:                int(b.MaxFMR),
		MaxMapPerFMR:          int(b.MaxMapPerFMR),
		MaxSRQ:                int(b.MaxSRQ),
		MaxSRQWR:              int(b.MaxSRQWR),
		MaxSRQSGE:             int(b.MaxSRQSGE),
		MaxPKeys:              int(b.MaxPKeys),
		LocalCAAckDelay:       b.LocalCAAckDelay,
		PhysPortCnt:           int(b.PhysPortCnt),
	}
	whole := abi.Bytes(r)
	// has reports whether the response covers all of field.
	has := func(field []byte) bool { return int(r.ResponseLength) >= fieldEnd(whole, field) }
	if has(abi.Bytes(&r.ODPCaps)) {
		a.ODPCaps.General = ODPGeneralCaps(r.ODPCaps.GeneralCaps)
		a.ODPCaps.RC = ODPTransportCaps(r.ODPCaps.PerTransportCaps.RCODPCaps)
		a.ODPCaps.UC = ODPTransportCaps(r.ODPCaps.PerTransportCaps.UCODPCaps)
		a.ODPCaps.UD = ODPTransportCaps(r.ODPCaps.PerTransportCaps.UDODPCaps)
	}
	if has(abi.Bytes(&r.TimestampMask)) {
		a.CompletionTimestampMask = r.TimestampMask
	}
	if has(abi.Bytes(&r.HCACoreClock)) {
		a.HCACoreClock = r.HCACoreClock
	}
	if has(abi.Bytes(&r.DeviceCapFlagsEx)) {
		a.DeviceCapFlagsEx = DeviceCap(r.DeviceCapFlagsEx)
	}
	if has(abi.Bytes(&r.RSSCaps)) {
		a.RSSCaps = RSSCaps{
			SupportedQPTs:              r.RSSCaps.SupportedQPTs,
			MaxRWQIndirectionTables:    int(r.RSSCaps.MaxRWQIndirectionTables),
			MaxRWQIndirectionTableSize: int(r.RSSCaps.MaxRWQIndirectionTableSize),
		}
	}
	if has(abi.Bytes(&r.MaxWQTypeRQ)) {
		a.MaxWQTypeRQ = int(r.MaxWQTypeRQ)
	}
	if has(abi.Bytes(&r.RawPacketCaps)) {
		a.RawPacketCaps = RawPacketCaps(r.RawPacketCaps)
	}
	if has(abi.Bytes(&r.TMCaps)) {
		a.TMCaps = TMCaps{
			MaxRndvHdrSize: int(r.TMCaps.MaxRndvHdrSize),
			MaxNumTags:     int(r.TMCaps.MaxNumTags),
			Flags:          r.TMCaps.Flags,
			MaxOps:         int(r.TMCaps.MaxOps),
			MaxSGE:         int(r.TMCaps.MaxSGE),
		}
	}
	if has(abi.Bytes(&r.CQModerationCaps)) {
		a.CQModCaps = CQModCaps{
			MaxCQCount:  int(r.CQModerationCaps.MaxCQModerationCount),
			MaxCQPeriod: int(r.CQModerationCaps.MaxCQModerationPeriod),
		}
	}
	if has(abi.Bytes(&r.MaxDMSize)) {
		a.MaxDMSize = r.MaxDMSize
	}
	if has(abi.Bytes(&r.XRCODPCaps)) {
		a.ODPCaps.XRC = ODPTransportCaps(r.XRCODPCaps)
	}
	return a
}

// fieldEnd returns the offset just past field inside whole, a struct's
// bytes that field is part of.
func fieldEnd(whole, field []byte) int {
	for i := range whole {
		if &whole[i] == &field[0] {
			return i + len(field)
		}
	}
	panic("uverbs: fieldEnd: not a field of the struct")
}

// beGUID reads a GUID the kernel keeps in network byte order.
func beGUID(v *uint64) GUID { return GUID(binary.BigEndian.Uint64(abi.Bytes(v))) }

// PortAttr is what the kernel reports about a port (ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32 // IB_UVERBS_PCF_* (ibv_port_cap_flags)
	PortCapFlags2 uint16 // ibv_port_cap_flags2
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTblLen    int
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8 // encoded: 1 = 1 VL, 2 = 2, 3 = 4, 4 = 8, 5 = 15
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	// ActiveWidth is the link width bit: 1 = 1X, 2 = 4X, 4 = 8X,
	// 8 = 12X, 16 = 2X.
	ActiveWidth uint8
	// ActiveSpeed is the per-lane speed bit: 1 = 2.5 Gb/s (SDR),
	// 2 = 5 (DDR), 4 = 10 (QDR), 8 = 10 (FDR10), 16 = 14 (FDR),
	// 32 = 25 (EDR), 64 = 50 (HDR), 128 = 100 (NDR).
	ActiveSpeed uint8
	// ActiveSpeedEx is the same in a wider field that also holds
	// 256 = 200 Gb/s (XDR); Linux 6.7 added it, older kernels leave it 0.
	ActiveSpeedEx uint32
	PhysState     uint8 // 1 SLEEP, 2 POLLING, 3 DISABLED, 4 TRAINING, 5 LINK_UP, 6 ERROR_RECOVERY, 7 PHY_TEST
	LinkLayer     LinkLayer
	// GRHRequired means every packet needs a global route header
	// (IBV_QPF_GRH_REQUIRED), as on RoCE.
	GRHRequired bool
}

// MTU is an IB path MTU (ibv_mtu).
type MTU uint8

// MTUs, numbered as ibv_mtu.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes, or 0 for a value that is no MTU.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// String returns the MTU in bytes, as ibv_devinfo prints it: "1024".
func (m MTU) String() string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "MTU(" + strconv.Itoa(int(m)) + ")"
}

// LinkLayer is the link layer under a port (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2 // RoCE (and iWARP)
)

// String returns the name ibv_devinfo prints: "InfiniBand", "Ethernet",
// "Unspecified".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "LinkLayer(" + strconv.Itoa(int(l)) + ")"
}

// QueryPort returns the attributes of a port (ibv_query_port). Ports are
// numbered from 1.
func (c *Context) QueryPort(port int) (PortAttr, error) {
	if c == nil {
		return PortAttr{}, errNil("QueryPort", "Context")
	}
	op := "uverbs QueryPort " + c.portName(port)
	if c.closed.Load() {
		return PortAttr{}, closedContext(op)
	}
	if err := c.checkPort(op, port); err != nil {
		return PortAttr{}, err
	}
	var resp abi.QueryPortRespEx
	m := sys.NewMethod(op+": QUERY_PORT", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT)
	m.InUint(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port), 8)
	m.Out(abi.UVERBS_ATTR_QUERY_PORT_RESP, abi.Bytes(&resp))
	err := c.exec(m)
	if errors.Is(err, ErrNotSupported) {
		// A kernel without the method (before 5.0): the write() command,
		// as ibv_cmd_query_port falls back to.
		resp = abi.QueryPortRespEx{}
		resp.LegacyResp, err = c.queryPortLegacy(port)
	}
	if err != nil {
		return PortAttr{}, err
	}
	return decodePortAttr(&resp), nil
}

// queryPortLegacy runs the write() command IB_USER_VERBS_CMD_QUERY_PORT.
func (c *Context) queryPortLegacy(port int) (abi.QueryPortResp, error) {
	var resp abi.QueryPortResp
	if c.closed.Load() {
		return resp, closedContext("uverbs QueryPort")
	}
	req := abi.QueryPort{Response: sys.PointerTo(abi.Bytes(&resp)), PortNum: uint8(port)}
	err := c.fd.Command("uverbs QueryPort "+c.portName(port)+": QUERY_PORT", abi.IB_USER_VERBS_CMD_QUERY_PORT, abi.Bytes(&req), abi.Bytes(&resp))
	return resp, err
}

func decodePortAttr(r *abi.QueryPortRespEx) PortAttr {
	l := &r.LegacyResp
	return PortAttr{
		State:         PortState(l.State),
		MaxMTU:        MTU(l.MaxMTU),
		ActiveMTU:     MTU(l.ActiveMTU),
		GIDTblLen:     int(l.GIDTblLen),
		PortCapFlags:  l.PortCapFlags,
		PortCapFlags2: r.PortCapFlags2,
		MaxMsgSz:      l.MaxMsgSz,
		BadPKeyCntr:   l.BadPKeyCntr,
		QKeyViolCntr:  l.QKeyViolCntr,
		PKeyTblLen:    int(l.PKeyTblLen),
		LID:           l.LID,
		SMLID:         l.SMLID,
		LMC:           l.LMC,
		MaxVLNum:      l.MaxVLNum,
		SMSL:          l.SMSL,
		SubnetTimeout: l.SubnetTimeout,
		InitTypeReply: l.InitTypeReply,
		ActiveWidth:   l.ActiveWidth,
		ActiveSpeed:   l.ActiveSpeed,
		// __u32 active_speed_ex follows __u8 reserved[2] in the Linux 6.7
		// header; the 6.1 header this package is generated from still
		// calls all six bytes reserved, which older kernels zero.
		ActiveSpeedEx: binary.NativeEndian.Uint32(r.Reserved[2:6]),
		PhysState:     l.PhysState,
		LinkLayer:     LinkLayer(l.LinkLayer),
		GRHRequired:   l.Flags&abi.IB_UVERBS_QPF_GRH_REQUIRED != 0,
	}
}

// QueryPKey returns the P_Key at index of the port's P_Key table
// (ibv_query_pkey), read from sysfs as libibverbs does. 0xffff is the
// default full-membership key.
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	if c == nil {
		return 0, errNil("QueryPKey", "Context")
	}
	op := "uverbs QueryPKey " + c.portName(port) + " index " + strconv.Itoa(index)
	if c.closed.Load() {
		return 0, closedContext(op)
	}
	if err := c.checkPort(op, port); err != nil {
		return 0, err
	}
	if index < 0 {
		return 0, &sys.Error{Op: op, Err: fmt.Errorf("negative index: %w", errInvalid)}
	}
	s, err := readAttr(filepath.Join(c.portDir(port), "pkeys", strconv.Itoa(index)))
	if err != nil {
		return 0, &sys.Error{Op: op, Err: err}
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	if err != nil {
		return 0, &sys.Error{Op: op, Err: fmt.Errorf("malformed P_Key %q", s)}
	}
	return uint16(v), nil
}

// sysfsPath is an attribute of the context's device in sysfs:
// /sys/class/infiniband/<device>/<name>.
func (c *Context) sysfsPath(name ...string) string {
	return filepath.Join(append([]string{sysfsRoot, "class", "infiniband", c.dev.Name}, name...)...)
}

// portDir is a port's sysfs directory: /sys/class/infiniband/<device>/ports/<port>.
func (c *Context) portDir(port int) string { return c.sysfsPath("ports", strconv.Itoa(port)) }

// portName names a port in errors: "rxe0/1".
func (c *Context) portName(port int) string { return c.dev.Name + "/" + strconv.Itoa(port) }

// checkPort fails for a port number the device does not have, before any
// kernel call. Without a port list from sysfs it checks only the lower
// bound and leaves the rest to the kernel.
func (c *Context) checkPort(op string, port int) error {
	n := c.portCount()
	switch {
	case n > 0 && (port < 1 || port > n):
		return &sys.Error{Op: op, Err: fmt.Errorf("%s has no port %d (its ports are 1 to %d): %w", c.dev.Name, port, n, errInvalid)}
	case port < 1:
		return &sys.Error{Op: op, Err: fmt.Errorf("port numbers start at 1: %w", errInvalid)}
	case port > 0xff:
		return &sys.Error{Op: op, Err: fmt.Errorf("port %d is out of range (at most 255): %w", port, errInvalid)}
	}
	return nil
}

// portCount is the highest port number sysfs listed when the device was
// opened, 0 if it listed none.
func (c *Context) portCount() int {
	n := 0
	for _, p := range c.dev.Ports {
		n = max(n, p.Num)
	}
	return n
}

// bitName names one flag bit.
type bitName struct {
	bit  uint64
	name string
}

// bitsString lists the set flags of v by name, separated by "|", and
// any unnamed bits last in hex; "0" for none.
func bitsString(v uint64, names []bitName) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for _, n := range names {
		if v&n.bit == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(n.name)
		v &^= n.bit
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "%#x", v)
	}
	return b.String()
}
