package provider

import (
	"fmt"
	"math"
	"runtime/debug"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/mmio"
)

// Busy errors of the fast path: preallocated, so a caller spinning on a
// full queue allocates nothing. They match uverbs.ErrBusy.
var (
	ErrSendQueueFull = &sys.Error{Op: "uverbs post send", Err: fmt.Errorf("send queue full: %w", sys.ErrBusy)}
	ErrRecvQueueFull = &sys.Error{Op: "uverbs post recv", Err: fmt.Errorf("receive queue full: %w", sys.ErrBusy)}
)

// ErrMessageTooLong refuses a scatter/gather list whose lengths add up
// to more than a work request's 32-bit length holds; what is "send" or
// "receive".
func ErrMessageTooLong(what string, n uint64) error {
	return fmt.Errorf("uverbs post %s: the scatter/gather entries add up to %d bytes, a work request carries at most %d: %w", what, n, uint32(math.MaxUint32), sys.ErrInvalid)
}

// CopyInline copies the inline data of sgl to dst and returns how many
// bytes it copied. Memory that cannot be read (an address of no
// mapping) is an error, not a crash: the fault panics (SetPanicOnFault)
// and is recovered here. Only inline sends pay for the deferred call.
func CopyInline(dst []byte, sgl []SGE) (n int, err error) {
	old := debug.SetPanicOnFault(true)
	i := 0
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			f, fault := r.(interface{ Addr() uintptr })
			if !fault {
				panic(r)
			}
			err = fmt.Errorf("uverbs post send: inline data of entry %d (%d bytes at %#x): no readable memory at %#x: %w",
				i, sgl[i].Length, sgl[i].Addr, f.Addr(), sys.ErrInvalid)
		}
	}()
	for ; i < len(sgl); i++ {
		n += copy(dst[n:], mmio.BytesAt(sgl[i].Addr, int(sgl[i].Length)))
	}
	return n, nil
}
