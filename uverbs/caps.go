package uverbs

import (
	"fmt"
	"math"
	"sync"

	"github.com/purerdma/rdma/internal/abi"
)

// capability is a device feature a fast path checks before posting.
type capability int

const (
	capFlush capability = iota // either type: the opcode exists
	capAtomicWrite
	capFlushGlobal
	capFlushPersistent
)

// deviceCaps caches what the device reports (QueryDevice): its
// capability flags and the limits create calls are checked against,
// asked once per context.
type deviceCaps struct {
	once sync.Once
	attr DeviceAttr
	err  error
}

func (c *Context) deviceAttr() (*DeviceAttr, error) {
	c.caps.once.Do(func() {
		c.caps.attr, c.caps.err = c.QueryDevice()
	})
	return &c.caps.attr, c.caps.err
}

func (c *Context) capsEx() (uint64, error) {
	a, err := c.deviceAttr()
	return uint64(a.DeviceCapFlagsEx), err
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
	case capFlushGlobal:
		return flags&abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL != 0
	case capFlushPersistent:
		return flags&abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT != 0
	}
	return false
}

// limit is the device's limit for a size (a field of DeviceAttr picked
// by get), or ceiling when the device could not be asked or reports
// none; never more than ceiling, the most the kernel's ABI carries.
func (c *Context) limit(get func(*DeviceAttr) int, ceiling uint64) uint64 {
	a, err := c.deviceAttr()
	if err != nil {
		return ceiling
	}
	if v := get(a); v > 0 && uint64(v) < ceiling {
		return uint64(v)
	}
	return ceiling
}

// checkSize checks a caller's size against the most the device takes,
// before any kernel call: nothing is cut to fit a narrower field.
// op names the call, field the argument.
func (c *Context) checkSize(op, field string, v uint64, get func(*DeviceAttr) int) error {
	max := c.limit(get, math.MaxInt32)
	if v > max {
		return fmt.Errorf("uverbs %s: %s %d: more than the %d %s takes: %w", op, field, v, max, c.dev.Name, errInvalid)
	}
	return nil
}
