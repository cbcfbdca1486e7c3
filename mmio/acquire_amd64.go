package mmio

import (
	"sync/atomic"
	"unsafe"
)

// AcquireBarrier orders the loads after it after an acquire load
// (LoadUint32, LoadUint32BE, LoadUint64) of a word a DMA-coherent device
// writes to ordinary (write-back) memory, such as a completion's valid
// bit, so that they read what the device wrote before that word.
// amd64: nothing, not even a call: x86 keeps loads from write-back
// memory in order, and the acquire load keeps the compiler from moving
// later loads before it (Linux's dma_rmb is only a compiler barrier on
// x86). Memory of another type (write-combining) needs ReadBarrier.
func AcquireBarrier() {}

// AcquireWord is an acquire load of the device's flag word p, 4-byte
// aligned, in ordinary memory, then AcquireBarrier: the loads after it
// read what the device wrote before the word. As LoadUint32BE and
// AcquireBarrier, with nothing between its caller and the load (one
// inlined call, no call inside it, so no inline-mark NOP on a poll's
// path). amd64: the load alone.
func AcquireWord(p *[4]byte) { atomic.LoadUint32((*uint32)(unsafe.Pointer(p))) }
