package mlx5

import (
	"bytes"
	"errors"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// smallSQ is a 4-block SQ whose WQEs may take 2 blocks.
func smallSQ(t *testing.T, typ QPType, w Writer, reg []byte) *SQ {
	t.Helper()
	if reg == nil {
		reg = make([]byte, 512)
	}
	bf, err := NewBlueFlame(reg, true, w)
	if err != nil {
		t.Fatal(err)
	}
	s := SQSizing{WQESize: 128, WQECnt: 4, MaxPost: 2, MaxGS: 6, MaxInline: 128 - 32 - 4, Bytes: 256}
	if typ == UD {
		s.MaxGS, s.MaxInline = 4, 128-64-4
	}
	q, err := NewSQ(SQConfig{Buf: make([]byte, 256), Sizing: s, QPN: 0x42, Type: typ, DBRec: make([]byte, 8), BlueFlame: bf, Writer: w})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// skip posts n one-block NOPs and retires them, moving the counter.
func skip(t *testing.T, q *SQ, n int) {
	t.Helper()
	for range n {
		must(t, q.Begin(OpNOP, CtrlCQUpdate, 0))
		must(t, q.Finish(0))
		q.Complete(uint16(q.curPost - 1))
	}
	q.Ring()
	clear(q.buf)
}

// TestSQWrapData: a WQE starting in the last block continues at the
// start of the ring (qp.c: dpseg == qend -> mlx5_get_send_wqe(qp, 0)).
func TestSQWrapData(t *testing.T) {
	q := smallSQ(t, RC, plainWriter{}, nil)
	skip(t, q, 3)
	must(t, q.Begin(OpSend, CtrlCQUpdate, 0))
	for i := range 6 {
		must(t, q.Data(uint64(0x1000*(i+1)), uint32(i+1), 7))
	}
	must(t, q.Finish(5))
	if q.Counter() != 5 {
		t.Errorf("counter %d after a 2-block WQE at 3, want 5", q.Counter())
	}
	want := make([]byte, 16)
	PutCtrl(want, OpSend, 0, 3, 0x42, 7, CtrlCQUpdate, 0)
	if !bytes.Equal(q.buf[192:208], want) {
		t.Errorf("ctrl %x, want %x", q.buf[192:208], want)
	}
	for i := range 6 {
		off := 208 + 16*i
		if off >= 256 {
			off -= 256
		}
		PutData(want, uint32(i+1), 7, uint64(0x1000*(i+1)))
		if !bytes.Equal(q.buf[off:off+16], want) {
			t.Errorf("data segment %d at %d: %x, want %x", i, off, q.buf[off:off+16], want)
		}
	}
}

// TestSQWrapInline: inline data running past the end continues at the
// start (qp.c set_data_inl_seg).
func TestSQWrapInline(t *testing.T) {
	q := smallSQ(t, RC, plainWriter{}, nil)
	skip(t, q, 3)
	msg := make([]byte, 92)
	for i := range msg {
		msg[i] = byte(i + 1)
	}
	must(t, q.Begin(OpSend, 0, 0))
	must(t, q.Inline(msg[:30]))
	must(t, q.Inline(msg[30:]))
	must(t, q.Finish(1))
	// ctrl + align(4+92, 16)/16 = 1 + 6 units
	if ds := q.buf[192+7] & 0x3f; ds != 7 {
		t.Errorf("ds %d, want 7", ds)
	}
	if h := be.Uint32(q.buf[208:]); h != 92|InlineSeg {
		t.Errorf("inline header %#x", h)
	}
	got := append(append([]byte(nil), q.buf[212:256]...), q.buf[:48]...)
	if !bytes.Equal(got, msg) {
		t.Errorf("inline data across the wrap:\n got %x\nwant %x", got, msg)
	}
}

// TestSQRejects: bad work requests fail before anything is posted.
func TestSQRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		typ  QPType
		f    func(q *SQ) error
	}{
		{"read on UC", UC, func(q *SQ) error { return q.Begin(OpRDMARead, 0, 0) }},
		{"write on UD", UD, func(q *SQ) error { return q.Begin(OpRDMAWrite, 0, 0) }},
		{"unknown opcode", RC, func(q *SQ) error { return q.Begin(0x25, 0, 0) }},
		{"write without raddr", RC, func(q *SQ) error {
			must(t, q.Begin(OpRDMAWrite, 0, 0))
			return q.Finish(1)
		}},
		{"UD without datagram", UD, func(q *SQ) error {
			must(t, q.Begin(OpSend, 0, 0))
			return q.Finish(1)
		}},
		{"too many SGEs", RC, func(q *SQ) error {
			must(t, q.Begin(OpSend, 0, 0))
			for range 6 {
				must(t, q.Data(1, 1, 1))
			}
			return q.Data(1, 1, 1)
		}},
		{"inline too long", RC, func(q *SQ) error {
			must(t, q.Begin(OpSend, 0, 0))
			must(t, q.Inline(make([]byte, 90)))
			return q.Inline(make([]byte, 3))
		}},
		{"inline after data", RC, func(q *SQ) error {
			must(t, q.Begin(OpSend, 0, 0))
			must(t, q.Data(1, 1, 1))
			return q.Inline([]byte{1})
		}},
		{"atomic without data", RC, func(q *SQ) error {
			must(t, q.Begin(OpAtomicFA, 0, 0))
			must(t, q.RemoteAddr(8, 1))
			must(t, q.Atomic(1, 0))
			return q.Finish(1)
		}},
		{"segment without Begin", RC, func(q *SQ) error { return q.Data(1, 1, 1) }},
		{"raddr on send", RC, func(q *SQ) error {
			must(t, q.Begin(OpSend, 0, 0))
			return q.RemoteAddr(1, 1)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := smallSQ(t, tt.typ, plainWriter{}, nil)
			if err := tt.f(q); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			q.Ring()
			if q.Counter() != 0 || q.Outstanding() != 0 || be.Uint32(q.dbrec[SndDBR:]) != 0 {
				t.Errorf("a rejected work request was posted: counter %d", q.Counter())
			}
		})
	}
}

// TestDeviceWriter rings through the real mmio stores on ordinary
// memory: an inline send goes by BlueFlame to the register's first half,
// the next by the 8-byte doorbell to the second.
func TestDeviceWriter(t *testing.T) {
	mem := make([]byte, 512+64)
	var reg []byte
	for i := range 64 { // find a 64-byte aligned register
		if (Device{}).Copy64(mem[i:], new([64]byte)) {
			reg = mem[i : i+512]
			break
		}
	}
	if reg == nil {
		t.Fatal("no 64-byte aligned offset in 64 bytes")
	}
	q := smallSQ(t, RC, Device{}, reg)
	must(t, q.Begin(OpSend, CtrlCQUpdate, 0))
	must(t, q.Inline([]byte("hello, world!")))
	must(t, q.Finish(1))
	q.Ring()
	if !bytes.Equal(reg[:64], q.buf[:64]) {
		t.Errorf("BlueFlame half 0 %x, want the WQE %x", reg[:64], q.buf[:64])
	}
	if got := be.Uint32(q.dbrec[SndDBR:]); got != 1 {
		t.Errorf("doorbell record %d, want 1", got)
	}
	must(t, q.Begin(OpSend, CtrlCQUpdate, 0))
	must(t, q.Data(0x1000, 8, 3))
	must(t, q.Finish(2))
	q.Ring()
	if !bytes.Equal(reg[256:264], q.buf[64:72]) || !bytes.Equal(reg[264:320], make([]byte, 56)) {
		t.Errorf("doorbell at half 1: %x, want the ctrl's first 8 bytes %x", reg[256:320], q.buf[64:72])
	}
	if got := be.Uint32(q.dbrec[SndDBR:]); got != 2 {
		t.Errorf("doorbell record %d, want 2", got)
	}
}

