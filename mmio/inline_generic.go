//go:build !amd64

package mmio

import "unsafe"

// RecordInlineCopy64 is RecordCopy64 of a work request whose inline
// data is not in it yet: the n bytes at src are copied into src's block
// blk at byte off first (an ordinary copy to ordinary memory, reading
// exactly those n bytes), then v big-endian is stored at rec, a
// WriteBarrier, blk is copied to dst and a WriteBarrier, in one call.
// The caller guarantees that the n bytes at src can be read, on
// BytesAt's terms: there is no fault net here. When dst is not 64-byte
// aligned, or the data does not fit in blk at off, it stores nothing,
// not even the data, and returns false.
func RecordInlineCopy64(rec *uint32, v uint32, dst, blk *[64]byte, off int, src uint64, n int) bool {
	if uintptr(unsafe.Pointer(dst))%64 != 0 || uint(off) > 64 || uint(n) > 64-uint(off) {
		return false
	}
	copy(blk[off:off+n], BytesAt(src, n))
	recordCopy64(unsafe.Pointer(rec), v, unsafe.Pointer(dst), unsafe.Pointer(blk))
	return true
}

// RecordInlineCopy128 is RecordInlineCopy64 of two blocks: the data
// copied into blk at off, then what RecordCopy128 does.
func RecordInlineCopy128(rec *uint32, v uint32, dst, blk *[128]byte, off int, src uint64, n int) bool {
	if uintptr(unsafe.Pointer(dst))%64 != 0 || uint(off) > 128 || uint(n) > 128-uint(off) {
		return false
	}
	copy(blk[off:off+n], BytesAt(src, n))
	recordCopy128(unsafe.Pointer(rec), v, unsafe.Pointer(dst), unsafe.Pointer(blk))
	return true
}
