//go:build !amd64 && !arm64

package mmio

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// The portable fallback: sequentially consistent atomic operations.
// They order memory for other CPUs (Go's memory model), but Go promises
// nothing about devices or write-combining mappings; see doc.go.

var fence atomic.Uint32

// WriteBarrier orders stores before it before stores after it, as far
// as the portable fallback can: an atomic read-modify-write, which Go
// makes sequentially consistent.
func WriteBarrier() { fence.Add(1) }

// ReadBarrier orders loads before it before loads after it, with an
// atomic load (sequentially consistent in Go).
func ReadBarrier() { fence.Load() }

// be32 and be64 give the native value whose bytes in memory are v
// big-endian, on either byte order.
func be32(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}

func be64(v uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return binary.NativeEndian.Uint64(b[:])
}

func loadUint32BE(p unsafe.Pointer) uint32 { return be32(atomic.LoadUint32((*uint32)(p))) }

func storeUint32BE(p unsafe.Pointer, v uint32) { atomic.StoreUint32((*uint32)(p), be32(v)) }

func storeUint64BE(p unsafe.Pointer, v uint64) { atomic.StoreUint64((*uint64)(p), be64(v)) }

func copy64(dst, src unsafe.Pointer) {
	s := (*[64]byte)(src)
	for i := 0; i < 64; i += 8 {
		atomic.StoreUint64((*uint64)(unsafe.Add(dst, i)), binary.NativeEndian.Uint64(s[i:]))
	}
	WriteBarrier()
}

func doorbell(rec unsafe.Pointer, v uint32, reg unsafe.Pointer, w uint64) {
	storeUint32BE(rec, v)
	WriteBarrier()
	storeUint64BE(reg, w)
	WriteBarrier()
}

func recordCopy64(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer) {
	storeUint32BE(rec, v)
	WriteBarrier()
	copy64(dst, src)
}

func recordCopy128(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer) {
	storeUint32BE(rec, v)
	WriteBarrier()
	copy64(dst, src)
	copy64(unsafe.Add(dst, 64), unsafe.Add(src, 64))
}

// flushLines has no cache-line clean instruction to use here; the
// fence orders the stores at least.
func flushLines(p unsafe.Pointer, n uintptr) { fence.Add(1) }
