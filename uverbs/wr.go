package uverbs

import "fmt"

// SGE is one scatter/gather element (ibv_sge): Length bytes at Addr in
// memory registered with the key LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request's operation (ibv_wr_opcode).
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
	WRFlush             WROpcode = 14 // kernel 6.2+, device cap FLUSH_GLOBAL/PERSISTENT
	WRAtomicWrite       WROpcode = 15 // kernel 6.2+, device cap ATOMIC_WRITE
)

var wrOpcodeNames = map[WROpcode]string{
	WRRDMAWrite: "RDMA_WRITE", WRRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRDMARead: "RDMA_READ", WRAtomicCmpAndSwp: "ATOMIC_CMP_AND_SWP",
	WRAtomicFetchAndAdd: "ATOMIC_FETCH_AND_ADD", WRLocalInv: "LOCAL_INV", WRBindMW: "BIND_MW",
	WRSendWithInv: "SEND_WITH_INV", WRFlush: "FLUSH", WRAtomicWrite: "ATOMIC_WRITE",
}

// String is the opcode's name in ibv_wr_opcode without the IBV_WR_
// prefix ("RDMA_WRITE"), or WROpcode(n).
func (o WROpcode) String() string {
	if s, ok := wrOpcodeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("WROpcode(%d)", uint32(o))
}

// SendFlags modify a send work request (ibv_send_flags).
type SendFlags uint32

// The send flags. Inline data (SendInline) needs no registration: the
// library copies it at post time, and an address it cannot read fails
// the post with EINVAL instead of crashing the program. Data that lies
// inside a registered MR and is named by that MR's LKey is the cheapest
// to post: mlx5 copies it without that check (the MR keeps the memory
// mapped; docs/providers.md), about 145 instructions less a post than
// other memory.
const (
	SendFence     SendFlags = 1 << 0 // wait for earlier RDMA reads and atomics
	SendSignaled  SendFlags = 1 << 1 // generate a completion
	SendSolicited SendFlags = 1 << 2 // set the solicited event bit
	SendInline    SendFlags = 1 << 3 // copy the data into the WQE at post time
)

func (f SendFlags) String() string {
	return flagString(uint64(f), []string{"FENCE", "SIGNALED", "SOLICITED", "INLINE"})
}

// FlushType selects what a FLUSH makes durable or visible.
type FlushType uint8

const (
	FlushGlobal     FlushType = 1 << 0 // IB_FLUSH_GLOBAL: global visibility
	FlushPersistent FlushType = 1 << 1 // IB_FLUSH_PERSISTENT: persistence
)

// FlushLevel is the granularity of a FLUSH.
type FlushLevel uint8

const (
	FlushRange FlushLevel = 0 // IB_FLUSH_RANGE: [RemoteAddr, RemoteAddr+FlushLength)
	FlushMR    FlushLevel = 1 // IB_FLUSH_MR: the whole memory region
)

// SendWR is a send-queue work request (ibv_send_wr). Fields that the
// opcode does not use are ignored. Next chains a post list, posted in
// order by one PostSend.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE // the local buffers; with SendInline, copied at post time

	Imm            uint32 // *_WITH_IMM, host order (sent big-endian)
	InvalidateRKey uint32 // SEND_WITH_INV, LOCAL_INV

	RemoteAddr uint64 // RDMA, atomics, FLUSH, ATOMIC_WRITE
	RKey       uint32
	CompareAdd uint64 // ATOMIC_CMP_AND_SWP: compare; FETCH_AND_ADD: add
	Swap       uint64 // ATOMIC_CMP_AND_SWP

	AtomicWrite [8]byte // ATOMIC_WRITE: the 8 bytes to write

	FlushType   FlushType // FLUSH
	FlushLevel  FlushLevel
	FlushLength uint64 // FLUSH with FlushRange

	AH         *AH    // UD: destination
	RemoteQPN  uint32 // UD
	RemoteQKey uint32 // UD

	Bind *MWBind // BIND_MW

	Next *SendWR
}

// MWBind binds a type 2 memory window with a send work request.
type MWBind struct {
	MW     *MW
	RKey   uint32 // the window's new rkey (only its low 8 bits may change)
	MR     *MR
	Addr   uint64
	Length uint64
	Access Access
}

// RecvWR is a receive work request (ibv_recv_wr).
type RecvWR struct {
	WRID uint64
	SGL  []SGE
	Next *RecvWR
}

