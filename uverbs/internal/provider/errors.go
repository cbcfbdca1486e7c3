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
	ErrSendQueueFull = &sys.Error{Op: "uverbs PostSend", Err: fmt.Errorf("send queue full: %w", sys.ErrBusy)}
	ErrRecvQueueFull = &sys.Error{Op: "uverbs PostRecv", Err: fmt.Errorf("receive queue full: %w", sys.ErrBusy)}
)

// ErrMessageTooLong refuses a scatter/gather list whose lengths add up
// to more than a work request's 32-bit length holds; what is "Send" or
// "Recv" (the operation is PostSend or PostRecv).
func ErrMessageTooLong(what string, n uint64) error {
	return fmt.Errorf("uverbs Post%s: the scatter/gather entries add up to %d bytes, a work request carries at most %d: %w", what, n, uint32(math.MaxUint32), sys.ErrInvalid)
}

// CopyInline copies the inline data of sgl to dst and returns how many
// bytes it copied. Memory that cannot be read (an address of no
// mapping) is an error, not a crash: the fault panics (SetPanicOnFault)
// and is recovered by the deferred function, which costs a flag test
// when nothing faulted. That function calls recover itself (recover
// works only there) and leaves the rest to inlineCopy.fault.
func CopyInline(dst []byte, sgl []SGE) (n int, err error) {
	c := inlineCopy{old: debug.SetPanicOnFault(true)}
	defer func() {
		if !c.done {
			err = c.fault(recover(), sgl)
		}
	}()
	if len(sgl) == 1 { // the usual case, without the loop
		n = copy(dst, mmio.BytesAt(sgl[0].Addr, int(sgl[0].Length)))
	} else {
		for i := range sgl {
			c.i = i
			s := &sgl[i]
			n += copy(dst[n:], mmio.BytesAt(s.Addr, int(s.Length)))
		}
	}
	c.done = true
	debug.SetPanicOnFault(c.old)
	return n, nil
}

// inlineCopy is the state of one CopyInline: the goroutine's fault
// setting before it, the entry being copied, and whether it finished.
type inlineCopy struct {
	old  bool
	done bool
	i    int
}

// fault handles what the copy of sgl's entry c.i recovered, r: the fault
// setting is restored, a memory fault is the error returned, and any
// other panic goes on (nil, from runtime.Goexit, is nothing to handle).
func (c *inlineCopy) fault(r any, sgl []SGE) error {
	debug.SetPanicOnFault(c.old)
	if r == nil {
		return nil
	}
	f, fault := r.(interface{ Addr() uintptr })
	if !fault {
		panic(r)
	}
	return fmt.Errorf("uverbs PostSend: inline data of entry %d (%d bytes at %#x): no readable memory at %#x: %w",
		c.i, sgl[c.i].Length, sgl[c.i].Addr, f.Addr(), sys.ErrInvalid)
}
