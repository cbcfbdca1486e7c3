package uverbs_test

import (
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// Regression tests of defects found by outside testing (docs/reliability.md,
// "Defects fixed"): each failed before its fix.

// TestSizesInRange: sizes and sums past their real range fail before any
// kernel call instead of being cut to 32 bits.
func TestSizesInRange(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	attr, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1<<32 + 2, math.MaxInt, attr.MaxCQE + 1} {
		cq, err := a.ctx.CreateCQ(uverbs.CQConfig{Size: size})
		if err == nil {
			t.Errorf("CreateCQ(Size %d) made a CQ of %d", size, cq.Size())
			cq.Close()
		} else if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "Size") {
			t.Errorf("CreateCQ(Size %d) = %v, want EINVAL naming Size", size, err)
		}
	}
	cq := newCQ(t, a.ctx, uverbs.CQConfig{Size: 4})
	for _, size := range []int{1<<32 + 4, attr.MaxCQE + 1} {
		before := cq.Size()
		if err := cq.Resize(size); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "size") {
			t.Errorf("Resize(%d) = %v (size now %d), want EINVAL naming the size", size, err, cq.Size())
		} else if cq.Size() != before {
			t.Errorf("a refused Resize changed the size from %d to %d", before, cq.Size())
		}
	}

	// Two 2 GiB entries add up to 2^32 bytes, which a work request's
	// 32-bit length cannot hold.
	big := []uverbs.SGE{{Addr: a.mr.Addr(), Length: 1 << 31, LKey: a.mr.LKey()}, {Addr: a.mr.Addr(), Length: 1 << 31, LKey: a.mr.LKey()}}
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: big}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostSend of 2 x 2 GiB = %v, want EINVAL", err)
	}
	if err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: big,
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RDMA WRITE of 2 x 2 GiB = %v, want EINVAL", err)
	}
	if err := a.qp.PostRecv(&uverbs.RecvWR{WRID: 2, SGL: big}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostRecv of 2 x 2 GiB = %v, want EINVAL", err)
	}
	if onKernel612() {
		err := a.qp.PostSend(&uverbs.SendWR{WRID: 3, Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled,
			RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), FlushType: uverbs.FlushGlobal, FlushLevel: uverbs.FlushRange, FlushLength: 1<<32 + 8})
		if iwarp() { // siw has no FLUSH at all
			wantNotSupported(t, err)
		} else if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("FLUSH of 4 GiB + 8 = %v, want EINVAL", err)
		}
	}
	noMoreWCs(t, a.cq, "refused requests")

	// Limits the device reports are checked before the kernel is asked,
	// with errors that name the field.
	for _, tc := range []struct {
		name string
		cp   uverbs.QPCap
	}{
		{"MaxSendWR", uverbs.QPCap{MaxSendWR: uint32(attr.MaxQPWR) + 1, MaxRecvWR: 1}},
		{"MaxRecvWR", uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(attr.MaxQPWR) + 1}},
		{"MaxSendSGE", uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: uint32(attr.MaxSGE) + 1}},
		{"MaxRecvSGE", uverbs.QPCap{MaxRecvWR: 1, MaxRecvSGE: uint32(attr.MaxSGE) + 1}},
		{"MaxSendWR", uverbs.QPCap{MaxSendWR: math.MaxUint32, MaxRecvWR: 1}},
	} {
		qp, err := a.pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: a.cq, RecvCQ: a.cq, Cap: tc.cp})
		if err == nil {
			qp.Close()
			t.Errorf("CreateQP(%+v) succeeded", tc.cp)
		} else if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("CreateQP(%+v) = %v, want EINVAL naming %s", tc.cp, err, tc.name)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  uverbs.SRQConfig
	}{
		{"MaxWR", uverbs.SRQConfig{MaxWR: uint32(attr.MaxSRQWR) + 1, MaxSGE: 1}},
		{"MaxWR", uverbs.SRQConfig{MaxWR: math.MaxUint32, MaxSGE: 1}},
		{"MaxSGE", uverbs.SRQConfig{MaxWR: 1, MaxSGE: uint32(attr.MaxSRQSGE) + 1}},
		{"Limit", uverbs.SRQConfig{MaxWR: 4, MaxSGE: 1, Limit: 5}},
	} {
		srq, err := a.pd.CreateSRQ(tc.cfg)
		if err == nil {
			srq.Close()
			t.Errorf("CreateSRQ(%+v) succeeded", tc.cfg)
		} else if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("CreateSRQ(%+v) = %v, want EINVAL naming %s", tc.cfg, err, tc.name)
		}
	}
	srq, err := a.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if err := srq.Modify(&uverbs.SRQAttr{MaxWR: uint32(attr.MaxSRQWR) + 1}, uverbs.SRQMaxWR); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "MaxWR") {
		t.Errorf("SRQ resize past the device's limit = %v, want EINVAL naming MaxWR", err)
	}
}
