package mmio

import "unsafe"

// StoreUint32BE stores v in big-endian byte order at b[off], which must
// be 4-byte aligned, with release semantics towards other CPUs and
// towards a DMA-coherent device: every load and store before it is
// observed before it. It is one 4-byte store and never reads the word.
//
// It is the write of a doorbell record, the big-endian counter in host
// memory that a device (mlx5) reads to learn how far a queue was filled:
// the work queue entries written before it are visible to the device
// before the counter is.
func StoreUint32BE(b []byte, off int, v uint32) { storeUint32BE(ptr(b, off, 4), v) }

// StoreUint32BEAt is StoreUint32BE at p, a pointer At made (bounds
// checked once, where the pointer is made, not at every store).
func StoreUint32BEAt(p *uint32, v uint32) { storeUint32BE(unsafe.Pointer(p), v) }

// StoreUint64BE stores v in big-endian byte order at b[off], which must
// be 8-byte aligned, as one 8-byte store: never split, never merged with
// neighbouring stores by the compiler, and never a read-modify-write, so
// it is safe on a device register where a read has side effects or
// costs a round trip over the bus. Earlier stores to ordinary memory are
// observed by a DMA-coherent device before it.
//
// It is the 64-bit doorbell write to a mapped device register (mlx5's
// UAR: the first 8 bytes of the work queue entry's control segment). On
// a write-combining mapping call WriteBarrier before it, so it is not
// combined with or reordered against earlier write-combined stores, and
// after it, to push it to the device without delay.
func StoreUint64BE(b []byte, off int, v uint64) { storeUint64BE(ptr(b, off, 8), v) }

// Copy64 copies the 64 bytes at src to dst[0:64] in ascending address
// order and then flushes them to the device (a WriteBarrier): on a
// write-combining mapping the CPU can send them as one 64-byte write.
// It is the BlueFlame-style doorbell, which writes a whole work queue
// entry to a device register instead of ringing a doorbell.
//
// dst must be at least 64 bytes long and its first byte 64-byte aligned,
// so the copy covers exactly one write-combining buffer; otherwise
// Copy64 copies nothing and returns false. The copy is not atomic: a
// concurrent reader may see part of it.
func Copy64(dst []byte, src *[64]byte) bool {
	if len(dst) < 64 || uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%64 != 0 {
		return false
	}
	copy64(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(src))
	return true
}

// Doorbell stores v big-endian at rec as StoreUint32BE does, then a
// WriteBarrier, then w big-endian at reg as StoreUint64BE does, then a
// WriteBarrier: the same instructions in one call instead of four. It is
// the doorbell record and then the doorbell register of a device that
// learns of new work from both (mlx5's send queue). rec and reg come
// from At, which checks their bounds.
func Doorbell(rec *uint32, v uint32, reg *uint64, w uint64) {
	doorbell(unsafe.Pointer(rec), v, unsafe.Pointer(reg), w)
}

// RecordCopy64 stores v big-endian at rec as StoreUint32BE does, then a
// WriteBarrier, then copies src to dst as Copy64 does: the same
// instructions in one call instead of three, the doorbell record and
// then a BlueFlame copy. When dst is not 64-byte aligned it stores
// nothing, not even the record, and returns false.
func RecordCopy64(rec *uint32, v uint32, dst, src *[64]byte) bool {
	if uintptr(unsafe.Pointer(dst))%64 != 0 {
		return false
	}
	recordCopy64(unsafe.Pointer(rec), v, unsafe.Pointer(dst), unsafe.Pointer(src))
	return true
}

// RecordCopy128 is RecordCopy64 of 128 bytes: v big-endian at rec, a
// WriteBarrier, then src copied to dst in ascending address order in
// 64-byte steps and flushed with one WriteBarrier, in one call (a
// two-block BlueFlame copy). When dst is not 64-byte aligned it stores
// nothing, not even the record, and returns false.
func RecordCopy128(rec *uint32, v uint32, dst, src *[128]byte) bool {
	if uintptr(unsafe.Pointer(dst))%64 != 0 {
		return false
	}
	recordCopy128(unsafe.Pointer(rec), v, unsafe.Pointer(dst), unsafe.Pointer(src))
	return true
}
