package uverbs_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// Regression tests of defects found by outside testing (docs/reliability.md,
// "Defects fixed"): each failed before its fix.

// TestInlineBadAddress: inline data at memory the process cannot read is
// an error, not a crash.
func TestInlineBadAddress(t *testing.T) {
	a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
	// An address that was a Buffer's: registered to learn it, then unmapped.
	gone, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	gmr, err := a.pd.RegBuffer(gone, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	unmapped := gmr.Addr()
	if err := gmr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sge  uverbs.SGE
	}{
		{"zero", uverbs.SGE{Addr: 0, Length: 8}},
		{"first page", uverbs.SGE{Addr: 16, Length: 8}},
		{"wraps", uverbs.SGE{Addr: math.MaxUint64 - 3, Length: 8}},
		{"unmapped", uverbs.SGE{Addr: unmapped, Length: 8}},
	} {
		err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendInline | uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(0, 4), tc.sge}})
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "inline") {
			t.Errorf("%s: inline SGE %+v: %v, want EINVAL about inline data", tc.name, tc.sge, err)
		}
	}
	noMoreWCs(t, a.cq, "refused inline sends")
	// The QP still works.
	copy(a.buf, "ok")
	mustPostSend(t, a, &uverbs.SendWR{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendInline | uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 2)}, RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
	checkWCs(t, "inline write after the refusals", []uverbs.WorkCompletion{sendWC(a.qp, 2, uverbs.WCRDMAWrite, 2)}, pollWCs(t, a.cq, 1))
	wantWritten(t, "remote buffer", []byte("ok"), b.buf[100:102])
}

// TestNilArguments: nil pointers and nil contexts passed to live objects
// are errors naming the argument.
func TestNilArguments(t *testing.T) {
	// A connected UD QP on RoCE; on iWARP (RC only, connected only by
	// its CM) an RC QP that stays in RESET: every row fails before the
	// kernel, whatever the QP's state.
	var a *end
	iwarp := testenv.CurrentFabric().IWARP
	if iwarp {
		a = newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC, channel: true})
		standalone(t, a)
	} else {
		a, _ = newPair(t, pairOpts{typ: uverbs.QPTypeUD, channel: true})
	}
	srq, err := a.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	var nilCtx context.Context
	grh := make([]byte, uverbs.GRHLen)
	for _, tc := range []struct {
		name string
		call func() error
		arg  string
	}{
		{"QP.PostSend(nil)", func() error { return a.qp.PostSend(nil) }, "work request"},
		{"QP.PostRecv(nil)", func() error { return a.qp.PostRecv(nil) }, "work request"},
		{"SRQ.PostRecv(nil)", func() error { return srq.PostRecv(nil) }, "work request"},
		{"QP.PostSend(chain with a UD send and no AH)", func() error {
			return a.qp.PostSend(&uverbs.SendWR{Opcode: uverbs.WRSend})
		}, "AH"},
		{"QP.Modify(nil)", func() error { return a.qp.Modify(nil, uverbs.QPAttrState) }, "attributes"},
		{"CompChannel.Wait(nil)", func() error { _, err := a.ch.Wait(nilCtx); return err }, "context"},
		{"Context.AsyncEvent(nil)", func() error { _, err := a.ctx.AsyncEvent(nilCtx); return err }, "context"},
		{"Context.InitAHFromWC(nil WC)", func() error { _, err := a.ctx.InitAHFromWC(1, nil, grh); return err }, "work completion"},
		{"PD.CreateAHFromWC(nil WC)", func() error { _, err := a.pd.CreateAHFromWC(1, nil, grh); return err }, "work completion"},
		{"PD.RegBuffer(nil)", func() error { _, err := a.pd.RegBuffer(nil, uverbs.AccessLocalWrite); return err }, "Buffer"},
		{"MR.Rereg(ReregPD, nil)", func() error { return a.mr.Rereg(uverbs.ReregPD, nil, nil, 0) }, "PD"},
		{"CreateQP(nil CQs)", func() error {
			_, err := a.pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 1}})
			return err
		}, "CQ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if iwarp && strings.Contains(tc.name, "UD send") {
				testenv.NotIWARP(t, "a UD send's AH: iWARP has RC QPs only")
			}
			err := tc.call()
			if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), tc.arg) {
				t.Errorf("= %v, want EINVAL naming %s", err, tc.arg)
			}
		})
	}
}
