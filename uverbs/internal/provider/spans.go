package provider

import "sync/atomic"

// Spans is the memory registered on a context that stays mapped while
// it is registered, by local key: what lets a provider copy inline data
// from inside a registered MR without the fault net of CopyInline (and
// of mlx5's own copy), at the cost of a table lookup. uverbs adds an MR
// when it is registered (or reregistered) and removes it before it is
// deregistered; on-demand-paging MRs are never added, as their memory
// may be unmapped while they are registered.
//
// The table is direct-mapped: an MR whose slot another holds is not in
// it, and its inline posts keep the fault net. Lookups take no lock and
// read one atomic pointer; Add and Remove are for registration's slow
// path. The zero Spans is empty and ready.
type Spans struct {
	slots [spanSlots]atomic.Pointer[span]
}

// span is one registered range, [lo, hi), and its local key.
type span struct {
	lkey   uint32
	lo, hi uint64
}

const spanSlots = 256

// spanSlot is lkey's slot: its index bits (the low byte of an mlx5 or
// rxe key is the key byte, the rest the index) folded with the key byte.
func spanSlot(lkey uint32) uint32 { return (lkey>>8 ^ lkey) % spanSlots }

// Add records the registration of n bytes at addr under lkey, in place
// of what held its slot.
func (t *Spans) Add(lkey uint32, addr, n uint64) {
	if n == 0 || addr+n < addr {
		return
	}
	t.slots[spanSlot(lkey)].Store(&span{lkey: lkey, lo: addr, hi: addr + n})
}

// Remove forgets lkey's registration, if its slot holds it.
func (t *Spans) Remove(lkey uint32) {
	s := &t.slots[spanSlot(lkey)]
	for {
		p := s.Load()
		if p == nil || p.lkey != lkey || s.CompareAndSwap(p, nil) {
			return
		}
	}
}

// Covers says whether the n bytes at addr lie in the registration of
// lkey: memory that stays mapped (and readable) for as long as it is
// registered. A range whose end wraps past 2^64 can be reported covered:
// the caller refuses such a range before it reads (mlx5's
// putInlineOneRing looks up first and checks the wrap right after).
func (t *Spans) Covers(lkey uint32, addr uint64, n uint32) bool {
	p := t.slots[spanSlot(lkey)].Load()
	return p != nil && p.lkey == lkey && addr >= p.lo && addr+uint64(n) <= p.hi
}
