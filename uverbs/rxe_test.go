package uverbs

import (
	"math/bits"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"github.com/purerdma/rdma/uverbs/internal/rxe"
)

// fakeRing is an rxe completion ring in ordinary memory, laid out as
// the kernel maps it: the queue header, then one ib_uverbs_wc per slot.
type fakeRing struct {
	mem        []byte
	hdr        *abi.RXEQueueBuf
	mask, log2 uint32
}

// put writes e into slot i.
func (r *fakeRing) put(i uint32, e abi.WC) {
	*mmio.At[abi.WC](r.mem, int(abi.OffsetofRXEQueueBufData)+int((i&r.mask)<<r.log2)) = e
}

// fakeRxeCQ is rxe's CQ of context c on a fake ring of size slots.
func fakeRxeCQ(t *testing.T, c *Context, size uint32) (*rxe.CQ, *fakeRing) {
	t.Helper()
	log2 := uint32(0)
	for 1<<log2 < abi.SizeofWC {
		log2++
	}
	mem := make([]byte, abi.OffsetofRXEQueueBufData+uintptr(size)<<log2)
	r := &fakeRing{mem: mem, hdr: mmio.At[abi.RXEQueueBuf](mem, 0), mask: size - 1, log2: log2}
	r.hdr.IndexMask, r.hdr.Log2ElemSize = r.mask, r.log2
	if c.pc == nil {
		c.pc = provider.NewContext(nil, 0)
	}
	q, err := rxe.NewCQOnMemory(c.pc, mem)
	if err != nil {
		t.Fatal(err)
	}
	return q, r
}

// rxePollPaths are the two rxe poll loops: CQ.Poll's own, for a CQ with
// a TD, and rxe.CQ.Poll, the interface's (a locked CQ's).
var rxePollPaths = []string{"CQ.Poll", "rxe.CQ.Poll"}

