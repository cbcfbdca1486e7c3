package rdmacm_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// pollOne busy-polls cq for one completion (no wall clock: the test's
// context bounds the run through the VM's timeout).
func pollOne(t testing.TB, cq *uverbs.CQ) uverbs.WorkCompletion {
	t.Helper()
	var wc [1]uverbs.WorkCompletion
	for {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
	}
}

// TestDataPath drives a connected RC QP pair through uverbs on the
// fabric under test (on siw: the provider's rings, the VALID flags and
// the conditional doorbell): a post list of sends of different shapes
// (scatter/gather, inline, no entry at all) into a post list of
// receives, each completion checked; RDMA WRITE and READ with the bytes
// compared; 0 allocations per post and poll; on siw, the operations
// iWARP has not refused before the queue, and a post after ERR refused.
func TestDataPath(t *testing.T) {
	f := testenv.NeedFabric(t)
	ctx := testContext(t)
	c, s := connectedPairWith(t, ctx, uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	const size = 4096
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	cbuf, sbuf := make([]byte, size), make([]byte, size)
	cmr, err := c.PD().RegMR(cbuf, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmr.Close() })
	smr, err := s.PD().RegMR(sbuf, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smr.Close() })
	cq, _ := c.CQs()
	_, srq := s.CQs()

	// Three receives in one post, the last with no entry.
	sge := func(mr *uverbs.MR, off, n int) uverbs.SGE {
		return uverbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
	}
	r3 := &uverbs.RecvWR{WRID: 23}
	r2 := &uverbs.RecvWR{WRID: 22, SGL: []uverbs.SGE{sge(smr, 100, 64)}, Next: r3}
	r1 := &uverbs.RecvWR{WRID: 21, SGL: []uverbs.SGE{sge(smr, 0, 40), sge(smr, 200, 60)}, Next: r2}
	if err := s.QP().PostRecv(r1); err != nil {
		t.Fatal(err)
	}
	// Three sends in one post: 70 bytes from two entries, 16 inline,
	// none.
	copy(cbuf, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ~!@#$%^&*")
	copy(cbuf[1000:], "inline sixteen!!")
	w3 := &uverbs.SendWR{WRID: 13, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	w2 := &uverbs.SendWR{WRID: 12, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{sge(cmr, 1000, 16)}, Next: w3}
	w1 := &uverbs.SendWR{WRID: 11, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge(cmr, 0, 30), sge(cmr, 30, 40)}, Next: w2}
	if err := c.QP().PostSend(w1); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		wrid uint64
		n    uint32
	}{{11, 70}, {12, 16}, {13, 0}} {
		if wc := pollOne(t, cq); wc.Status != uverbs.WCSuccess || wc.WRID != want.wrid || wc.Opcode != uverbs.WCSend || wc.QPNum != c.QP().Num() {
			t.Errorf("send completion %d: %+v, want WRID %d SEND success on QP %d", i, wc, want.wrid, c.QP().Num())
		}
	}
	for i, want := range []struct {
		wrid uint64
		n    uint32
	}{{21, 70}, {22, 16}, {23, 0}} {
		wc := pollOne(t, srq)
		if wc.Status != uverbs.WCSuccess || wc.WRID != want.wrid || wc.Opcode != uverbs.WCRecv || wc.ByteLen != want.n || wc.QPNum != s.QP().Num() {
			t.Errorf("receive completion %d: %+v, want WRID %d RECV of %d bytes on QP %d", i, wc, want.wrid, want.n, s.QP().Num())
		}
	}
	if got := string(sbuf[:40]) + string(sbuf[200:230]); got != string(cbuf[:70]) {
		t.Errorf("scattered receive %q, want %q", got, cbuf[:70])
	}
	if got := string(sbuf[100:116]); got != "inline sixteen!!" {
		t.Errorf("inline receive %q", got)
	}

	// RDMA WRITE of 3000 bytes, then READ them back elsewhere.
	for i := range 3000 {
		cbuf[i] = byte(i*7 + 1)
	}
	remote := rdmacm.Remote{Addr: smr.Addr() + 1024, RKey: smr.RKey()}
	write := &uverbs.SendWR{WRID: 31, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge(cmr, 0, 3000)}, RemoteAddr: remote.Addr, RKey: remote.RKey}
	if err := c.QP().PostSend(write); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cq); wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMAWrite {
		t.Fatalf("write completion %+v", wc)
	}
	read := &uverbs.SendWR{WRID: 32, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge(cmr, 3072, 1000)}, RemoteAddr: remote.Addr + 2000, RKey: remote.RKey}
	if err := c.QP().PostSend(read); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cq); wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMARead || wc.ByteLen != 1000 {
		t.Fatalf("read completion %+v", wc)
	}
	if !bytes.Equal(sbuf[1024:4024], cbuf[:3000]) || !bytes.Equal(cbuf[3072:4072], cbuf[2000:3000]) {
		t.Error("RDMA WRITE or READ moved other bytes than written")
	}

	// The fast path allocates nothing: a post and the polls until its
	// completion.
	small := &uverbs.SendWR{WRID: 41, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge(cmr, 0, 64)}, RemoteAddr: remote.Addr, RKey: remote.RKey}
	var wcs [1]uverbs.WorkCompletion
	allocs := testing.AllocsPerRun(200, func() {
		if err := c.QP().PostSend(small); err != nil {
			t.Fatal(err)
		}
		for {
			if n, _ := cq.Poll(wcs[:]); n == 1 {
				break
			}
		}
	})
	if allocs != 0 || wcs[0].Status != uverbs.WCSuccess {
		t.Errorf("%v allocations per post and poll on %s (last completion %+v), want 0", allocs, f.Name, wcs[0])
	}

	if !f.IWARP {
		return
	}
	// What iWARP has not: refused before the queue, naming it.
	for _, op := range []uverbs.WROpcode{uverbs.WRSendWithImm, uverbs.WRRDMAWriteWithImm, uverbs.WRAtomicFetchAndAdd,
		uverbs.WRAtomicCmpAndSwp, uverbs.WRLocalInv} {
		wr := &uverbs.SendWR{WRID: 51, Opcode: op, SGL: []uverbs.SGE{sge(cmr, 0, 8)}, RemoteAddr: remote.Addr, RKey: remote.RKey}
		if err := c.QP().PostSend(wr); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("%v on siw = %v, want ErrNotSupported", op, err)
		}
	}
	big := &uverbs.SendWR{WRID: 52, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{sge(cmr, 0, 81)}}
	if err := c.QP().PostSend(big); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("81 bytes inline on siw = %v, want EINVAL", err)
	}
	// Nothing of those reached the queue: the next send is the next
	// completion.
	if err := c.QP().PostSend(small); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, cq); wc.WRID != 41 || wc.Status != uverbs.WCSuccess {
		t.Errorf("after the refusals: %+v, want WRID 41", wc)
	}
	// A QP in ERR takes no more work requests on siw (they would never
	// complete).
	if err := c.QP().Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := c.QP().PostRecv(&uverbs.RecvWR{WRID: 61}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostRecv in ERR on siw = %v, want EINVAL", err)
	}
	if err := c.QP().PostSend(small); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostSend in ERR on siw = %v, want EINVAL", err)
	}
}
