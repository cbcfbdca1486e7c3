package mmio

// Implemented in inline_amd64.s, checks included: one call from the
// caller's frame (a Go wrapper with these seven arguments is over the
// inlining budget). The copy of the data is in 16-byte steps, the last
// one overlapping, and smaller steps below 16 bytes.

// RecordInlineCopy64 is RecordCopy64 of a work request whose inline
// data is not in it yet: the n bytes at src are copied into src's block
// blk at byte off first (an ordinary copy to ordinary memory, reading
// exactly those n bytes), then v big-endian is stored at rec, a
// WriteBarrier, blk is copied to dst and a WriteBarrier, in one call.
// The caller guarantees that the n bytes at src can be read, on
// BytesAt's terms: there is no fault net here. When dst is not 64-byte
// aligned, or the data does not fit in blk at off, it stores nothing,
// not even the data, and returns false.
//
//go:noescape
func RecordInlineCopy64(rec *uint32, v uint32, dst, blk *[64]byte, off int, src uint64, n int) bool

// RecordInlineCopy128 is RecordInlineCopy64 of two blocks: the data
// copied into blk at off, then what RecordCopy128 does.
//
//go:noescape
func RecordInlineCopy128(rec *uint32, v uint32, dst, blk *[128]byte, off int, src uint64, n int) bool
