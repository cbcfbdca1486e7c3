//go:build amd64 || arm64

package mmio

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Implemented in barrier_$GOARCH.s. doc.go says what each instruction
// sequence guarantees.

// WriteBarrier orders stores: every store before it, to any kind of
// memory (ordinary, write-combining, device), is observed by other CPUs
// and by devices before any store after it. Pending write-combined
// stores are flushed. amd64: SFENCE. arm64: DSB ST.
func WriteBarrier()

// ReadBarrier orders loads: every load before it is satisfied before
// any load after it, so data a device wrote before setting a flag the
// CPU saw is read as the device wrote it. amd64: LFENCE. arm64: DMB LD.
func ReadBarrier()

// loadUint32BE is an atomic (acquire) load of the word at p, read as
// big-endian (both architectures here are little-endian).
func loadUint32BE(p unsafe.Pointer) uint32 {
	return bits.ReverseBytes32(atomic.LoadUint32((*uint32)(p)))
}

//go:noescape
func storeUint32BE(p unsafe.Pointer, v uint32)

//go:noescape
func storeUint64BE(p unsafe.Pointer, v uint64)

//go:noescape
func copy64(dst, src unsafe.Pointer)

// doorbell is storeUint32BE(rec, v), WriteBarrier, storeUint64BE(reg,
// w), WriteBarrier: the same instructions, in one call.
//
//go:noescape
func doorbell(rec unsafe.Pointer, v uint32, reg unsafe.Pointer, w uint64)

// recordCopy64 is storeUint32BE(rec, v), WriteBarrier, copy64(dst, src):
// the same instructions, in one call.
//
//go:noescape
func recordCopy64(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)

// recordCopy128 is recordCopy64 of two consecutive 64-byte blocks, the
// barrier after the copy once: the same instructions, in one call.
//
//go:noescape
func recordCopy128(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)

// flushLines writes back the cache lines of [p, p+n) to memory and
// waits until it is done. amd64: CLFLUSH each line, then MFENCE.
// arm64: DC CVAC each line, then DSB ISH.
//
//go:noescape
func flushLines(p unsafe.Pointer, n uintptr)
