package abi

import "unsafe"

// Bytes views a kernel struct (or integer) as the bytes the kernel reads
// or writes: no copy, same memory. T must hold no Go pointers; every
// generated type qualifies.
func Bytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// BytesOfSlice views a slice of kernel structs as bytes.
func BytesOfSlice[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}
