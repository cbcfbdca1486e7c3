package mmio

import (
	"sync/atomic"
	"unsafe"
)

// ptr returns a pointer to n bytes at b[off], with b's bounds checked
// (off+n <= len(b), n > 0). The check is a slice expression, not an
// index, so it does not read memory: the race detector sees no plain
// load next to the atomic access.
func ptr(b []byte, off, n int) unsafe.Pointer {
	return unsafe.Pointer(unsafe.SliceData(b[off : off+n : len(b)]))
}

// LoadUint32 atomically loads the 4-byte aligned word at b[off] (acquire).
func LoadUint32(b []byte, off int) uint32 { return atomic.LoadUint32((*uint32)(ptr(b, off, 4))) }

// LoadUint32BE atomically loads the 4-byte aligned word at b[off]
// (acquire), read in big-endian byte order: a device's flag word. To
// read what a DMA-coherent device wrote before the word, call
// AcquireBarrier after it.
func LoadUint32BE(b []byte, off int) uint32 { return loadUint32BE(ptr(b, off, 4)) }

// StoreUint32 atomically stores v at b[off] (release).
func StoreUint32(b []byte, off int, v uint32) { atomic.StoreUint32((*uint32)(ptr(b, off, 4)), v) }

// LoadUint64 atomically loads the 8-byte aligned word at b[off] (acquire).
func LoadUint64(b []byte, off int) uint64 { return atomic.LoadUint64((*uint64)(ptr(b, off, 8))) }

// StoreUint64 atomically stores v at b[off] (release): a 64-bit
// doorbell write is one store.
func StoreUint64(b []byte, off int, v uint64) { atomic.StoreUint64((*uint64)(ptr(b, off, 8)), v) }

// At returns a *T viewing b[off:off+sizeof(T)] (bounds checked). T must
// be a plain kernel structure without Go pointers, and off must suit its
// alignment; the mapping must outlive the pointer.
func At[T any](b []byte, off int) *T {
	var zero T
	return (*T)(ptr(b, off, int(unsafe.Sizeof(zero))))
}

// BytesAt views n bytes of process memory at addr, as a work request's
// scatter/gather entry names it. The caller guarantees the memory is
// alive (registered memory is kept alive by its MR) for as long as the
// slice is used.
func BytesAt(addr uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(addrPointer(addr)), n)
}

// addrPointer is addr as a pointer. Via the address's own bytes: the
// uintptr-to-pointer conversion is the point here, for memory Go does
// not manage or keeps alive.
func addrPointer(addr uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }
