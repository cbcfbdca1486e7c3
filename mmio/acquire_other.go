//go:build !amd64

package mmio

import (
	"sync/atomic"
	"unsafe"
)

// AcquireBarrier orders the loads after it after an acquire load
// (LoadUint32, LoadUint32BE, LoadUint64) of a word a DMA-coherent device
// writes to ordinary (write-back) memory, such as a completion's valid
// bit, so that they read what the device wrote before that word. Off
// amd64 it is ReadBarrier (arm64: DMB LD, as Linux's dma_rmb is a DMB
// there).
func AcquireBarrier() { ReadBarrier() }

// AcquireWord is an acquire load of the device's flag word p, 4-byte
// aligned, in ordinary memory, then AcquireBarrier: the loads after it
// read what the device wrote before the word.
func AcquireWord(p *[4]byte) {
	atomic.LoadUint32((*uint32)(unsafe.Pointer(p)))
	ReadBarrier()
}
