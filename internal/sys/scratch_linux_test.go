package sys

import (
	"testing"
	"unsafe"
)

func TestScratchReuseAndNoAllocation(t *testing.T) {
	a, err := GetScratch()
	if err != nil {
		t.Fatal(err)
	}
	b, err := GetScratch()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || &a.Bytes()[0] == &b.Bytes()[0] {
		t.Fatal("two blocks in use share memory")
	}
	if len(a.Bytes()) != ScratchSize {
		t.Fatalf("block is %d bytes, want %d", len(a.Bytes()), ScratchSize)
	}
	// Blocks sit in memory the kernel can write: the address of a byte
	// is the address of the pointer.
	if got, want := a.Addr(100), Pointer(uintptr(unsafe.Pointer(&a.Bytes()[100]))); got != want {
		t.Fatalf("Addr(100) = %#x, want %#x", got, want)
	}
	b.Release()
	a.Release()
	allocs := testing.AllocsPerRun(100, func() {
		s, err := GetScratch()
		if err != nil {
			t.Fatal(err)
		}
		v := ScratchAt[[4]uint64](s, 64)
		v[3] = 7
		s.Release()
	})
	if allocs != 0 {
		t.Errorf("GetScratch + Release: %v allocations, want 0", allocs)
	}
}

func TestScratchAtClears(t *testing.T) {
	s, err := GetScratch()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	for i := range s.Bytes() {
		s.Bytes()[i] = 0xff
	}
	v := ScratchAt[[2]uint64](s, 8)
	if *v != [2]uint64{} {
		t.Fatalf("ScratchAt left %x", *v)
	}
	if s.Bytes()[7] != 0xff || s.Bytes()[24] != 0xff {
		t.Fatal("ScratchAt cleared more than its value")
	}
}
