package provider

import (
	"fmt"
	"math"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// CheckSend makes the checks every device shares of a send request
// against its QP, before anything is written to the queue: the opcode
// for the QP's type, the scatter/gather count, atomics' alignment, the
// device capabilities FLUSH and ATOMIC_WRITE need, the inline size, a
// UD send's address, a bind's window. A provider calls it for every
// request it does not check on a path of its own; what only one device
// refuses the provider checks after it.
func CheckSend(qp *QP, wr *SendWR) error {
	if len(wr.SGL) > int(qp.Cap.MaxSendSGE) && wr.Opcode != WRBindMW {
		return fmt.Errorf("uverbs PostSend: %d scatter/gather entries, the QP takes %d: %w", len(wr.SGL), qp.Cap.MaxSendSGE, sys.ErrInvalid)
	}
	if !qp.Type.Allows(wr.Opcode) {
		return fmt.Errorf("uverbs PostSend: %v on a %v QP: %w", wr.Opcode, qp.Type, sys.ErrInvalid)
	}
	switch wr.Opcode {
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		if wr.RemoteAddr%8 != 0 || len(wr.SGL) != 1 || wr.SGL[0].Length < 8 {
			return fmt.Errorf("uverbs PostSend: %v needs an 8-byte aligned remote address and one 8-byte local buffer: %w", wr.Opcode, sys.ErrInvalid)
		}
	case WRAtomicWrite:
		if qp.CapsEx&abi.IB_UVERBS_DEVICE_ATOMIC_WRITE == 0 {
			return fmt.Errorf("uverbs PostSend: ATOMIC_WRITE (Linux 6.2+ rxe): %w", sys.ErrNotSupported)
		}
		if wr.RemoteAddr%8 != 0 {
			return fmt.Errorf("uverbs PostSend: ATOMIC_WRITE needs an 8-byte aligned remote address: %w", sys.ErrInvalid)
		}
	case WRFlush:
		caps := qp.CapsEx
		if caps&(abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL|abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT) == 0 {
			return fmt.Errorf("uverbs PostSend: FLUSH (Linux 6.2+ rxe): %w", sys.ErrNotSupported)
		}
		if wr.FlushType&^(FlushGlobal|FlushPersistent) != 0 || wr.FlushType == 0 || wr.FlushLevel > FlushMR {
			return fmt.Errorf("uverbs PostSend: FLUSH type %#x level %d: %w", wr.FlushType, wr.FlushLevel, sys.ErrInvalid)
		}
		// A device may execute one type and not the other: each type
		// asked for needs its own capability bit.
		if wr.FlushType&FlushGlobal != 0 && caps&abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL == 0 {
			return fmt.Errorf("uverbs PostSend: FLUSH to global visibility: the device does not report FLUSH_GLOBAL: %w", sys.ErrNotSupported)
		}
		if wr.FlushType&FlushPersistent != 0 && caps&abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT == 0 {
			return fmt.Errorf("uverbs PostSend: FLUSH to persistence: the device does not report FLUSH_PERSISTENT: %w", sys.ErrNotSupported)
		}
		if wr.FlushLength > math.MaxUint32 {
			return fmt.Errorf("uverbs PostSend: FLUSH of %d bytes: a work request carries at most %d: %w", wr.FlushLength, uint32(math.MaxUint32), sys.ErrInvalid)
		}
	case WRBindMW:
		if wr.Bind == nil || wr.Bind.MW == nil || wr.Bind.MR == nil || len(wr.SGL) != 0 {
			return fmt.Errorf("uverbs PostSend: BIND_MW needs Bind with MW and MR, and no SGL: %w", sys.ErrInvalid)
		}
		if cur := wr.Bind.MW.RKey.Load(); wr.Bind.RKey>>8 != cur>>8 {
			return fmt.Errorf("uverbs PostSend: BIND_MW rkey %#x for a window with rkey %#x: only the low 8 bits may change: %w", wr.Bind.RKey, cur, sys.ErrInvalid)
		}
	case WRSend, WRSendWithImm:
		if qp.Type == QPTypeUD && wr.AH == nil {
			return fmt.Errorf("uverbs PostSend: a UD send needs an AH: %w", sys.ErrInvalid)
		}
	}
	if wr.Flags&SendInline != 0 {
		var n uint64
		for _, s := range wr.SGL {
			n += uint64(s.Length)
			// The library reads inline data itself: refuse what is
			// plainly not memory (CopyInline catches the rest).
			if s.Length > 0 && (s.Addr < minAddr || s.Addr+uint64(s.Length) < s.Addr) {
				return fmt.Errorf("uverbs PostSend: inline data at %#x (%d bytes) is not process memory: %w", s.Addr, s.Length, sys.ErrInvalid)
			}
		}
		if n > uint64(qp.Cap.MaxInlineData) {
			return fmt.Errorf("uverbs PostSend: %d bytes inline, the QP takes %d: %w", n, qp.Cap.MaxInlineData, sys.ErrInvalid)
		}
	}
	return nil
}

// minAddr is the lowest address inline data may be read from: the first
// page is never mapped (vm.mmap_min_addr is at least a page).
const minAddr = 4096

// Allows reports whether a QP of type t can post op (IB spec: UC has no
// reads or atomics, UD only sends).
func (t QPType) Allows(op WROpcode) bool {
	switch t {
	case QPTypeUD:
		return op == WRSend || op == WRSendWithImm
	case QPTypeUC:
		switch op {
		case WRRDMAWrite, WRRDMAWriteWithImm, WRSend, WRSendWithImm, WRSendWithInv, WRLocalInv, WRBindMW:
			return true
		}
		return false
	}
	return true
}
