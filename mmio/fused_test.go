package mmio

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// TestDoorbell: Doorbell stores the record and the doorbell big-endian,
// as StoreUint32BE and StoreUint64BE do, and nothing else.
func TestDoorbell(t *testing.T) {
	rec, recAll := aligned(t, 8)
	reg, regAll := aligned(t, 64)
	wantRec, wantReg := bytes.Clone(recAll), bytes.Clone(regAll)
	recStart := int(uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&recAll[0])))
	regStart := int(uintptr(unsafe.Pointer(&reg[0])) - uintptr(unsafe.Pointer(&regAll[0])))
	copy(wantRec[recStart+4:], []byte{0x00, 0x00, 0x12, 0x34})
	copy(wantReg[regStart+32:], []byte{0x0a, 0x00, 0x12, 0x34, 0x00, 0x01, 0x02, 0x03})

	Doorbell(At[uint32](rec, 4), 0x1234, At[uint64](reg, 32), 0x0a00123400010203)
	if diff := cmp.Diff(wantRec, recAll); diff != "" {
		t.Errorf("the record's memory (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantReg, regAll); diff != "" {
		t.Errorf("the register's memory (-want +got):\n%s", diff)
	}
}

// TestRecordCopy64: the record big-endian and the 64 bytes copied to an
// aligned dst; a misaligned dst is refused with nothing stored, not even
// the record.
func TestRecordCopy64(t *testing.T) {
	for _, dstOff := range []int{0, 1, 8, 16, 63} {
		t.Run(fmt.Sprintf("dst+%d", dstOff), func(t *testing.T) {
			rec, recAll := aligned(t, 8)
			buf, bufAll := aligned(t, 192)
			src := pattern(byte(dstOff) + 3)
			wantRec, wantBuf := bytes.Clone(recAll), bytes.Clone(bufAll)
			ok := RecordCopy64(At[uint32](rec, 0), 0xa1b2c3d4, At[[64]byte](buf, dstOff), src)
			if ok != (dstOff == 0) {
				t.Fatalf("RecordCopy64 to a dst at alignment offset %d returned %v", dstOff, ok)
			}
			if ok {
				recStart := int(uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&recAll[0])))
				bufStart := int(uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&bufAll[0])))
				copy(wantRec[recStart:], []byte{0xa1, 0xb2, 0xc3, 0xd4})
				copy(wantBuf[bufStart:], src[:])
			}
			if diff := cmp.Diff(wantRec, recAll); diff != "" {
				t.Errorf("the record's memory (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantBuf, bufAll); diff != "" {
				t.Errorf("dst's memory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadStoreUint32BEAt: LoadUint32BE reads what StoreUint32BEAt and
// StoreUint32BE store, and reads bytes as big-endian.
func TestLoadStoreUint32BEAt(t *testing.T) {
	b, all := aligned(t, 16)
	start := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&all[0])))
	for _, v := range []uint32{0, 1, 0xff, 0x80000000, 0x01234567, ^uint32(0)} {
		StoreUint32BEAt(At[uint32](b, 8), v)
		if got := LoadUint32BE(b, 8); got != v {
			t.Errorf("LoadUint32BE after StoreUint32BEAt(%#x) = %#x", v, got)
		}
		want := bytes.Repeat([]byte{0xee}, len(all))
		copy(want[start:], make([]byte, 16))
		copy(want[start+8:], []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if diff := cmp.Diff(want, all); diff != "" {
			t.Errorf("memory after StoreUint32BEAt(%#x) (-want +got):\n%s", v, diff)
		}
	}
	copy(b[4:], []byte{0xde, 0xad, 0xbe, 0xef})
	if got := LoadUint32BE(b, 4); got != 0xdeadbeef {
		t.Errorf("LoadUint32BE of de ad be ef = %#x", got)
	}
}

// TestRecordCopy128: as TestRecordCopy64, for two blocks.
func TestRecordCopy128(t *testing.T) {
	for _, dstOff := range []int{0, 1, 8, 16, 63} {
		t.Run(fmt.Sprintf("dst+%d", dstOff), func(t *testing.T) {
			rec, recAll := aligned(t, 8)
			buf, bufAll := aligned(t, 320)
			var src [128]byte
			a, b := pattern(byte(dstOff)+3), pattern(byte(dstOff)+101)
			copy(src[:], a[:])
			copy(src[64:], b[:])
			wantRec, wantBuf := bytes.Clone(recAll), bytes.Clone(bufAll)
			ok := RecordCopy128(At[uint32](rec, 0), 0xa1b2c3d4, At[[128]byte](buf, dstOff), &src)
			if ok != (dstOff == 0) {
				t.Fatalf("RecordCopy128 to a dst at alignment offset %d returned %v", dstOff, ok)
			}
			if ok {
				recStart := int(uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&recAll[0])))
				bufStart := int(uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&bufAll[0])))
				copy(wantRec[recStart:], []byte{0xa1, 0xb2, 0xc3, 0xd4})
				copy(wantBuf[bufStart:], src[:])
			}
			if diff := cmp.Diff(wantRec, recAll); diff != "" {
				t.Errorf("the record's memory (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantBuf, bufAll); diff != "" {
				t.Errorf("dst's memory (-want +got):\n%s", diff)
			}
		})
	}
}
