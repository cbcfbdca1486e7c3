package mmio

// AcquireBarrier orders the loads after it after an acquire load
// (LoadUint32, LoadUint32BE, LoadUint64) of a word a DMA-coherent device
// writes to ordinary (write-back) memory, such as a completion's valid
// bit, so that they read what the device wrote before that word.
// amd64: nothing, not even a call: x86 keeps loads from write-back
// memory in order, and the acquire load keeps the compiler from moving
// later loads before it (Linux's dma_rmb is only a compiler barrier on
// x86). Memory of another type (write-combining) needs ReadBarrier.
func AcquireBarrier() {}
