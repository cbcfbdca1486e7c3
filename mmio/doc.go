// Package mmio holds the memory-ordering and access primitives the
// provider fast paths use on memory shared with the kernel or a device:
// queues mapped from /dev/infiniband/uverbsN and doorbell pages.
//
// Guarantees, on every supported architecture (amd64, arm64):
//
//   - LoadUint32 / LoadUint64 are atomic and have acquire semantics: no
//     later load or store is reordered before them.
//   - StoreUint32 / StoreUint64 are atomic and have release semantics: no
//     earlier load or store is reordered after them. A producer that fills
//     a queue entry with plain stores and then publishes its index with
//     StoreUint32 makes the entry visible before the index.
//   - At gives typed access to a mapped structure (plain loads and
//     stores, no ordering): fill entries through it, then publish.
//
// Go's sync/atomic operations are sequentially consistent, which is
// stronger than acquire/release; that is what these use.
package mmio
