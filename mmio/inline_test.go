//go:build linux

package mmio

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// guarded maps a page of pattern bytes between two pages that cannot be
// read: a copy that reads one byte before or after what it was given
// faults the test.
func guarded(t *testing.T) []byte {
	t.Helper()
	ps := syscall.Getpagesize()
	m, err := syscall.Mmap(-1, 0, 3*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	for _, g := range [][]byte{m[:ps], m[2*ps:]} {
		if err := syscall.Mprotect(g, syscall.PROT_NONE); err != nil {
			t.Fatal(err)
		}
	}
	page := m[ps : 2*ps]
	for i := range page {
		page[i] = byte(i*13 + 5)
	}
	return page
}

// TestRecordInlineCopy: for every data offset and length that fits, the
// data is copied into the block (and nothing else of it changes), the
// record is stored big-endian and the block then copied to dst, the
// source read exactly: from the first byte of a page after an unreadable
// one, and up to the last byte of a page before an unreadable one.
func TestRecordInlineCopy(t *testing.T) {
	page := guarded(t)
	for _, size := range []int{64, 128} {
		for _, off := range []int{0, 1, 4, 20, 36, 52, 60, 64, 100, 127, 128} {
			if off > size {
				continue
			}
			for n := 0; n <= size-off; n++ {
				for _, at := range []string{"start", "end"} {
					src := page[:n]
					if at == "end" {
						src = page[len(page)-n:]
					}
					addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(src))))
					name := fmt.Sprintf("%d/off=%d/n=%d/%s", size, off, n, at)
					rec, recAll := aligned(t, 8)
					dst, dstAll := aligned(t, size)
					blk, blkAll := aligned(t, size)
					for i := range blk {
						blk[i] = byte(200 + i)
					}
					wantRec, wantDst, wantBlk := bytes.Clone(recAll), bytes.Clone(dstAll), bytes.Clone(blkAll)
					recStart := int(uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&recAll[0])))
					dstStart := int(uintptr(unsafe.Pointer(&dst[0])) - uintptr(unsafe.Pointer(&dstAll[0])))
					blkStart := int(uintptr(unsafe.Pointer(&blk[0])) - uintptr(unsafe.Pointer(&blkAll[0])))
					copy(wantRec[recStart:], []byte{0xa1, 0xb2, 0xc3, 0xd4})
					copy(wantBlk[blkStart+off:], src)
					copy(wantDst[dstStart:], wantBlk[blkStart:blkStart+size])
					var ok bool
					if size == 64 {
						ok = RecordInlineCopy64(At[uint32](rec, 0), 0xa1b2c3d4, At[[64]byte](dst, 0), At[[64]byte](blk, 0), off, addr, n)
					} else {
						ok = RecordInlineCopy128(At[uint32](rec, 0), 0xa1b2c3d4, At[[128]byte](dst, 0), At[[128]byte](blk, 0), off, addr, n)
					}
					if !ok {
						t.Fatalf("%s: refused", name)
					}
					for what, d := range map[string]string{
						"record": cmp.Diff(wantRec, recAll), "dst": cmp.Diff(wantDst, dstAll), "block": cmp.Diff(wantBlk, blkAll),
					} {
						if d != "" {
							t.Fatalf("%s: the %s's memory (-want +got):\n%s", name, what, d)
						}
					}
				}
			}
		}
	}
}

// TestRecordInlineCopyRefused: a dst not 64-byte aligned, or data that
// does not fit in the block at off (negative values included), is
// refused with nothing stored: not the record, the data or the copy.
func TestRecordInlineCopyRefused(t *testing.T) {
	page := guarded(t)
	addr := uint64(uintptr(unsafe.Pointer(&page[0])))
	for _, size := range []int{64, 128} {
		for _, tt := range []struct {
			name           string
			dstOff, off, n int
		}{
			{"dst+8", 8, 0, 4},
			{"dst+63", 63, 16, 16},
			{"off past the block", 0, size + 1, 0},
			{"n past the block", 0, size - 4, 5},
			{"n of the whole block from 1", 0, 1, size},
			{"negative off", 0, -1, 4},
			{"negative n", 0, 4, -1},
			{"huge n", 0, 4, int(^uint(0) >> 1)},
		} {
			t.Run(fmt.Sprintf("%d/%s", size, tt.name), func(t *testing.T) {
				rec, recAll := aligned(t, 8)
				dst, dstAll := aligned(t, size+64)
				blk, blkAll := aligned(t, size)
				for i := range blk {
					blk[i] = byte(200 + i)
				}
				wantRec, wantDst, wantBlk := bytes.Clone(recAll), bytes.Clone(dstAll), bytes.Clone(blkAll)
				var ok bool
				if size == 64 {
					ok = RecordInlineCopy64(At[uint32](rec, 0), 1, At[[64]byte](dst, tt.dstOff), At[[64]byte](blk, 0), tt.off, addr, tt.n)
				} else {
					ok = RecordInlineCopy128(At[uint32](rec, 0), 1, At[[128]byte](dst, tt.dstOff), At[[128]byte](blk, 0), tt.off, addr, tt.n)
				}
				if ok {
					t.Fatal("not refused")
				}
				if !bytes.Equal(recAll, wantRec) || !bytes.Equal(dstAll, wantDst) || !bytes.Equal(blkAll, wantBlk) {
					t.Error("a refused call stored something")
				}
			})
		}
	}
}
