package siw

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// TestLayout checks the sizes and offsets the provider writes by hand
// against internal/abi's layouts (themselves checked against
// rdma/siw-abi.h).
func TestLayout(t *testing.T) {
	var sqe abi.SIWSQE
	var cqe abi.SIWCQE
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"sizeof(siw_sqe)", sqeSize, unsafe.Sizeof(abi.SIWSQE{})},
		{"sizeof(siw_rqe)", rqeSize, unsafe.Sizeof(abi.SIWRQE{})},
		{"sizeof(siw_cqe)", cqeSize, unsafe.Sizeof(abi.SIWCQE{})},
		{"sizeof(siw_cq_ctrl)", ctrlSize, unsafe.Sizeof(abi.SIWCQCtrl{})},
		{"offsetof(siw_sqe, flags)", unsafe.Offsetof(head{}.Word), unsafe.Offsetof(sqe.Flags)},
		{"offsetof(siw_sqe, num_sge)", unsafe.Offsetof(head{}.Word) + 2, unsafe.Offsetof(sqe.NumSGE)},
		{"offsetof(siw_sqe, opcode)", unsafe.Offsetof(head{}.Word) + 3, unsafe.Offsetof(sqe.Opcode)},
		{"offsetof(siw_rqe, flags)", unsafe.Offsetof(head{}.Word), unsafe.Offsetof(abi.SIWRQE{}.Flags)},
		{"offsetof(siw_cqe, flags)", unsafe.Offsetof(head{}.Word), unsafe.Offsetof(cqe.Flags)},
		{"offsetof(siw_sqe, sge[1])", 40, unsafe.Offsetof(sqe.SGE) + unsafe.Sizeof(abi.SIWSGE{})},
	} {
		if c.got != c.want {
			t.Errorf("%s: the provider uses %d, abi has %d", c.what, c.got, c.want)
		}
	}
	// The inline area is the bytes of sge[1..5] of the SQE itself.
	e := &abi.SIWSQE{}
	a := inlineArea(e)
	a[0], a[len(a)-1] = 0xaa, 0xbb
	sg := e.SGE.SGE()
	if sg[1].LAddr&0xff != 0xaa || sg[5].LKey>>24 != 0xbb || len(a) != 80 {
		t.Errorf("inline area of %d bytes does not cover sge[1..5]: %+v", len(a), sg)
	}
}

// cqOnMemory is a CQ of n entries on plain memory, as the kernel maps
// one, and the memory.
func cqOnMemory(t testing.TB, ctx *provider.Context, n uint32) (*CQ, []byte) {
	mem := make([]byte, int(n)*cqeSize+ctrlSize)
	q, err := newCQ(New(ctx), mem, n)
	if err != nil {
		t.Fatal(err)
	}
	return q, mem
}

// TestPoll: completions are taken in order while VALID, their flags word
// cleared, every field of the WC written; an error status is reported to
// the context; an unknown opcode or status reads as a general error.
func TestPoll(t *testing.T) {
	ctx := provider.NewContext(nil, 0)
	qps := map[uint32]*provider.QP{}
	for _, n := range []uint32{3, 5, 6} {
		qps[n] = &provider.QP{Num: n}
		ctx.AddQP(qps[n])
	}
	q, _ := cqOnMemory(t, ctx, 4)
	put := func(i uint32, e abi.SIWCQE) {
		s := q.ring.Slot(i)
		*s = e
		s.Flags = valid
	}
	qp := func(n uint64) (u abi.SIWCQEBaseQP) { *u.QPID() = n; return u }
	put(0, abi.SIWCQE{ID: 7, Opcode: abi.SIW_OP_RECEIVE, Bytes: 70, BaseQP: qp(3)})
	put(1, abi.SIWCQE{ID: 8, Opcode: abi.SIW_OP_READ, Status: abi.SIW_WC_REM_ACCESS_ERR, BaseQP: qp(5)})
	put(2, abi.SIWCQE{ID: 9, Opcode: 200, Status: 99, BaseQP: qp(6)})
	wc := make([]provider.WC, 8)
	for i := range wc {
		wc[i] = provider.WC{Imm: 1, SrcQP: 1, Flags: 1, PortNum: 1, VendorErr: 1} // must be overwritten
	}
	if n := q.Poll(wc); n != 3 {
		t.Fatalf("Poll = %d, want 3", n)
	}
	want := []provider.WC{
		{WRID: 7, Opcode: 128, ByteLen: 70, QPNum: 3},
		{WRID: 8, Opcode: 2, Status: 10, QPNum: 5},
		{WRID: 9, Opcode: 0, Status: wcGeneralErr, QPNum: 6},
	}
	for i := range want {
		if wc[i] != want[i] {
			t.Errorf("wc[%d] = %+v, want %+v", i, wc[i], want[i])
		}
		if f := *word(q.ring.Slot(uint32(i))); f != 0 {
			t.Errorf("entry %d's flags word %#x after the poll, want 0", i, f)
		}
	}
	for n, qp := range qps {
		if got, want := qp.State.Load()&provider.ErrSeen != 0, n != 3; got != want {
			t.Errorf("QP %d marked as maybe in ERR: %v, want %v", n, got, want)
		}
	}
	if n := q.Poll(wc); n != 0 {
		t.Errorf("Poll of an empty CQ = %d", n)
	}
	// The ring wraps: entry 3, then 0 again.
	put(3, abi.SIWCQE{ID: 10})
	put(0, abi.SIWCQE{ID: 11})
	if n := q.Poll(wc); n != 2 || wc[0].WRID != 10 || wc[1].WRID != 11 {
		t.Errorf("after the wrap: %d completions %+v", n, wc[:2])
	}
	// Arming stores the notify word.
	q.Arm(true)
	if q.ctrl.Flags != abi.SIW_NOTIFY_SOLICITED {
		t.Errorf("armed for solicited: %#x", q.ctrl.Flags)
	}
	q.Arm(false)
	if q.ctrl.Flags != abi.SIW_NOTIFY_SOLICITED|abi.SIW_NOTIFY_NEXT_COMPLETION {
		t.Errorf("armed for the next: %#x", q.ctrl.Flags)
	}
}

// FuzzPoll feeds CQ memory the kernel could have written, whatever it
// holds: Poll never panics, takes only VALID entries, in order, and
// clears each one it took.
func FuzzPoll(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 4*cqeSize))
	f.Add(make([]byte, 4*cqeSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := provider.NewContext(nil, 0)
		q, mem := cqOnMemory(t, ctx, 4)
		copy(mem[:4*cqeSize], b)
		var valids int
		for i := range uint32(4) {
			if *word(q.ring.Slot(i))&valid == 0 {
				break
			}
			valids++
		}
		wc := make([]provider.WC, 4)
		if n := q.Poll(wc); n != valids {
			t.Fatalf("Poll = %d, want the %d leading VALID entries", n, valids)
		}
		for i := range valids {
			if *word(q.ring.Slot(uint32(i))) != 0 || wc[i].Status >= 22 {
				t.Fatalf("entry %d: flags word left %#x, status %d", i, *word(q.ring.Slot(uint32(i))), wc[i].Status)
			}
		}
	})
}
