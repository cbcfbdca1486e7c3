package mmio

import "unsafe"

// Persist writes the CPU cache lines holding b back to memory and waits
// for them (libpmem's pmem_persist): after it returns, stores to
// persistent memory in b survive a power failure. Use it on memory
// mapped from persistent memory (device DAX), after the CPU wrote it or
// after RDMA placed data the CPU then changed; on ordinary memory it
// only costs time.
func Persist(b []byte) {
	if len(b) == 0 {
		return
	}
	flushLines(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}
