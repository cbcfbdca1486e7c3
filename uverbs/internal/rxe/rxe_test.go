package rxe

import (
	"math/bits"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// ringFD is a memfd of size bytes that starts with hdr, opened again
// through /proc as the provider's command fd: mapping it at offset 0
// maps a fake rxe queue.
func ringFD(t *testing.T, size uint64, hdr *abi.RXEQueueBuf) *sys.FD {
	t.Helper()
	mfd, err := unix.MemfdCreate("rxe queue", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mfd)
	if err := unix.Ftruncate(mfd, int64(size)); err != nil {
		t.Fatal(err)
	}
	h := abi.Bytes(hdr)
	if _, err := unix.Pwrite(mfd, h[:min(uint64(len(h)), size)], 0); err != nil {
		t.Fatal(err)
	}
	fd, err := sys.Open("/proc/self/fd/" + strconv.Itoa(mfd))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// checkRing checks that every slot of an accepted ring lies inside the
// mapped data and holds the need bytes the provider reads or writes
// there.
func checkRing(t *testing.T, what string, r *queue, need int) {
	t.Helper()
	slots := uint64(r.mask) + 1
	if slots&(slots-1) != 0 {
		t.Fatalf("%s: accepted index mask %#x: %d slots is not a power of two", what, r.mask, slots)
	}
	if r.log2 >= 63 {
		t.Fatalf("%s: accepted 2^%d-byte slots", what, r.log2)
	}
	size := uint64(1) << r.log2
	if size < uint64(need) {
		t.Fatalf("%s: accepted %d-byte slots, which must hold %d bytes", what, size, need)
	}
	if hi, total := bits.Mul64(slots, size); hi != 0 || total > uint64(len(r.data)) {
		t.Fatalf("%s: accepted %d slots of %d bytes in %d bytes of queue", what, slots, size, len(r.data))
	}
	if last := r.slot(r.mask); last < 0 || last+need > len(r.data) || r.slotSize() != int(size) {
		t.Fatalf("%s: slot %d at %d, %d bytes, of %d", what, r.mask, last, r.slotSize(), len(r.data))
	}
}

// The bytes rxe's post paths write into one slot, for the queue's
// scatter/gather and inline capacities.
func sendWQENeed(sge, inline uint32) int {
	payload := max(int(sge)*int(abi.SizeofRXESGE), int(inline), 8) // 8: ATOMIC_WRITE's data
	return max(int(unsafe.Sizeof(abi.RXESendWQE{})), int(abi.OffsetofRXESendWQEDMA)+abi.OffsetofRXEDMAInfoSGE+payload)
}

func recvWQENeed(sge uint32) int {
	return max(int(unsafe.Sizeof(abi.RXERecvWQE{})), int(abi.OffsetofRXERecvWQEDMA)+abi.OffsetofRXEDMAInfoSGE+int(sge)*int(abi.SizeofRXESGE))
}

// Queue kinds for FuzzRxeQueueHeader.
const (
	rxeKindCQ = iota
	rxeKindQP
	rxeKindSRQ
	rxeKinds
)

// FuzzRxeQueueHeader maps fake rxe queues (struct rxe_queue_buf: index
// mask, element size, producer and consumer indexes, then the slots) the
// way CreateCQ, CreateQP and CreateSRQ do, from a kernel response whose
// mmap size is fuzzed too. A header that is accepted must never make the
// provider index out of bounds: the slot count must be a power of two,
// every slot inside the mapping, and each slot large enough for what
// the provider writes there (a completion; a send WQE with the QP's
// scatter/gather entries or inline data; a receive WQE). Then polling,
// posting sends and posting receives on the accepted queue, with
// whatever indexes the header holds, must not panic.
func FuzzRxeQueueHeader(f *testing.F) {
	// Headers as rxe writes them: rxe_queue_init rounds the element up
	// to a power of two and the slot count to one more than asked.
	f.Add(uint8(rxeKindCQ), uint32(255), uint32(7), uint32(384+256*128), uint32(3), uint32(1), uint8(1), uint16(0))
	f.Add(uint8(rxeKindQP), uint32(15), uint32(9), uint32(384+16*512), uint32(0), uint32(0), uint8(4), uint16(64))
	f.Add(uint8(rxeKindSRQ), uint32(63), uint32(6), uint32(384+64*64), uint32(70), uint32(2), uint8(1), uint16(0))
	f.Add(uint8(rxeKindCQ), uint32(0), uint32(0), uint32(100), uint32(0), uint32(0), uint8(0), uint16(0)) // smaller than the header
	f.Fuzz(func(t *testing.T, kind uint8, mask, log2, size, prod, cons uint32, sge uint8, inline uint16) {
		kind %= rxeKinds
		mapSize := uint64(size) % (abi.OffsetofRXEQueueBufData + 1<<17)
		caps := provider.QPCap{MaxSendSGE: uint32(sge % 33), MaxRecvSGE: uint32(sge % 33), MaxInlineData: uint32(inline % 1024)}
		hdr := abi.RXEQueueBuf{IndexMask: mask, Log2ElemSize: log2, ProducerIndex: prod, ConsumerIndex: cons}
		fd := ringFD(t, mapSize, &hdr)
		defer fd.Close()
		p := New(provider.NewContext(fd, 0))
		mi := abi.MMInfo{Offset: 0, Size: uint32(mapSize)}

		buf := make([]byte, 1024) // inline data comes from here
		defer runtime.KeepAlive(buf)
		sgl := func(n uint32) []provider.SGE {
			s := make([]provider.SGE, n)
			for i := range s {
				s[i] = provider.SGE{Addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), Length: 1, LKey: uint32(i)}
			}
			return s
		}
		switch kind {
		case rxeKindCQ:
			resp := abi.RXECreateCQResp{MI: mi}
			q, err := p.NewCQ(&provider.CQ{}, provider.DriverReq{}, abi.Bytes(&resp))
			if err != nil {
				return
			}
			cq := q.(*CQ)
			defer cq.Unmap()
			checkRing(t, "CQ", cq.ring, int(abi.SizeofWC))
			wc := make([]provider.WC, 8)
			if n := cq.Poll(wc); n < 0 || n > len(wc) {
				t.Fatalf("poll = %d", n)
			}
		case rxeKindQP:
			resp := abi.RXECreateQPResp{SQMI: mi, RQMI: mi}
			caps.MaxSendWR, caps.MaxRecvWR = mask, mask
			qp := &provider.QP{Type: provider.QPTypeRC, Cap: caps}
			q, err := p.NewQP(qp, provider.DriverReq{}, abi.Bytes(&resp))
			if err != nil {
				return
			}
			xq := q.(*QP)
			defer xq.Unmap()
			checkRing(t, "send queue", xq.sq, sendWQENeed(caps.MaxSendSGE, caps.MaxInlineData))
			checkRing(t, "receive queue", xq.rq, recvWQENeed(caps.MaxRecvSGE))
			inl := make([]provider.SGE, 0, 1)
			if caps.MaxInlineData > 0 {
				inl = append(inl, provider.SGE{Addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), Length: caps.MaxInlineData})
			}
			for _, wr := range []*provider.SendWR{
				{Opcode: provider.WRSend, SGL: sgl(caps.MaxSendSGE)},
				{Opcode: provider.WRRDMAWrite, SGL: sgl(caps.MaxSendSGE), RemoteAddr: 8, RKey: 1},
				{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: inl},
			} {
				xq.postOneSend(wr) // a full queue is an error, not a failure
			}
			p.postRecvRing(xq.rq, caps.MaxRecvWR, caps.MaxRecvSGE, &provider.RecvWR{SGL: sgl(caps.MaxRecvSGE)})
		case rxeKindSRQ:
			resp := abi.RXECreateSRQResp{MI: mi, SRQNum: 7}
			ps := &provider.SRQ{MaxWR: mask, MaxSGE: caps.MaxRecvSGE}
			q, err := p.NewSRQ(ps, provider.DriverReq{}, abi.Bytes(&resp))
			if err != nil {
				return
			}
			sq := q.(*srq)
			defer sq.Unmap()
			checkRing(t, "SRQ", sq.ring, recvWQENeed(ps.MaxSGE))
			p.postRecvRing(sq.ring, ps.MaxWR, ps.MaxSGE, &provider.RecvWR{SGL: sgl(ps.MaxSGE)})
		}
	})
}
