package mmio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// aligned returns a zeroed n-byte slice whose first byte is 64-byte
// aligned, with guard bytes (0xee) on both sides: the returned slice and
// the whole allocation.
func aligned(t testing.TB, n int) (buf, all []byte) {
	t.Helper()
	all = bytes.Repeat([]byte{0xee}, n+192)
	skip := (64 - int(uintptr(unsafe.Pointer(&all[0]))%64)) % 64
	buf = all[skip+64 : skip+64+n]
	clear(buf)
	return buf, all
}

func TestStoreBE(t *testing.T) {
	for _, tt := range []struct {
		name string
		off  int
		do   func(b []byte, off int)
		want []byte
	}{
		{"32 at 0", 0, func(b []byte, off int) { StoreUint32BE(b, off, 0x01020304) }, []byte{1, 2, 3, 4}},
		{"32 at 12", 12, func(b []byte, off int) { StoreUint32BE(b, off, 0xdeadbeef) }, []byte{0xde, 0xad, 0xbe, 0xef}},
		{"32 zero", 4, func(b []byte, off int) { StoreUint32BE(b, off, 0) }, []byte{0, 0, 0, 0}},
		{"64 at 0", 0, func(b []byte, off int) { StoreUint64BE(b, off, 0x0102030405060708) }, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"64 at 24", 24, func(b []byte, off int) { StoreUint64BE(b, off, 0xa1b2c3d4e5f60718) }, []byte{0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := aligned(t, 32)
			for i := range b {
				b[i] = 0x55
			}
			want := bytes.Repeat([]byte{0x55}, 32)
			copy(want[tt.off:], tt.want)
			tt.do(b, tt.off)
			if diff := cmp.Diff(want, b); diff != "" {
				t.Errorf("memory after the store (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStoreBERoundTrip: the big-endian stores agree with encoding/binary
// and with the acquire loads for every byte position.
func TestStoreBERoundTrip(t *testing.T) {
	b, _ := aligned(t, 8)
	for _, v := range []uint64{0, 1, 0xff, 0x8000000000000000, 0x0123456789abcdef, ^uint64(0)} {
		StoreUint64BE(b, 0, v)
		if got := binary.BigEndian.Uint64(b); got != v {
			t.Errorf("StoreUint64BE(%#x): memory holds %#x big-endian", v, got)
		}
		StoreUint32BE(b, 4, uint32(v))
		if got := binary.BigEndian.Uint32(b[4:]); got != uint32(v) {
			t.Errorf("StoreUint32BE(%#x): memory holds %#x big-endian", uint32(v), got)
		}
		if got, want := LoadUint32(b, 4), binary.NativeEndian.Uint32(b[4:]); got != want {
			t.Errorf("LoadUint32 after StoreUint32BE = %#x, want %#x", got, want)
		}
	}
}

func TestStoreBEBounds(t *testing.T) {
	b := make([]byte, 8)
	for name, f := range map[string]func(){
		"32 past end": func() { StoreUint32BE(b, 6, 1) },
		"64 past end": func() { StoreUint64BE(b, 4, 1) },
		"64 negative": func() { StoreUint64BE(b, -8, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("an out-of-bounds store did not panic")
				}
			}()
			f()
		})
	}
}

func pattern(seed byte) *[64]byte {
	var p [64]byte
	for i := range p {
		p[i] = seed + byte(i)*7
	}
	return &p
}

func TestCopy64(t *testing.T) {
	for _, srcOff := range []int{0, 1, 3, 8, 15, 16, 33} {
		t.Run(fmt.Sprintf("src+%d", srcOff), func(t *testing.T) {
			dst, all := aligned(t, 64)
			srcBuf := make([]byte, 64+srcOff)
			copy(srcBuf[srcOff:], pattern(byte(srcOff))[:])
			src := (*[64]byte)(srcBuf[srcOff:])
			before := bytes.Clone(all)
			if !Copy64(dst, src) {
				t.Fatal("Copy64 to an aligned 64-byte buffer returned false")
			}
			if diff := cmp.Diff(src[:], dst); diff != "" {
				t.Errorf("copied bytes (-want +got):\n%s", diff)
			}
			// Nothing outside dst changed.
			start := int(uintptr(unsafe.Pointer(&dst[0])) - uintptr(unsafe.Pointer(&all[0])))
			want := bytes.Clone(before)
			copy(want[start:], src[:])
			if !bytes.Equal(all, want) {
				t.Errorf("Copy64 wrote outside dst")
			}
		})
	}
}

// TestCopy64Refuses: a misaligned or short dst is refused and left as
// it was.
func TestCopy64Refuses(t *testing.T) {
	for _, tt := range []struct {
		name     string
		off, len int
	}{
		{"misaligned by 1", 1, 64},
		{"misaligned by 8", 8, 64},
		{"misaligned by 16", 16, 64},
		{"misaligned by 63", 63, 64},
		{"63 bytes", 0, 63},
		{"empty", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf, all := aligned(t, 192)
			dst := buf[tt.off : tt.off+tt.len]
			before := bytes.Clone(all)
			if Copy64(dst, pattern(1)) {
				t.Errorf("Copy64 to %d bytes at alignment offset %d returned true", tt.len, tt.off)
			}
			if !bytes.Equal(all, before) {
				t.Errorf("a refused Copy64 changed memory")
			}
		})
	}
	if Copy64(nil, pattern(1)) {
		t.Error("Copy64(nil) returned true")
	}
}

// TestCopy64Longer: dst may be longer than 64 bytes; only the first 64
// are written.
func TestCopy64Longer(t *testing.T) {
	dst, _ := aligned(t, 128)
	for i := range dst {
		dst[i] = 0x77
	}
	src := pattern(9)
	if !Copy64(dst, src) {
		t.Fatal("Copy64 returned false")
	}
	want := append(bytes.Clone(src[:]), bytes.Repeat([]byte{0x77}, 64)...)
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("dst (-want +got):\n%s", diff)
	}
}

func TestNoAllocs(t *testing.T) {
	dst, _ := aligned(t, 64)
	src := pattern(3)
	for name, f := range map[string]func(){
		"WriteBarrier":  WriteBarrier,
		"ReadBarrier":   ReadBarrier,
		"StoreUint32BE": func() { StoreUint32BE(dst, 0, 1) },
		"StoreUint64BE": func() { StoreUint64BE(dst, 8, 1) },
		"Copy64":        func() { Copy64(dst, src) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}

// TestConcurrentPublish: a producer fills a record with plain stores and
// publishes its sequence number with StoreUint32BE; a consumer that sees
// the number (acquire load, then ReadBarrier) must see the whole record.
//
//purerdma:race
func TestConcurrentPublish(t *testing.T) {
	const rounds = 20000
	mem, _ := aligned(t, 64)
	done := make(chan error)
	go func() {
		last := uint32(0)
		for last < rounds {
			seq := swap32(LoadUint32(mem, 0))
			if seq == last {
				continue
			}
			ReadBarrier()
			for i := 8; i < 64; i += 8 {
				if got := LoadUint64(mem, i); got < uint64(seq) {
					done <- fmt.Errorf("sequence %d published with word %d = %d", seq, i/8, got)
					return
				}
			}
			last = seq
		}
		done <- nil
	}()
	for seq := uint32(1); seq <= rounds; seq++ {
		for i := 8; i < 64; i += 8 {
			StoreUint64(mem, i, uint64(seq))
		}
		StoreUint32BE(mem, 0, seq)
		for swap32(LoadUint32(mem, 0)) != seq {
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func swap32(v uint32) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return binary.BigEndian.Uint32(b[:])
}

func BenchmarkWriteBarrier(b *testing.B) {
	for b.Loop() {
		WriteBarrier()
	}
}

func BenchmarkReadBarrier(b *testing.B) {
	for b.Loop() {
		ReadBarrier()
	}
}

func BenchmarkStoreUint32(b *testing.B) {
	mem, _ := aligned(b, 64)
	for i := 0; b.Loop(); i++ {
		StoreUint32(mem, 0, uint32(i))
	}
}

func BenchmarkStoreUint32BE(b *testing.B) {
	mem, _ := aligned(b, 64)
	for i := 0; b.Loop(); i++ {
		StoreUint32BE(mem, 0, uint32(i))
	}
}

func BenchmarkStoreUint64BE(b *testing.B) {
	mem, _ := aligned(b, 64)
	for i := 0; b.Loop(); i++ {
		StoreUint64BE(mem, 0, uint64(i))
	}
}

func BenchmarkCopy64(b *testing.B) {
	dst, _ := aligned(b, 64)
	src := pattern(5)
	b.SetBytes(64)
	for b.Loop() {
		Copy64(dst, src)
	}
}

// BenchmarkCopyBuiltin is the reference for Copy64: the built-in copy of
// 64 bytes, without the fence.
func BenchmarkCopyBuiltin(b *testing.B) {
	dst, _ := aligned(b, 64)
	src := pattern(5)
	b.SetBytes(64)
	for b.Loop() {
		copy(dst, src[:])
	}
}

func TestPersist(t *testing.T) {
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(i)
	}
	Persist(b[3:250]) // unaligned start and end
	Persist(nil)
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, b[i])
		}
	}
}

func TestRing(t *testing.T) {
	type slot struct{ A, B uint64 }
	b := make([]byte, 4*32)
	for _, c := range []struct {
		slots  uint64
		stride int
		ok     bool
	}{
		{4, 32, true}, {2, 64, true}, {1, 16, true},
		{3, 32, false},  // not a power of two
		{0, 32, false},  // no slots
		{4, 8, false},   // a slot cannot hold a T
		{8, 32, false},  // does not fit
		{4, -32, false}, // negative stride
		{1 << 33, 16, false},
	} {
		_, err := NewRing[slot](b, c.slots, c.stride)
		if (err == nil) != c.ok {
			t.Errorf("NewRing(%d slots, stride %d): %v, want ok %v", c.slots, c.stride, err, c.ok)
		}
	}
	r, err := NewRing[slot](b, 4, 32)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mask() != 3 {
		t.Errorf("Mask %d, want 3", r.Mask())
	}
	for i := uint32(0); i < 9; i++ {
		r.Slot(i).A = uint64(i)
	}
	// Index i lands at (i & 3) * 32: 8 was written last into slot 0.
	for i, want := range []uint64{8, 5, 6, 7} {
		if got := At[slot](b, i*32).A; got != want {
			t.Errorf("slot %d holds %d, want %d", i, got, want)
		}
	}
}
