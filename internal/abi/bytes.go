package abi

import "unsafe"

// Pointer is a 64-bit struct member that carries an address in this
// process for the kernel to write to (a command's response buffer). Fill
// it only from live, pinned Go memory: sys.PointerTo.
type Pointer uint64

// Bytes views a kernel struct (or integer) as the bytes the kernel reads
// or writes: no copy, same memory. T must hold no Go pointers; every
// generated type qualifies.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// Size is the size of a kernel struct T in bytes (a driver response's
// length, for instance).
func Size[T any]() int {
	var v T
	return int(unsafe.Sizeof(v))
}

// BytesOfSlice views a slice of kernel structs as bytes.
func BytesOfSlice[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// CopyWC copies a whole ib_uverbs_wc to the front of *dst, a Go struct
// that begins with the same layout (uverbs.WorkCompletion, whose layout
// test checks that; the bytes past dlid_path_bits land in its padding).
// It is three 16-byte moves, no call and no check.
func CopyWC[T any](dst *T, src *WC) {
	if unsafe.Sizeof(*dst) < unsafe.Sizeof(*src) {
		panic("abi.CopyWC: destination smaller than ib_uverbs_wc")
	}
	*(*wcWords)(unsafe.Pointer(dst)) = *(*wcWords)(unsafe.Pointer(src))
}

// wcWords is ib_uverbs_wc as words: the compiler copies a struct of
// words with vector moves, a byte array of the same size with a call
// to memmove.
type wcWords struct{ a, b, c, d, e, f uint64 }

// wcWords is exactly as large as WC.
var (
	_ [unsafe.Sizeof(WC{}) - unsafe.Sizeof(wcWords{})]byte
	_ [unsafe.Sizeof(wcWords{}) - unsafe.Sizeof(WC{})]byte
)
