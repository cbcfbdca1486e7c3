// Package mmio holds the memory-ordering and access primitives the
// provider fast paths use on memory shared with the kernel or a device:
// queues mapped from /dev/infiniband/uverbsN, doorbell records in host
// memory, and device registers (doorbells, BlueFlame buffers).
//
// # Shared memory (rxe rings, any queue in host memory)
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
//   - Ring views a queue of equal slots (a power of two of them), its
//     bounds checked once by NewRing, so that Slot(i) is an AND, a
//     multiply and an add: what a poll loop uses per entry.
//
// Go's sync/atomic operations are sequentially consistent, which is
// stronger than acquire/release; that is what these use. On amd64 an
// atomic store is an XCHG, which reads the word: use them on memory, not
// on device registers.
//
// # Devices (what a hardware provider such as mlx5 needs)
//
// These are written in assembly, so the instruction sequence is the
// documented one; the Go compiler never moves memory accesses across a
// call to them.
//
//   - StoreUint32BE(b, off, v): the doorbell record. One 4-byte store of v
//     in big-endian byte order, a release towards CPUs and DMA-coherent
//     devices. amd64: BSWAP and a plain MOV (x86 never reorders a store
//     with earlier loads or with earlier stores to write-back or uncached
//     memory, the same reasoning by which rdma-core's
//     udma_to_device_barrier is only a compiler barrier there). arm64:
//     REV, DMB OSH (orders all earlier loads and stores, for the outer
//     shareable domain where DMA-coherent devices sit), STR.
//   - StoreUint64BE(b, off, v): the 64-bit doorbell to a device register.
//     One 8-byte store, never split, merged or read. Earlier stores to
//     ordinary memory are seen by the device first. amd64: BSWAP, MOV.
//     arm64: REV, DMB OSHST (Linux's dma_wmb, the barrier in its writeq),
//     STR.
//   - Copy64(dst, src): the BlueFlame copy of a 64-byte work queue entry
//     to a write-combining device buffer, in ascending address order,
//     followed by WriteBarrier. dst must be 64-byte aligned and hold 64
//     bytes; otherwise nothing is copied and Copy64 returns false. amd64:
//     four 16-byte MOVUPS loads, four MOVAPS stores, SFENCE. arm64: two
//     LDP/STP pairs of 128-bit registers, DSB ST. The 64 bytes are not a
//     single-copy atomic store (that needs arm64's ST64B, which few CPUs
//     have); the device sees them as one write only when the CPU combines
//     them, which is why dst must fill exactly one combining buffer.
//   - WriteBarrier(): every store before it, to any memory type, is
//     observed before any store after it, by CPUs and devices, and
//     pending write-combined stores are flushed. amd64: SFENCE, the only
//     fence that orders write-combining and non-temporal stores (ordinary
//     stores are already in order). arm64: DSB ST, not DMB: a DMB only
//     orders, while a write-combining buffer must also be pushed out to
//     the device before the next store (Linux's wmb and rdma-core's
//     mmio_flush_writes use DSB ST for this reason).
//   - ReadBarrier(): every load before it completes before any load
//     after it: after reading a completion's valid bit the rest of the
//     completion is read as the device wrote it. amd64: LFENCE (loads
//     from write-back memory are already in order; LFENCE also orders
//     weakly ordered loads from write-combining memory). arm64: DMB LD
//     (full system), a superset of rdma-core's DMB OSHLD.
//   - Doorbell(rec, v, reg, w), RecordCopy64(rec, v, dst, src) and
//     RecordCopy128: the sequences StoreUint32BE, WriteBarrier,
//     StoreUint64BE, WriteBarrier and StoreUint32BE, WriteBarrier,
//     Copy64 (RecordCopy128: of two consecutive blocks, one
//     WriteBarrier after both), each one assembly call with the same
//     instructions (Go does not inline assembly; a call each costs a
//     provider's post several instructions). rec, reg and dst are
//     pointers from At; RecordCopy64 and RecordCopy128 refuse a dst
//     that is not 64-byte aligned before storing anything. StoreUint32BEAt is
//     StoreUint32BE through such a pointer.
//   - RecordInlineCopy64(rec, v, dst, blk, off, src, n) and
//     RecordInlineCopy128: an ordinary copy of n bytes from src into blk
//     at off (a work request's inline data, read exactly), then
//     RecordCopy64 or RecordCopy128 of blk to dst: the same barriers in
//     one call. The arguments are checked in the same call (amd64:
//     assembly; elsewhere Go around recordCopy64/128); a dst not 64-byte
//     aligned, or data that does not fit, stores nothing. src is read
//     without a fault net: the caller knows it is mapped.
//   - LoadUint32BE(b, off) and AcquireBarrier(): an acquire load of a
//     device's flag word in ordinary memory, then what makes the loads
//     after it see what the device wrote before the flag. amd64:
//     AcquireBarrier is nothing (loads from write-back memory are in
//     order and the atomic load holds the compiler; Linux's dma_rmb is
//     a compiler barrier there); elsewhere it is ReadBarrier.
//     AcquireWord(p) is the two in one, on a *[4]byte.
//
// Used the way rdma-core's mlx5 provider does: write the work queue
// entry, StoreUint32BE the doorbell record, WriteBarrier, then Copy64
// (or StoreUint64BE followed by WriteBarrier) to the device register.
//
// On other architectures a portable fallback builds: the barriers are
// sequentially consistent atomic operations and the copies are 8-byte
// atomic stores. That orders memory for other CPUs as Go's memory model
// says, but Go promises nothing there about devices or write-combining
// mappings; a provider for such an architecture needs assembly.
//
// All functions are safe for concurrent use; none allocates.
package mmio
