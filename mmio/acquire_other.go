//go:build !amd64

package mmio

// AcquireBarrier orders the loads after it after an acquire load
// (LoadUint32, LoadUint32BE, LoadUint64) of a word a DMA-coherent device
// writes to ordinary (write-back) memory, such as a completion's valid
// bit, so that they read what the device wrote before that word. Off
// amd64 it is ReadBarrier (arm64: DMB LD, as Linux's dma_rmb is a DMB
// there).
func AcquireBarrier() { ReadBarrier() }