// WCStatus is a work completion's status (ibv_wc_status).
type WCStatus uint32

const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
)

// The texts of ibv_wc_status_str.
var wcStatusText = []string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error",
	"Work Request Flushed Error", "memory bind operation error",
	"bad response error", "local access error",
	"remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error",
	"invalid EE context number", "invalid EE context state",
	"fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusText) {
		return wcStatusText[s]
	}
	return fmt.Sprintf("unknown status (%d)", uint32(s))
}

// Err returns nil for success and an error matching the status
// otherwise (errors.Is(err, WCRemAccessErr)), whose text says it is a
// work completion's.
func (s WCStatus) Err() error {
	if s == WCSuccess {
		return nil
	}
	return &wcError{s}
}

// Error makes a status usable as an error and as an errors.Is target.
// It is the status's name, as String, so that %v of any status,
// success included, prints just that name.
func (s WCStatus) Error() string { return s.String() }

type wcError struct{ s WCStatus }

func (e *wcError) Error() string { return "work completion: " + e.s.String() }
func (e *wcError) Unwrap() error { return e.s }

// WCOpcode is what a completed work request did (ibv_wc_opcode).
type WCOpcode uint32

const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCTSO             WCOpcode = 7
	WCFlush           WCOpcode = 8
	WCAtomicWrite     WCOpcode = 9
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

var wcOpcodeNames = map[WCOpcode]string{
	WCSend: "SEND", WCRDMAWrite: "RDMA_WRITE", WCRDMARead: "RDMA_READ", WCCompSwap: "COMP_SWAP",
	WCFetchAdd: "FETCH_ADD", WCBindMW: "BIND_MW", WCLocalInv: "LOCAL_INV", WCTSO: "TSO",
	WCFlush: "FLUSH", WCAtomicWrite: "ATOMIC_WRITE", WCRecv: "RECV", WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

func (o WCOpcode) String() string {
	if s, ok := wcOpcodeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("WCOpcode(%d)", uint32(o))
}

// WCFlags describe a work completion. The bits are the kernel's
// (enum ib_wc_flags, what every provider's completion carries), which
// differ from libibverbs' ibv_wc_flags in two places: WCWithInv is 1<<2
// here and IBV_WC_WITH_INV 1<<3, WCIPCsumOK the reverse. Test the bits by
// name.
type WCFlags uint32

const (
	WCWithGRH            WCFlags = 1 << 0 // a UD receive carries a 40-byte GRH first
	WCWithImm            WCFlags = 1 << 1 // Imm is valid
	WCWithInv            WCFlags = 1 << 2 // Imm is the invalidated rkey
	WCIPCsumOK           WCFlags = 1 << 3
	WCWithSMAC           WCFlags = 1 << 4
	WCWithVLAN           WCFlags = 1 << 5
	WCWithNetworkHdrType WCFlags = 1 << 6
)

func (f WCFlags) String() string {
	return flagString(uint64(f), []string{"GRH", "WITH_IMM", "WITH_INV", "IP_CSUM_OK", "WITH_SMAC", "WITH_VLAN", "WITH_NETWORK_HDR_TYPE"})
}

// WorkCompletion is one completed work request (ibv_wc). Its first 46
// bytes are laid out as the kernel's struct ib_uverbs_wc, so a provider
// whose device writes that struct (rxe) copies them as one block; the
// field order is part of that and must not change.
type WorkCompletion struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// Imm is, as in ibv_wc's union, the immediate data (host order)
	// when Flags has WCWithImm, the rkey a SEND_WITH_INV invalidated
	// when Flags has WCWithInv (see InvalidatedRKey), and 0 otherwise.
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      int // the port a directed-route SMP arrived on (switches); 0 otherwise
}

// InvalidatedRKey is the rkey that the SEND_WITH_INV w completes
// invalidated (Imm, when Flags has WCWithInv), or 0.
func (w *WorkCompletion) InvalidatedRKey() uint32 {
	if w.Flags&WCWithInv == 0 {
		return 0
	}
	return w.Imm
}

// flagString prints set bits by name, unknown ones in hex.
func flagString(v uint64, names []string) string {
	if v == 0 {
		return "0"
	}
	s := ""
	for i, n := range names {
		if n != "" && v&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
			v &^= 1 << i
		}
	}
	if v != 0 {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("%#x", v)
	}
	return s
}
