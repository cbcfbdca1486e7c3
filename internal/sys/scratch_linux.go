package sys

import (
	"sync"
	"unsafe"
)

// ScratchSize is the size of one Scratch block.
const ScratchSize = 2048

// scratchPerChunk blocks are mapped at a time.
const scratchPerChunk = 32

// Scratch is a block of memory outside the Go heap for one kernel call:
// the command the kernel reads and the response it writes through an
// address inside the command. The garbage collector neither moves nor
// frees it, so its addresses can go to the kernel without pinning, and
// taking a block from the pool does not allocate. Blocks are never
// unmapped: the pool holds as many as calls ever ran at once.
type Scratch struct {
	mem  *[ScratchSize]byte
	next *Scratch
}

var scratchPool struct {
	mu   sync.Mutex
	free *Scratch
}

// GetScratch takes a block from the pool; Release returns it. The
// block's contents are left from its last use.
func GetScratch() (*Scratch, error) {
	scratchPool.mu.Lock()
	s := scratchPool.free
	if s != nil {
		scratchPool.free = s.next
		scratchPool.mu.Unlock()
		s.next = nil
		return s, nil
	}
	scratchPool.mu.Unlock()
	mem, err := MmapAnon(ScratchSize * scratchPerChunk)
	if err != nil {
		return nil, err
	}
	blocks := make([]Scratch, scratchPerChunk)
	for i := range blocks {
		blocks[i].mem = (*[ScratchSize]byte)(mem[i*ScratchSize:])
	}
	scratchPool.mu.Lock()
	for i := 1; i < len(blocks); i++ {
		blocks[i].next = scratchPool.free
		scratchPool.free = &blocks[i]
	}
	scratchPool.mu.Unlock()
	return &blocks[0], nil
}

// Release returns the block to the pool. The block must not be used
// after.
func (s *Scratch) Release() {
	scratchPool.mu.Lock()
	s.next = scratchPool.free
	scratchPool.free = s
	scratchPool.mu.Unlock()
}

// Bytes is the whole block.
func (s *Scratch) Bytes() []byte { return s.mem[:] }

// Zero clears b bytes at off and returns them.
func (s *Scratch) Zero(off, n int) []byte {
	b := s.mem[off : off+n]
	clear(b)
	return b
}

// ScratchAt views the block at off as a T (cleared), for a response the
// kernel writes there. T must fit; it is the caller's constant layout.
func ScratchAt[T any](s *Scratch, off int) *T {
	var zero T
	b := s.Zero(off, int(unsafe.Sizeof(zero)))
	return (*T)(unsafe.Pointer(&b[0]))
}

// Addr is the user address of the block's byte off, for a command field.
func (s *Scratch) Addr(off int) Pointer {
	return Pointer(uintptr(unsafe.Pointer(&s.mem[off])))
}
