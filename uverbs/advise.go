package uverbs

import (
	"fmt"
	"math"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// MRAdvice is the advice of AdviseMR (enum ibv_advise_mr_advice).
type MRAdvice uint32

const (
	// AdvisePrefetch pre-faults the range for reading (IBV_ADVISE_MR_ADVICE_PREFETCH).
	AdvisePrefetch MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH
	// AdvisePrefetchWrite pre-faults the range for writing.
	AdvisePrefetchWrite MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE
	// AdvisePrefetchNoFault maps only pages already present.
	AdvisePrefetchNoFault MRAdvice = abi.IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
)

func (a MRAdvice) String() string {
	switch a {
	case AdvisePrefetch:
		return "PREFETCH"
	case AdvisePrefetchWrite:
		return "PREFETCH_WRITE"
	case AdvisePrefetchNoFault:
		return "PREFETCH_NO_FAULT"
	}
	return fmt.Sprintf("MRAdvice(%d)", uint32(a))
}

// AdviseFlags modify AdviseMR (enum ibv_advise_mr_flag).
type AdviseFlags uint32

// AdviseFlush makes AdviseMR wait until the prefetch is done
// (IBV_ADVISE_MR_FLAG_FLUSH).
const AdviseFlush AdviseFlags = abi.IB_UVERBS_ADVISE_MR_FLAG_FLUSH

// AdviseMR gives the device advice about ranges of on-demand paging
// memory regions of the PD (ibv_advise_mr): each SGE names a range by
// the region's LKey. Devices without ODP, rxe among them, fail with an
// error matching ErrNotSupported.
func (pd *PD) AdviseMR(advice MRAdvice, flags AdviseFlags, sgl []SGE) error {
	const op = "uverbs AdviseMR"
	if pd == nil {
		return fmt.Errorf("%s: nil PD: %w", op, errInvalid)
	}
	if advice > AdvisePrefetchNoFault {
		return fmt.Errorf("%s: advice %v: %w", op, advice, errInvalid)
	}
	if flags&^AdviseFlush != 0 {
		return fmt.Errorf("%s: flags %#x: %w", op, uint32(flags), errInvalid)
	}
	if len(sgl) == 0 || len(sgl) > math.MaxUint16/16 {
		return fmt.Errorf("%s: %d ranges: %w", op, len(sgl), errInvalid)
	}
	for i, s := range sgl {
		if s.Length == 0 || s.Addr+uint64(s.Length) < s.Addr {
			return fmt.Errorf("%s: range %d (%#x, %d bytes): %w", op, i, s.Addr, s.Length, errInvalid)
		}
	}
	if err := pd.alive("PD.AdviseMR"); err != nil {
		return err
	}
	list := make([]abi.SGE, len(sgl))
	for i, s := range sgl {
		list[i] = abi.SGE{Addr: s.Addr, Length: s.Length, LKey: s.LKey}
	}
	m := sys.NewMethod(op+": ADVISE_MR", abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_ADVISE_MR)
	m.Handle(abi.UVERBS_ATTR_ADVISE_MR_PD_HANDLE, pd.handle)
	m.InUint(abi.UVERBS_ATTR_ADVISE_MR_ADVICE, uint64(advice), 8) // CONST_IN, as rdma-core sends it
	m.InUint(abi.UVERBS_ATTR_ADVISE_MR_FLAGS, uint64(flags), 4)
	m.In(abi.UVERBS_ATTR_ADVISE_MR_SGE_LIST, abi.BytesOfSlice(list))
	return pd.ctx.exec(m)
}
