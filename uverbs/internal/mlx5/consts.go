package mlx5

// Send WQE opcodes (mlx5dv.h MLX5_OPCODE_*), the low byte of the control
// segment's opmod_idx_opcode. The requester CQE carries the same value in
// the top byte of sop_drop_qpn.
const (
	OpNOP          = 0x00
	OpSendInval    = 0x01
	OpRDMAWrite    = 0x08
	OpRDMAWriteImm = 0x09
	OpSend         = 0x0a
	OpSendImm      = 0x0b
	OpRDMARead     = 0x10
	OpAtomicCS     = 0x11
	OpAtomicFA     = 0x12
)

// Control segment fm_ce_se bits (mlx5dv.h MLX5_WQE_CTRL_*).
const (
	CtrlSolicited  = 0x02 // MLX5_WQE_CTRL_SOLICITED: solicited event at the responder
	CtrlCQUpdate   = 0x08 // MLX5_WQE_CTRL_CQ_UPDATE: signaled, a CQE on completion
	CtrlSmallFence = 0x20 // MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE
	CtrlFence      = 0x80 // MLX5_WQE_CTRL_FENCE: wait for earlier reads and atomics
)

// Sizes and fixed values of the work queue formats (mlx5dv.h).
const (
	SendWQEBB     = 64         // MLX5_SEND_WQE_BB: the send queue's basic block
	SegSize       = 16         // one DS unit: ctrl, raddr, atomic and data segments
	AVSize        = 48         // struct mlx5_wqe_datagram_seg
	CQESize       = 64         // struct mlx5_cqe64
	InvalidLKey   = 0x100      // MLX5_INVALID_LKEY: ends a receive scatter list
	InlineSeg     = 0x80000000 // MLX5_INLINE_SEG: byte_count flag of an inline segment
	ExtendedUDAV  = 0x80000000 // MLX5_EXTENDED_UD_AV: dqp_dct flag of a UD datagram segment
	AtomicSize    = 8          // MLX5_ATOMIC_SIZE: byte_count of an atomic's local data segment
	BFOffset      = 0x800      // MLX5_BF_OFFSET: first doorbell/BlueFlame register in a UAR page
	CQDoorbell    = 0x20       // MLX5_CQ_DOORBELL: the CQ arm register in a UAR page
	maxDS         = 0x3f       // qpn_ds holds the WQE size in 6 bits of 16-byte units
	srqNextSegLen = 16         // struct mlx5_wqe_srq_next_seg
)

// Doorbell record slots, as 4-byte big-endian words (mlx5dv.h MLX5_RCV_DBR,
// MLX5_SND_DBR; mlx5.h MLX5_CQ_SET_CI, MLX5_CQ_ARM_DB). A QP's record and a
// CQ's record are 8 bytes each, an SRQ's 4; libmlx5 gives each its own
// cache line of a doorbell page (dbrec.c).
const (
	RcvDBR     = 0 // byte offset of the receive counter in a QP's record
	SndDBR     = 4 // byte offset of the send counter
	CQSetCIDBR = 0 // byte offset of the consumer index in a CQ's record
	CQArmDBR   = 4 // byte offset of the arm word
	DBRecSize  = 8 // bytes a QP or CQ record uses
)

// CQ arm commands (mlx5dv.h MLX5_CQ_DB_REQ_NOT*).
const (
	armNext      = 0 << 24 // MLX5_CQ_DB_REQ_NOT: the next completion
	armSolicited = 1 << 24 // MLX5_CQ_DB_REQ_NOT_SOL: the next solicited one
)

// CQE opcodes, the high nibble of op_own (mlx5dv.h MLX5_CQE_*).
const (
	CQEReq         = 0
	CQERespWRImm   = 1
	CQERespSend    = 2
	CQERespSendImm = 3
	CQERespSendInv = 4
	CQEResizeCQ    = 5
	CQENoPacket    = 6
	CQESigErr      = 12
	CQEReqErr      = 13
	CQERespErr     = 14
	CQEInvalid     = 15
)

// Error CQE syndromes (mlx5dv.h MLX5_CQE_SYNDROME_*).
const (
	SyndLocalLength      = 0x01
	SyndLocalQPOp        = 0x02
	SyndLocalProt        = 0x04
	SyndWRFlush          = 0x05
	SyndMWBind           = 0x06
	SyndBadResp          = 0x10
	SyndLocalAccess      = 0x11
	SyndRemoteInvalReq   = 0x12
	SyndRemoteAccess     = 0x13
	SyndRemoteOp         = 0x14
	SyndTransportRetry   = 0x15
	SyndRNRRetry         = 0x16
	SyndRemoteAborted    = 0x22
	inlineScatter32      = 0x4 // MLX5_INLINE_SCATTER_32 in op_own
	inlineScatter64      = 0x8 // MLX5_INLINE_SCATTER_64
	cqeOwnerMask         = 0x1
	cqeOpcodeInvalidByte = CQEInvalid << 4 // what a fresh CQ buffer's op_own holds
)

// Work completion statuses, the numbers of enum ibv_wc_status
// (infiniband/verbs.h; the kernel's enum ib_wc_status has the same
// values). uverbs maps them to its WCStatus.
const (
	WCSuccess        = 0
	WCLocLenErr      = 1
	WCLocQPOpErr     = 2
	WCLocEECOpErr    = 3
	WCLocProtErr     = 4
	WCWRFlushErr     = 5
	WCMWBindErr      = 6
	WCBadRespErr     = 7
	WCLocAccessErr   = 8
	WCRemInvReqErr   = 9
	WCRemAccessErr   = 10
	WCRemOpErr       = 11
	WCRetryExcErr    = 12
	WCRNRRetryExcErr = 13
	WCRemAbortErr    = 16
	WCGeneralErr     = 21
)

// Work completion opcodes, the numbers of enum ibv_wc_opcode.
const (
	WCOpSend         = 0
	WCOpRDMAWrite    = 1
	WCOpRDMARead     = 2
	WCOpCompSwap     = 3
	WCOpFetchAdd     = 4
	WCOpRecv         = 1 << 7
	WCOpRecvRDMAWImm = WCOpRecv + 1
	wcOpUnknown      = 0xff
)

// Work completion flags, the bits of enum ibv_wc_flags.
const (
	WCFlagGRH     = 1 << 0
	WCFlagWithImm = 1 << 1
	WCFlagWithInv = 1 << 3
)
