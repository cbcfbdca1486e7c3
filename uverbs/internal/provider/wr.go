package provider

import (
	"fmt"
	"unsafe"
)

// The providers' views of uverbs' work requests and completions: the
// same fields, in the same order, of the same sizes (the enumerations
// are plain numbers with the same values). uverbs converts a pointer to
// its public type into one to the view with As; TestProviderViews in
// uverbs checks each pair field by field, so the two cannot drift.

// SGE is uverbs.SGE.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is uverbs.WROpcode (the kernel's ib_uverbs_wr_opcode).
type WROpcode uint32

const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	WRLocalInv          WROpcode = 7
	WRBindMW            WROpcode = 8
	WRSendWithInv       WROpcode = 9
	WRFlush             WROpcode = 14
	WRAtomicWrite       WROpcode = 15
)

var wrOpcodeNames = map[WROpcode]string{
	WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ", WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", WRLocalInv: "LOCAL_INV", WRBindMW: "BIND_MW",
	WRSendWithInv: "SEND_WITH_INV", WRFlush: "FLUSH", WRAtomicWrite: "ATOMIC_WRITE",
}

// String is uverbs.WROpcode's String (the names live here, so that a
// provider's errors name opcodes as uverbs' do).
func (o WROpcode) String() string {
	if s, ok := wrOpcodeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("WROpcode(%d)", uint32(o))
}

// SendFlags are uverbs.SendFlags.
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// FlushType and FlushLevel are uverbs'.
type (
	FlushType  uint8
	FlushLevel uint8
)

const (
	FlushGlobal     FlushType  = 1 << 0
	FlushPersistent FlushType  = 1 << 1
	FlushRange      FlushLevel = 0
	FlushMR         FlushLevel = 1
)

// SendWR is uverbs.SendWR.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE

	Imm            uint32
	InvalidateRKey uint32

	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64

	AtomicWrite [8]byte

	FlushType   FlushType
	FlushLevel  FlushLevel
	FlushLength uint64

	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32

	Bind *MWBind

	Next *SendWR
}

// MWBind is uverbs.MWBind.
type MWBind struct {
	MW     *MW
	RKey   uint32
	MR     *MR
	Addr   uint64
	Length uint64
	Access uint32
}

// RecvWR is uverbs.RecvWR.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
	Next *RecvWR
}

// WCFlags are uverbs.WCFlags (the kernel's ib_wc_flags).
type WCFlags uint32

const (
	WCWithGRH WCFlags = 1 << 0
	WCWithImm WCFlags = 1 << 1
	WCWithInv WCFlags = 1 << 2
)

// WCSuccess is the status of a completion without error.
const WCSuccess = 0

// WC is uverbs.WorkCompletion.
type WC struct {
	WRID         uint64
	Status       uint32 // uverbs.WCStatus: ibv_wc_status
	Opcode       uint32 // uverbs.WCOpcode: ibv_wc_opcode
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      int
}

// QPType is uverbs.QPType.
type QPType uint8

const (
	QPTypeRC QPType = 2
	QPTypeUC QPType = 3
	QPTypeUD QPType = 4
)

// QPCap is uverbs.QPCap (the two convert as types of one layout).
type QPCap struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// As views p, a uverbs type, as the provider type V of the same layout
// (TestProviderViews checks the pairs uverbs converts). The compiler
// folds the size check away.
func As[V, T any](p *T) *V {
	var v V
	if unsafe.Sizeof(*p) < unsafe.Sizeof(v) {
		panic("provider.As: the view is larger than the value")
	}
	return (*V)(unsafe.Pointer(p))
}

// SliceAs views s as a slice of V, whose elements have the layout of
// T's.
func SliceAs[V, T any](s []T) []V {
	var v V
	var t T
	if unsafe.Sizeof(t) != unsafe.Sizeof(v) {
		panic("provider.SliceAs: elements of different sizes")
	}
	return unsafe.Slice((*V)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}
