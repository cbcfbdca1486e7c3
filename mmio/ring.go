package mmio

import (
	"fmt"
	"unsafe"
)

// Ring views a queue of equal slots in b (a mapping, or any memory that
// outlives the Ring), slot i at (i & mask) * stride, each at least a T.
// NewRing checks once that every slot lies inside b and holds a T, so
// Slot checks nothing: it is an AND, a multiply and an add.
type Ring[T any] struct {
	base   unsafe.Pointer
	stride uintptr
	mask   uint32
}

// NewRing views b as slots slots (a power of two) of stride bytes each.
func NewRing[T any](b []byte, slots uint64, stride int) (Ring[T], error) {
	var zero T
	switch {
	case slots == 0 || slots&(slots-1) != 0 || slots > 1<<32:
		return Ring[T]{}, fmt.Errorf("mmio: a ring of %d slots: must be a power of two up to 2^32", slots)
	case stride < int(unsafe.Sizeof(zero)) || stride <= 0:
		return Ring[T]{}, fmt.Errorf("mmio: %d-byte slots cannot hold %d bytes", stride, unsafe.Sizeof(zero))
	case uint64(len(b))/slots < uint64(stride):
		return Ring[T]{}, fmt.Errorf("mmio: %d slots of %d bytes do not fit %d bytes", slots, stride, len(b))
	}
	return Ring[T]{base: unsafe.Pointer(unsafe.SliceData(b)), stride: uintptr(stride), mask: uint32(slots - 1)}, nil
}

// Slot is slot i (its index masked to the ring). A zero Ring has no
// slots: Slot must not be called on it (pointer arithmetic on its nil
// base is not defined, and the race detector's build compiles it so
// that the result does not compare equal to nil).
func (r *Ring[T]) Slot(i uint32) *T {
	return (*T)(unsafe.Add(r.base, uintptr(i&r.mask)*r.stride))
}

// Mask is the ring's index mask, slots - 1.
func (r *Ring[T]) Mask() uint32 { return r.mask }