// rxePoller polls q through the loop path names.
func rxePoller(t *testing.T, path string, q *rxe.CQ) func([]WorkCompletion) int {
	cq := &CQ{door: cqDoor{rxe: q}}
	return func(wc []WorkCompletion) int {
		if path == "rxe.CQ.Poll" {
			return q.Poll(wcView(wc))
		}
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// The kernel's enum ib_wc_flags (include/rdma/ib_verbs.h; the UAPI
// headers have it only as pvrdma's copy), which rxe writes into user
// completions: written out here, not taken from WCFlags, so that the
// tests below check WCFlags against them.
const (
	kWCGRH            = 1 << 0
	kWCWithImm        = 1 << 1
	kWCWithInvalidate = 1 << 2
	kWCIPCsumOK       = 1 << 3
)

// TestWorkCompletionLayout: rxe's poll copies ib_uverbs_wc's first
// bytes into a WorkCompletion as one block, so its fields must sit where
// the kernel's do.
func TestWorkCompletionLayout(t *testing.T) {
	var w WorkCompletion
	var k abi.WC
	got := []uintptr{unsafe.Offsetof(w.WRID), unsafe.Offsetof(w.Status), unsafe.Offsetof(w.Opcode),
		unsafe.Offsetof(w.VendorErr), unsafe.Offsetof(w.ByteLen), unsafe.Offsetof(w.Imm),
		unsafe.Offsetof(w.QPNum), unsafe.Offsetof(w.SrcQP), unsafe.Offsetof(w.Flags),
		unsafe.Offsetof(w.PKeyIndex), unsafe.Offsetof(w.SLID), unsafe.Offsetof(w.SL), unsafe.Offsetof(w.DLIDPathBits)}
	want := []uintptr{unsafe.Offsetof(k.WRID), unsafe.Offsetof(k.Status), unsafe.Offsetof(k.Opcode),
		unsafe.Offsetof(k.VendorErr), unsafe.Offsetof(k.ByteLen), unsafe.Offsetof(k.Ex),
		unsafe.Offsetof(k.QPNum), unsafe.Offsetof(k.SrcQP), unsafe.Offsetof(k.WCFlags),
		unsafe.Offsetof(k.PKeyIndex), unsafe.Offsetof(k.SLID), unsafe.Offsetof(k.SL), unsafe.Offsetof(k.DLIDPathBits)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WorkCompletion's offsets differ from ib_uverbs_wc's (-kernel +Go):\n%s", diff)
	}
	// abi.CopyWC writes the kernel's port_num and reserved bytes after
	// DLIDPathBits: they must land in padding.
	if o := unsafe.Offsetof(w.PortNum); o < abi.SizeofWC {
		t.Errorf("PortNum at %d, inside the %d bytes abi.CopyWC writes", o, abi.SizeofWC)
	}
	for _, c := range []struct {
		f    WCFlags
		bits uint32
	}{{WCWithGRH, kWCGRH}, {WCWithImm, kWCWithImm}, {WCWithInv, kWCWithInvalidate}, {WCIPCsumOK, kWCIPCsumOK}} {
		if uint32(c.f) != c.bits {
			t.Errorf("%v = %#x, the kernel's bit is %#x", c.f, uint32(c.f), c.bits)
		}
	}
}

// TestRxePollWritesEveryField polls completions into slots full of
// garbage: every field of WorkCompletion must come from the ring (or be
// zeroed), so a field added to WorkCompletion but not to poll fails here.
// Both loops: CQ.Poll's (a CQ with a TD) and the interface's (locked).
func TestRxePollWritesEveryField(t *testing.T) {
	for _, path := range rxePollPaths {
		t.Run(path, func(t *testing.T) {
			q, r := fakeRxeCQ(t, &Context{}, 4)
			poll := rxePoller(t, path, q)
			put := r.put
			imm := abi.WC{WRID: 0x1122334455667788, Status: uint32(WCSuccess), Opcode: uint32(WCRecvRDMAWithImm),
				VendorErr: 7, ByteLen: 4096, QPNum: 0x11, SrcQP: 0x22, WCFlags: kWCWithImm | kWCGRH,
				PKeyIndex: 3, SLID: 0x1234, SL: 5, DLIDPathBits: 6, PortNum: 1, Reserved: 0xee}
			*imm.Ex.ImmData() = 0x01020304 // big-endian on the wire: host order 0x04030201 on x86
			inv := abi.WC{WRID: 9, Status: uint32(WCSuccess), Opcode: uint32(WCRecv), ByteLen: 8, QPNum: 0x11,
				WCFlags: kWCWithInvalidate | kWCIPCsumOK}
			*inv.Ex.ImmData() = 0xabcd00
			// Neither flag: the union's bytes are not data.
			plain := abi.WC{WRID: 10, Status: uint32(WCRemAccessErr), Opcode: uint32(WCRDMAWrite), VendorErr: 0x33, QPNum: 0x12}
			*plain.Ex.ImmData() = 0x55667788
			put(0, imm)
			put(1, inv)
			put(2, plain)
			r.hdr.ProducerIndex = 3

			wc := make([]WorkCompletion, 4)
			for i := range wc {
				b := unsafe.Slice((*byte)(unsafe.Pointer(&wc[i])), unsafe.Sizeof(wc[i]))
				for j := range b {
					b[j] = 0xff
				}
			}
			if n := poll(wc); n != 3 {
				t.Fatalf("poll = %d, want 3", n)
			}
			want := []WorkCompletion{
				{WRID: imm.WRID, Status: WCSuccess, Opcode: WCRecvRDMAWithImm, VendorErr: 7, ByteLen: 4096,
					Imm: bits.ReverseBytes32(0x01020304), QPNum: 0x11, SrcQP: 0x22, Flags: WCWithImm | WCWithGRH,
					PKeyIndex: 3, SLID: 0x1234, SL: 5, DLIDPathBits: 6, PortNum: 1},
				{WRID: 9, Status: WCSuccess, Opcode: WCRecv, ByteLen: 8, Imm: 0xabcd00, QPNum: 0x11,
					Flags: WCWithInv | WCIPCsumOK},
				{WRID: 10, Status: WCRemAccessErr, Opcode: WCRDMAWrite, VendorErr: 0x33, QPNum: 0x12},
			}
			if diff := cmp.Diff(want, wc[:3]); diff != "" {
				t.Errorf("polled completions (-want +got):\n%s", diff)
			}
			if r0, r1 := wc[0].InvalidatedRKey(), wc[1].InvalidatedRKey(); r0 != 0 || r1 != 0xabcd00 {
				t.Errorf("InvalidatedRKey() = %#x, %#x, want 0 (immediate data), 0xabcd00", r0, r1)
			}
			if wc[3].WRID != 1<<64-1 {
				t.Errorf("slot past the polled ones written: %+v", wc[3])
			}
			if r.hdr.ConsumerIndex != 3 {
				t.Errorf("consumer index %d, want 3", r.hdr.ConsumerIndex)
			}
			if n := poll(wc); n != 0 {
				t.Errorf("poll of an empty ring = %d", n)
			}
			// Wrapping: the ring has 4 slots, index 3 then 0.
			put(3, inv)
			put(0, plain)
			r.hdr.ProducerIndex = 1
			if n := poll(wc[:1]); n != 1 || wc[0].WRID != 9 {
				t.Errorf("poll of one = %d (WRID %d), want 1 (9)", n, wc[0].WRID)
			}
			if n := poll(wc); n != 1 || wc[0].WRID != 10 || r.hdr.ConsumerIndex != 1 {
				t.Errorf("poll past the wrap = %d (WRID %d, consumer %d), want 1 (10, 1)", n, wc[0].WRID, r.hdr.ConsumerIndex)
			}
			if allocs := testing.AllocsPerRun(100, func() { poll(wc) }); allocs != 0 {
				t.Errorf("poll allocates %v times", allocs)
			}
		})
	}
}
