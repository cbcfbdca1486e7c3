package provider

import (
	"sync"
	"testing"
)

// TestSpans: a registration covers exactly its range under its key; a
// removed one, another key, a range outside, an empty or wrapping
// registration cover nothing; an MR whose slot another takes is out
// (its posts keep the fault net), and its removal leaves the other.
func TestSpans(t *testing.T) {
	var s Spans
	if s.Covers(0, 0, 0) || s.Covers(0x100, 0x1000, 1) {
		t.Fatal("the zero Spans covers something")
	}
	s.Add(0x1234, 0x10000, 0x1000)
	for _, tt := range []struct {
		key  uint32
		addr uint64
		n    uint32
		want bool
	}{
		{0x1234, 0x10000, 0x1000, true},
		{0x1234, 0x10000, 1, true},
		{0x1234, 0x10fff, 1, true},
		{0x1234, 0x10800, 0x800, true},
		{0x1234, 0x10800, 0x801, false}, // one past the end
		{0x1234, 0xffff, 2, false},      // one before the start
		{0x1234, 0x11000, 1, false},
		{0x1235, 0x10000, 1, false}, // another key
		{0x1334, 0x10000, 1, false}, // another key
	} {
		if got := s.Covers(tt.key, tt.addr, tt.n); got != tt.want {
			t.Errorf("Covers(%#x, %#x, %d) = %v, want %v", tt.key, tt.addr, tt.n, got, tt.want)
		}
	}
	// Keys of one slot: the later registration takes it.
	a, b := uint32(0x0101), uint32(0x0202)
	if spanSlot(a) != spanSlot(b) {
		t.Fatalf("test keys %#x and %#x are in slots %d and %d", a, b, spanSlot(a), spanSlot(b))
	}
	s.Add(a, 0x20000, 64)
	s.Add(b, 0x30000, 64)
	if s.Covers(a, 0x20000, 64) || !s.Covers(b, 0x30000, 64) {
		t.Error("of two keys in one slot, the later is not the one covered")
	}
	s.Remove(a) // not in the table: leaves b
	if !s.Covers(b, 0x30000, 64) {
		t.Error("removing a key its slot does not hold removed the other")
	}
	s.Remove(b)
	s.Remove(0x1234)
	if s.Covers(b, 0x30000, 64) || s.Covers(0x1234, 0x10000, 1) {
		t.Error("a removed registration still covers")
	}
	s.Add(7, 0x40000, 0)
	s.Add(8, ^uint64(0)-10, 100)
	if s.Covers(7, 0x40000, 0) || s.Covers(8, ^uint64(0)-10, 1) {
		t.Error("an empty or wrapping registration covers")
	}
}

// TestSpansConcurrent: lookups run beside registrations and removals
// (under -race, the table's accesses are all atomic), and a key is
// covered only by a range registered for it.
func TestSpansConcurrent(t *testing.T) {
	var s Spans
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				key := uint32(g<<16 | i%64<<8 | 1)
				base := uint64(key) << 12
				s.Add(key, base, 4096)
				if s.Covers(key, base+4096, 1) {
					t.Errorf("key %#x covers past its range", key)
					return
				}
				s.Remove(key)
			}
		}()
	}
	wg.Wait()
	for k := range spanSlots {
		if s.slots[k].Load() != nil {
			t.Fatalf("slot %d still holds a registration", k)
		}
	}
}
