package mlx5

import (
	"fmt"
	"math/bits"

	"github.com/purerdma/rdma/internal/sys"
)

// QPType is a QP transport, numbered as enum ibv_qp_type.
type QPType uint8

// The transports this package builds work requests for.
const (
	RC QPType = 2 // IBV_QPT_RC
	UC QPType = 3 // IBV_QPT_UC
	UD QPType = 4 // IBV_QPT_UD
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// ErrInvalid is returned for sizes or work requests the device cannot
// take; the error's text says which limit. It matches EINVAL
// (sys.ErrInvalid), so the provider passes it on as uverbs' class.
var ErrInvalid = fmt.Errorf("mlx5: %w", sys.ErrInvalid)

// ErrBusy is returned at once when a bounded queue is full: the send or
// receive queue holds its maximum of outstanding work requests, or the
// SRQ has no free WQE. Nothing was written. It matches sys.ErrBusy.
var ErrBusy = fmt.Errorf("mlx5: queue full: %w", sys.ErrBusy)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Limits are the device's queue limits from the GET_CONTEXT response
// (struct mlx5_ib_alloc_ucontext_resp).
type Limits struct {
	MaxSQDescSz  int // max_sq_desc_sz: the largest send WQE, bytes
	MaxRQDescSz  int // max_rq_desc_sz: the largest receive WQE, bytes
	MaxSendWQEBB int // max_send_wqebb: the most 64-byte blocks in an SQ
	MaxRecvWR    int // max_recv_wr
	MaxSRQRecvWR int // max_srq_recv_wr
}

// roundupPow2 is roundup_pow_of_two for n >= 1.
func roundupPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// ilog32 is rdma-core's ilog32: the number of bits needed for v.
func ilog32(v int) int { return bits.Len32(uint32(v)) }

func align(n, a int) int { return (n + a - 1) / a * a }

// SQOverhead is the bytes a send WQE needs before its data segments, as
// verbs.c _sq_overhead computes it for the default operations of the
// transport: the largest of ctrl (16), ctrl+raddr (32), ctrl+raddr+atomic
// (48) and, when mw is set, the UMR of a memory-window bind or local
// invalidate (ctrl 16 + umr ctrl 48 + mkey context 64 + 64 = 192, which
// libmlx5 includes for RC and UC by default), plus the 48-byte datagram
// segment for UD. Without mw, the operations are those the provider
// posts on the transport: RC's include atomics (48); UC has RDMA write
// but no read or atomics (32, what libmlx5 computes for UC's send and
// write operations). UD's default operations have no RDMA or atomics:
// 16+48.
func SQOverhead(t QPType, mw bool) (int, error) {
	switch t {
	case RC, UC:
		if mw {
			return 192, nil
		}
		if t == UC {
			return 2 * SegSize, nil // ctrl + raddr
		}
		return 48, nil
	case UD:
		return SegSize + AVSize, nil
	}
	return 0, invalid("QP type %v", t)
}

// SQSizing is a send queue's geometry.
type SQSizing struct {
	WQESize   int // bytes of the largest WQE, a multiple of 64
	WQECnt    int // 64-byte blocks in the ring, a power of two (sq_wqe_count of CREATE_QP)
	MaxPost   int // outstanding work requests it holds (>= the max_send_wr asked for)
	MaxGS     int // data segments per work request (max_send_sge as asked)
	MaxInline int // inline bytes per work request (the cap reported back)
	Bytes     int // WQECnt*64
}

// SQSize computes the send queue as verbs.c mlx5_calc_send_wqe and
// mlx5_calc_sq_size do: WQE size = align(max(overhead + 16*max_send_sge,
// overhead + align(4 + max_inline, 16)), 64); ring bytes =
// roundup_pow2(max_send_wr * WQE size); max_inline = WQE size - overhead
// - 4; max_post = ring bytes / WQE size. maxSendWR 0 gives a zero SQ.
func SQSize(t QPType, mw bool, maxSendWR, maxSendSGE, maxInline int, lim Limits) (SQSizing, error) {
	if maxSendWR < 0 || maxSendSGE < 0 || maxInline < 0 {
		return SQSizing{}, invalid("negative send queue capability")
	}
	if maxSendWR == 0 {
		return SQSizing{}, nil
	}
	overhead, err := SQOverhead(t, mw)
	if err != nil {
		return SQSizing{}, err
	}
	size := overhead
	inl := 0
	if maxInline > 0 {
		inl = size + align(4+maxInline, 16)
	}
	if maxGather := (lim.MaxSQDescSz - size) / SegSize; maxSendSGE > maxGather {
		return SQSizing{}, invalid("max_send_sge %d above the device's %d", maxSendSGE, maxGather)
	}
	size += maxSendSGE * SegSize
	tot := max(size, inl)
	if tot > lim.MaxSQDescSz {
		return SQSizing{}, invalid("send WQE of %d bytes above the device's %d", tot, lim.MaxSQDescSz)
	}
	wqeSize := align(tot, SendWQEBB)
	if wqeSize > lim.MaxSQDescSz {
		return SQSizing{}, invalid("send WQE of %d bytes above the device's %d", wqeSize, lim.MaxSQDescSz)
	}
	if maxSendWR > 0x7fffffff/lim.MaxSQDescSz {
		return SQSizing{}, invalid("max_send_wr %d too large", maxSendWR)
	}
	wq := roundupPow2(maxSendWR * wqeSize)
	if wq/SendWQEBB > lim.MaxSendWQEBB {
		return SQSizing{}, invalid("send queue of %d blocks above the device's %d", wq/SendWQEBB, lim.MaxSendWQEBB)
	}
	return SQSizing{
		WQESize:   wqeSize,
		WQECnt:    wq / SendWQEBB,
		MaxPost:   wq / wqeSize,
		MaxGS:     maxSendSGE,
		MaxInline: wqeSize - overhead - 4,
		Bytes:     wq,
	}, nil
}

// RQSizing is a receive queue's geometry.
type RQSizing struct {
	WQESize  int // bytes per WQE, a power of two
	WQEShift int // log2(WQESize): rq_wqe_shift of CREATE_QP
	WQECnt   int // WQEs in the ring: rq_wqe_count of CREATE_QP
	MaxPost  int // outstanding receives it holds
	MaxGS    int // data segments per WQE (WQESize/16)
	Bytes    int // WQECnt*WQESize, at least 64
}

// RQSize computes the receive queue as verbs.c mlx5_calc_rcv_wqe and
// mlx5_calc_rq_size do (no WQE signature, no out-of-order receive): WQE
// size = roundup_pow2(16 * max(max_recv_sge, 1)); ring bytes =
// max(roundup_pow2(max_recv_wr) * WQE size, 64); max_post = 1 <<
// ilog32(wqe_cnt - 1). A QP on an SRQ, or maxRecvWR 0, has no RQ.
func RQSize(maxRecvWR, maxRecvSGE int, onSRQ bool, lim Limits) (RQSizing, error) {
	if maxRecvWR < 0 || maxRecvSGE < 0 {
		return RQSizing{}, invalid("negative receive queue capability")
	}
	if maxRecvWR == 0 || onSRQ {
		return RQSizing{}, nil
	}
	if maxRecvWR > lim.MaxRecvWR {
		return RQSizing{}, invalid("max_recv_wr %d above the device's %d", maxRecvWR, lim.MaxRecvWR)
	}
	size := SegSize * max(maxRecvSGE, 1)
	if size > lim.MaxRQDescSz {
		return RQSizing{}, invalid("receive WQE of %d bytes above the device's %d", size, lim.MaxRQDescSz)
	}
	size = roundupPow2(size)
	if size > lim.MaxRQDescSz {
		return RQSizing{}, invalid("receive WQE of %d bytes above the device's %d", size, lim.MaxRQDescSz)
	}
	wq := max(roundupPow2(maxRecvWR)*size, SendWQEBB)
	cnt := wq / size
	return RQSizing{
		WQESize:  size,
		WQEShift: ilog32(size - 1),
		WQECnt:   cnt,
		MaxPost:  1 << ilog32(cnt-1),
		MaxGS:    size / SegSize,
		Bytes:    wq,
	}, nil
}

// QPBuffer is where the queues of a QP sit in the one buffer whose address
// CREATE_QP passes: the RQ at offset 0, the SQ right after it (verbs.c
// mlx5_calc_wq_size: rq.offset = 0, sq.offset = RQ bytes), the whole
// rounded up to pageSize (the kernel pins whole pages).
func QPBuffer(sq SQSizing, rq RQSizing, pageSize int) (sqOffset, bytes int) {
	return rq.Bytes, align(rq.Bytes+sq.Bytes, pageSize)
}

// SRQSizing is a shared receive queue's geometry.
type SRQSizing struct {
	WQESize  int // bytes per WQE, a power of two >= 32
	WQEShift int // log2(WQESize)
	WQECnt   int // WQEs in the ring, a power of two
	MaxGS    int // data segments per WQE: (WQESize - 16) / 16
	MaxWR    int // the max_wr CREATE_SRQ passes: WQECnt - 1
	Bytes    int // WQECnt * WQESize
}

// SRQSize computes a shared receive queue as srq.c mlx5_alloc_srq_buf
// does without its wait queue (the classic layout, where one WQE always
// stays free as the list's tail): WQE size = roundup_pow2(max(32, 16 + 16
// * max_sge)), WQEs = roundup_pow2(max_wr + 1), max_sge rounded up to what
// the WQE holds. Current libmlx5 also reserves a wait queue when the
// device allows 2*max_wr+1 WQEs; the application sees the same max_wr.
func SRQSize(maxWR, maxSGE int, lim Limits) (SRQSizing, error) {
	if maxWR <= 0 || maxSGE < 0 {
		return SRQSizing{}, invalid("SRQ max_wr %d, max_sge %d", maxWR, maxSGE)
	}
	if maxWR > lim.MaxSRQRecvWR {
		return SRQSizing{}, invalid("SRQ max_wr %d above the device's %d", maxWR, lim.MaxSRQRecvWR)
	}
	if maxSGE > lim.MaxRQDescSz/SegSize {
		return SRQSizing{}, invalid("SRQ max_sge %d above the device's %d", maxSGE, lim.MaxRQDescSz/SegSize)
	}
	size := roundupPow2(max(32, srqNextSegLen+maxSGE*SegSize))
	cnt := roundupPow2(maxWR + 1)
	return SRQSizing{
		WQESize:  size,
		WQEShift: ilog32(size - 1),
		WQECnt:   cnt,
		MaxGS:    (size - srqNextSegLen) / SegSize,
		MaxWR:    cnt - 1,
		Bytes:    cnt * size,
	}, nil
}

// CQSizing is a completion queue's geometry.
type CQSizing struct {
	NCQE    int // CQEs in the ring, a power of two
	CQESize int // 64 or 128
	KernCQE int // the cqe count CREATE_CQ passes: NCQE - 1
	Bytes   int // NCQE*CQESize rounded up to the page
}

// CQSize computes a CQ as verbs.c create_cq and cq.c mlx5_alloc_cq_buf
// do: NCQE = roundup_pow2(cqe + 1), at most 1<<24; the buffer is NCQE *
// cqeSize rounded up to pageSize.
func CQSize(cqe, cqeSize, pageSize int) (CQSizing, error) {
	if cqe <= 0 {
		return CQSizing{}, invalid("CQ of %d entries", cqe)
	}
	if cqeSize != 64 && cqeSize != 128 {
		return CQSizing{}, invalid("CQE size %d (64 or 128)", cqeSize)
	}
	n := roundupPow2(cqe + 1)
	if n > 1<<24 || cqe >= 1<<24 {
		return CQSizing{}, invalid("CQ of %d entries above 2^24", cqe)
	}
	return CQSizing{NCQE: n, CQESize: cqeSize, KernCQE: n - 1, Bytes: align(n*cqeSize, pageSize)}, nil
}
