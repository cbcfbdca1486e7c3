//go:build amd64 || arm64

package cycles

// Read returns the counter. It ticks at a constant rate: the invariant
// TSC of every x86-64 processor of the last decade, the architected
// timer of arm64.
//
//go:noescape
func Read() uint64
