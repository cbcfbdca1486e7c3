package uverbs

import (
	"sync"

	"github.com/purerdma/rdma/internal/abi"
)

// capability is a device feature a fast path checks before posting.
type capability int

const (
	capFlush capability = iota
	capAtomicWrite
)

// deviceCaps caches what the device reports in device_cap_flags_ex: a
// definite answer from the kernel, asked once per context.
type deviceCaps struct {
	once  sync.Once
	flags uint64
	err   error
}

func (c *Context) capsEx() (uint64, error) {
	c.caps.once.Do(func() {
		attr, err := c.QueryDevice()
		c.caps.flags, c.caps.err = uint64(attr.DeviceCapFlagsEx), err
	})
	return c.caps.flags, c.caps.err
}

// has reports whether the device has a feature; an error asking counts
// as no.
func (c *Context) has(cp capability) bool {
	flags, err := c.capsEx()
	if err != nil {
		return false
	}
	switch cp {
	case capFlush:
		return flags&(abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL|abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT) != 0
	case capAtomicWrite:
		return flags&abi.IB_UVERBS_DEVICE_ATOMIC_WRITE != 0
	}
	return false
}