// TestNoAllocations: post and poll allocate nothing.
func TestNoAllocations(t *testing.T) {
	q := smallSQ(t, RC, plainWriter{}, nil)
	payload := []byte("0123456789")
	s, _ := CQSize(3, 64, 4096)
	buf := make([]byte, s.Bytes)
	InitCQBuffer(buf, s)
	cq, err := NewCQ(CQConfig{Buf: buf, Sizing: s, CQN: 1, DBRec: make([]byte, 8), Writer: plainWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	var c CQE
	n := testing.AllocsPerRun(1000, func() {
		_ = q.Begin(OpSend, CtrlCQUpdate, 0)
		_ = q.Inline(payload)
		_ = q.Finish(1)
		q.Ring()
		// the completion, as the device would write it
		slot := cq.cqe64(cq.ci)
		clear(slot)
		be.PutUint32(slot[56:], OpSend<<24|0x42)
		be.PutUint16(slot[60:], uint16(q.curPost-1))
		slot[63] = CQEReq<<4 | uint8(cq.ci>>2&1)
		if got, ok := cq.Poll(&c); got && ok {
			q.Complete(c.WQECounter)
		}
		cq.UpdateCI()
	})
	if n != 0 {
		t.Errorf("%v allocations per post and poll", n)
	}
	if q.Outstanding() != 0 {
		t.Errorf("%d outstanding: the loop did not complete its work requests", q.Outstanding())
	}
}

// TestNewSQRejectsSizing: a sizing whose largest WQE would not fit
// WQESize (so MaxPost of them could overrun the ring) is refused.
func TestNewSQRejectsSizing(t *testing.T) {
	bf, _ := NewBlueFlame(make([]byte, 512), true, plainWriter{})
	for _, s := range []SQSizing{
		{WQESize: 128, WQECnt: 4, MaxPost: 2, MaxGS: 7, MaxInline: 0, Bytes: 256},
		{WQESize: 128, WQECnt: 4, MaxPost: 2, MaxGS: 1, MaxInline: 93, Bytes: 256},
		{WQESize: 128, WQECnt: 4, MaxPost: 3, MaxGS: 1, MaxInline: 0, Bytes: 256},
		{WQESize: 128, WQECnt: 3, MaxPost: 1, MaxGS: 1, MaxInline: 0, Bytes: 192},
	} {
		if _, err := NewSQ(SQConfig{Buf: make([]byte, 256), Sizing: s, Type: RC, DBRec: make([]byte, 8), BlueFlame: bf, Writer: plainWriter{}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewSQ(%+v) = %v, want ErrInvalid", s, err)
		}
	}
}

// TestInlineOneRing: the one-entry inline post from registered memory
// (putInlineOneRing: RecordInlineCopy64 or 128) leaves the ring, the
// doorbell record and the BlueFlame register as the general builder
// (Begin, RemoteAddr, Inline, Finish) and Ring leave them: on an aligned
// register, where the fused call rings, and on one that is not 64-byte
// aligned, where it refuses and inlineRefused copies the data and calls
// Ring; and from memory the table does not cover (putInline).
func TestInlineOneRing(t *testing.T) {
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ")
	addr := uint64(sys.PointerTo(data))
	spans := new(provider.Spans)
	spans.Add(0x77, addr, uint64(len(data)))
	for _, tt := range []struct {
		name   string
		op     provider.WROpcode
		n      uint32
		key    uint32
		misreg int // the register's distance from 64-byte alignment
	}{
		{"send 13", provider.WRSend, 13, 0x77, 0},
		{"send 44 (a full block)", provider.WRSend, 44, 0x77, 0},
		{"send with imm 1", provider.WRSendWithImm, 1, 0x77, 0},
		{"write 32 (two blocks)", provider.WRRDMAWrite, 32, 0x77, 0},
		{"send 13, register unaligned", provider.WRSend, 13, 0x77, 8},
		{"write 32, register unaligned", provider.WRRDMAWrite, 32, 0x77, 8},
		{"send 13, key of no MR", provider.WRSend, 13, 0x78, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newSQ := func() (*SQ, []byte) {
				mem := make([]byte, 512+128)
				i := 0
				for (Device{}).Copy64(mem[i:], new([64]byte)) == false {
					i++
				}
				reg := mem[i+tt.misreg : i+tt.misreg+512]
				q := smallSQ(t, RC, Device{}, reg)
				q.spans = spans
				return q, reg
			}
			wr := provider.SendWR{WRID: 9, Opcode: tt.op, Flags: provider.SendInline | provider.SendSignaled, Imm: 0x1234,
				RemoteAddr: 0xabc000, RKey: 0x55, SGL: []provider.SGE{{Addr: addr + 2, Length: tt.n, LKey: tt.key}}}
			p := &plainOps[tt.op]
			for round := range 3 { // both BlueFlame halves, and back
				q, reg := newSQ()
				ref, refReg := newSQ()
				for range round {
					skip(t, q, 1)
					skip(t, ref, 1)
				}
				cur := q.curPost
				done, err := q.putInlineOneRing(p, &wr, &wr.SGL[0])
				if !done || err != nil {
					t.Fatalf("putInlineOneRing: %v, %v", done, err)
				}
				must(t, ref.Begin(p.op, sendFM(wr.Flags), wr.Imm&p.immMask))
				if p.raddr {
					must(t, ref.RemoteAddr(wr.RemoteAddr, wr.RKey))
				}
				must(t, ref.Inline(data[2:2+tt.n]))
				must(t, ref.Finish(wr.WRID))
				ref.Ring()
				if !bytes.Equal(q.buf, ref.buf) {
					t.Errorf("round %d: the ring\n%x, want\n%x", round, q.buf, ref.buf)
				}
				if !bytes.Equal(q.dbrec[:], ref.dbrec[:]) || !bytes.Equal(reg, refReg) || q.bf.offset != ref.bf.offset {
					t.Errorf("round %d: doorbell record %x, register %x (half at %d), want %x, %x (%d)", round,
						q.dbrec, reg[:160], q.bf.offset, ref.dbrec, refReg[:160], ref.bf.offset)
				}
				if q.curPost != ref.curPost || q.head != ref.head || q.pending != 0 || ref.pending != 0 {
					t.Errorf("round %d: counters %d/%d pending %d, want %d/%d pending %d", round, q.curPost, q.head, q.pending, ref.curPost, ref.head, ref.pending)
				}
				if id := q.Complete(uint16(cur)); id != wr.WRID { // the WQE's first block

					t.Errorf("round %d: the completion's id %d, want %d", round, id, wr.WRID)
				}
			}
		})
	}
}
