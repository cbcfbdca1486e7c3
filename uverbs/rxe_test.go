package uverbs

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/mmio"
)

// fakeCQRing is an rxe completion ring in ordinary memory, laid out as
// the kernel maps it: the queue header, then size slots of one
// ib_uverbs_wc each.
func fakeCQRing(t *testing.T, size uint32) *rxeRing {
	t.Helper()
	log2 := uint32(0)
	for 1<<log2 < abi.SizeofWC {
		log2++
	}
	mem := make([]byte, abi.OffsetofRXEQueueBufData+uintptr(size)<<log2)
	r := &rxeRing{mem: mem, hdr: mmio.At[abi.RXEQueueBuf](mem, 0), data: mem[abi.OffsetofRXEQueueBufData:],
		mask: size - 1, log2: log2}
	r.hdr.IndexMask, r.hdr.Log2ElemSize = r.mask, r.log2
	return r
}

// TestRxePollWritesEveryField polls completions into slots full of
// garbage: every field of WorkCompletion must come from the ring (or be
// zeroed), so a field added to WorkCompletion but not to poll fails here.
func TestRxePollWritesEveryField(t *testing.T) {
	r := fakeCQRing(t, 4)
	q := &rxeCQ{ring: r}
	put := func(i uint32, e abi.WC) { *mmio.At[abi.WC](r.data, r.slot(i)) = e }
	imm := abi.WC{WRID: 0x1122334455667788, Status: uint32(WCSuccess), Opcode: uint32(WCRecvRDMAWithImm),
		VendorErr: 7, ByteLen: 4096, QPNum: 0x11, SrcQP: 0x22, WCFlags: ibWCWithImm | ibWCGRH,
		PKeyIndex: 3, SLID: 0x1234, SL: 5, DLIDPathBits: 6, PortNum: 1}
	*imm.Ex.ImmData() = 0x01020304 // big-endian on the wire: host order 0x04030201 on x86
	inv := abi.WC{WRID: 9, Status: uint32(WCSuccess), Opcode: uint32(WCRecv), ByteLen: 8, QPNum: 0x11,
		WCFlags: ibWCWithInvalidate | ibWCIPCsumOK}
	*inv.Ex.ImmData() = 0xabcd00
	put(0, imm)
	put(1, inv)
	r.hdr.ProducerIndex = 2

	wc := make([]WorkCompletion, 4)
	for i := range wc {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&wc[i])), unsafe.Sizeof(wc[i]))
		for j := range b {
			b[j] = 0xff
		}
	}
	if n := q.poll(wc); n != 2 {
		t.Fatalf("poll = %d, want 2", n)
	}
	want := []WorkCompletion{
		{WRID: imm.WRID, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, VendorErr: 7, ByteLen: 4096,
			Imm: be32(0x01020304), QPNum: 0x11, SrcQP: 0x22, Flags: WCWithImm | WCWithGRH,
			PKeyIndex: 3, SLID: 0x1234, SL: 5, DLIDPathBits: 6, PortNum: 1},
		{WRID: 9, Status: WCSuccess, Opcode: WCRecv, ByteLen: 8, InvalidatedRKey: 0xabcd00, QPNum: 0x11,
			Flags: WCWithInv | WCIPCsumOK},
	}
	if diff := cmp.Diff(want, wc[:2]); diff != "" {
		t.Errorf("polled completions (-want +got):\n%s", diff)
	}
	if r.hdr.ConsumerIndex != 2 {
		t.Errorf("consumer index %d, want 2", r.hdr.ConsumerIndex)
	}
	if n := q.poll(wc); n != 0 {
		t.Errorf("poll of an empty ring = %d", n)
	}
	if allocs := testing.AllocsPerRun(100, func() { q.poll(wc) }); allocs != 0 {
		t.Errorf("poll allocates %v times", allocs)
	}
}
