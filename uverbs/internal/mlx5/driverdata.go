package mlx5

import "github.com/purerdma/rdma/internal/abi"

// NoUIdx is the user index of a QP or SRQ on a context with CQE version
// 0: the kernel (mlx5_ib.h get_qp_user_index, get_srq_user_index)
// requires exactly 0xffffff there, and with CQE version 1 any 24-bit
// value but 0xffffff, which CQEs then carry in srqn_uidx.
const NoUIdx = 0xffffff

// CreateCQData is CREATE_CQ's driver data for a CQ of sizing s whose
// buffer and doorbell record are at bufAddr and dbAddr. uarPage is the
// page id of the UAR the CQ arms through on a context with dynamic UARs
// (the kernel then requires MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX), or
// -1 with static UARs. Page ids of 2^16 and above need the
// MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX attribute instead: ErrInvalid here.
func CreateCQData(bufAddr, dbAddr uint64, s CQSizing, uarPage int) (abi.MLX5CreateCQ, error) {
	d := abi.MLX5CreateCQ{BufAddr: bufAddr, DbAddr: dbAddr, CQESize: uint32(s.CQESize)}
	if uarPage >= 1<<16 {
		return d, invalid("UAR page id %d needs the CREATE_CQ UAR_INDEX attribute", uarPage)
	}
	if uarPage >= 0 {
		d.Flags = abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
		d.UARPageIndex = uint16(uarPage)
	}
	return d, nil
}

// CreateQPData is CREATE_QP's driver data for a QP whose buffer (RQ, then
// SQ, QPBuffer) and doorbell record are at bufAddr and dbAddr. uidx is the
// user index (NoUIdx with CQE version 0). uarPage is the page id of a
// dynamically allocated UAR whose register the QP rings
// (MLX5_QP_FLAG_UAR_PAGE_INDEX), or -1 to let the kernel pick a static
// bfreg (returned in the response's bfreg_index).
func CreateQPData(bufAddr, dbAddr uint64, sq SQSizing, rq RQSizing, uidx uint32, uarPage int) abi.MLX5CreateQP {
	d := abi.MLX5CreateQP{
		BufAddr: bufAddr, DbAddr: dbAddr,
		SQWQECount: uint32(sq.WQECnt), RQWQECount: uint32(rq.WQECnt), RQWQEShift: uint32(rq.WQEShift),
		Uidx: uidx,
	}
	if uarPage >= 0 {
		d.Flags = abi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		d.BfregIndex = uint32(uarPage)
	}
	return d
}

// CreateSRQData is CREATE_SRQ's driver data; the command's own max_wr and
// max_sge are SRQSizing.MaxWR and MaxGS.
func CreateSRQData(bufAddr, dbAddr uint64, uidx uint32) abi.MLX5CreateSRQ {
	return abi.MLX5CreateSRQ{BufAddr: bufAddr, DbAddr: dbAddr, Uidx: uidx}
}

// ResizeCQData is RESIZE_CQ's driver data: the new buffer, of sizing s,
// at bufAddr (the doorbell record stays). The command's own cqe is
// s.KernCQE.
func ResizeCQData(bufAddr uint64, s CQSizing) abi.MLX5ResizeCQ {
	return abi.MLX5ResizeCQ{BufAddr: bufAddr, CQESize: uint16(s.CQESize)}
}
