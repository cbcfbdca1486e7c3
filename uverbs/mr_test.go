package uverbs

import (
	"errors"
	"fmt"
	"github.com/purerdma/rdma/internal/rdmanl"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// ForceForkMode makes ForkSafety answer m, as if the kernel had said so,
// until the returned function restores the probe. Exported for the
// package's external (VM) tests, which use it to exercise the DONTFORK
// path on kernels that do not need it.
func ForceForkMode(m ForkMode) (restore func()) {
	forkProbe.mu.Lock()
	defer forkProbe.mu.Unlock()
	known, mode := forkProbe.known, forkProbe.mode
	forkProbe.known, forkProbe.mode = true, m
	return func() {
		forkProbe.mu.Lock()
		defer forkProbe.mu.Unlock()
		forkProbe.known, forkProbe.mode = known, mode
	}
}

// fakePD is a PD on a context with no device: enough for every check that
// comes before a kernel call.
func fakePD(coreSupport uint64) *PD {
	c := &Context{dev: Device{Name: "fake0"}, coreSupport: coreSupport}
	return &PD{resource: resource{ctx: c, kind: "PD", handle: 1}}
}

func TestMRAccess(t *testing.T) {
	const optional = abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS
	for _, tc := range []struct {
		name   string
		access Access
		core   uint64
		want   Access
		errSub string // "" for success
	}{
		{name: "none", access: 0, want: 0},
		{name: "local write", access: AccessLocalWrite, want: AccessLocalWrite},
		{name: "remote read only", access: AccessRemoteRead, want: AccessRemoteRead},
		{name: "remote write with local write", access: AccessLocalWrite | AccessRemoteWrite, want: AccessLocalWrite | AccessRemoteWrite},
		{name: "remote atomic with local write", access: AccessLocalWrite | AccessRemoteAtomic, want: AccessLocalWrite | AccessRemoteAtomic},
		{name: "remote write alone", access: AccessRemoteWrite, errSub: "require AccessLocalWrite"},
		{name: "remote atomic alone", access: AccessRemoteAtomic | AccessRemoteRead, errSub: "require AccessLocalWrite"},
		{name: "unknown bit", access: AccessLocalWrite | 1<<12, errSub: "unknown access bits 0x1000"},
		{name: "unknown optional bit", access: 1 << 21, core: optional, errSub: "unknown access bits 0x200000"},
		{name: "relaxed ordering supported", access: AccessLocalWrite | AccessRelaxedOrdering, core: optional, want: AccessLocalWrite | AccessRelaxedOrdering},
		{name: "relaxed ordering dropped", access: AccessLocalWrite | AccessRelaxedOrdering, want: AccessLocalWrite},
		{name: "flush passed through", access: AccessLocalWrite | AccessFlushGlobal | AccessFlushPersistent, want: AccessLocalWrite | AccessFlushGlobal | AccessFlushPersistent},
		{name: "mw bind", access: AccessLocalWrite | AccessMWBind, want: AccessLocalWrite | AccessMWBind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mrAccess("RegMR", tc.access, tc.core)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("mrAccess(%v) = %v, %v; want an error containing %q", tc.access, got, err, tc.errSub)
				}
				if !errors.Is(err, syscall.EINVAL) {
					t.Errorf("error %v does not match EINVAL", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("mrAccess(%v) = %v, %v; want %v", tc.access, got, err, tc.want)
			}
		})
	}
}

// TestRegMRValidation: bad input is refused before any kernel call (the
// fake context has no command fd: a kernel call would panic).
func TestRegMRValidation(t *testing.T) {
	closedPD := fakePD(0)
	closedPD.closed.Store(true)
	closedCtx := fakePD(0)
	closedCtx.ctx.closed.Store(true)
	buf := make([]byte, 64)
	for _, tc := range []struct {
		name   string
		pd     *PD
		buf    []byte
		access Access
		want   error
		errSub string
	}{
		{name: "nil buffer", pd: fakePD(0), buf: nil, want: syscall.EINVAL, errSub: "empty buffer"},
		{name: "empty buffer", pd: fakePD(0), buf: buf[:0], want: syscall.EINVAL, errSub: "empty buffer"},
		{name: "remote write without local write", pd: fakePD(0), buf: buf, access: AccessRemoteWrite, want: syscall.EINVAL, errSub: "AccessLocalWrite"},
		{name: "remote atomic without local write", pd: fakePD(0), buf: buf, access: AccessRemoteAtomic, want: syscall.EINVAL, errSub: "AccessLocalWrite"},
		{name: "unknown access bit", pd: fakePD(0), buf: buf, access: 1 << 30, want: syscall.EINVAL, errSub: "unknown access"},
		{name: "closed PD", pd: closedPD, buf: buf, access: AccessLocalWrite, want: ErrClosed, errSub: "PD"},
		{name: "closed context", pd: closedCtx, buf: buf, access: AccessLocalWrite, want: ErrClosed, errSub: "context"},
		{name: "nil PD", pd: nil, buf: buf, want: syscall.EINVAL, errSub: "nil PD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr, err := tc.pd.RegMR(tc.buf, tc.access)
			if mr != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.errSub) {
				t.Fatalf("RegMR = %v, %v; want an error matching %v containing %q", mr, err, tc.want, tc.errSub)
			}
			if tc.pd != nil && tc.pd.users.Load() != 0 {
				t.Errorf("PD users = %d after a refused RegMR", tc.pd.users.Load())
			}
		})
	}
	if _, err := fakePD(0).RegBuffer(nil, AccessLocalWrite); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("RegBuffer(nil) = %v, want EINVAL", err)
	}
	b, err := AllocBuffer(100)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := fakePD(0).RegBuffer(b, AccessLocalWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("RegBuffer(closed Buffer) = %v, want ErrClosed", err)
	}
}

func TestReregValidation(t *testing.T) {
	pd := fakePD(0)
	other := fakePD(0)
	foreign := fakePD(0) // on another context
	other.ctx = pd.ctx
	buf := make([]byte, 64)
	newMR := func() *MR {
		mr := &MR{pv: provider.MR{LKey: 1, RKey: 2}}
		mr.resource = resource{ctx: pd.ctx, kind: "MR", handle: 3}
		mr.st.Store(&mrState{pd: pd, buf: buf, addr: uint64(sys.PointerTo(buf)), length: 64, access: AccessLocalWrite})
		return mr
	}
	closed := newMR()
	closed.closed.Store(true)
	for _, tc := range []struct {
		name   string
		mr     *MR
		flags  ReregFlags
		pd     *PD
		buf    []byte
		access Access
		want   error
		errSub string
	}{
		{name: "no flags", flags: 0, want: syscall.EINVAL, errSub: "no change"},
		{name: "unknown flag", flags: 1 << 5, want: syscall.EINVAL, errSub: "unknown flags"},
		{name: "translation without buffer", flags: ReregTranslation, want: syscall.EINVAL, errSub: "empty buffer"},
		{name: "buffer without translation", flags: ReregAccess, buf: buf, want: syscall.EINVAL, errSub: "without ReregTranslation"},
		{name: "pd flag without pd", flags: ReregPD, want: syscall.EINVAL, errSub: "nil PD"},
		{name: "pd without pd flag", flags: ReregAccess, pd: other, want: syscall.EINVAL, errSub: "without ReregPD"},
		{name: "access without access flag", flags: ReregPD, pd: other, access: AccessLocalWrite, want: syscall.EINVAL, errSub: "without ReregAccess"},
		{name: "bad access", flags: ReregAccess, access: AccessRemoteWrite, want: syscall.EINVAL, errSub: "AccessLocalWrite"},
		{name: "foreign pd", flags: ReregPD, pd: foreign, errSub: "belongs to device"},
		{name: "closed MR", mr: closed, flags: ReregAccess, access: AccessLocalWrite, want: ErrClosed, errSub: "MR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := tc.mr
			if mr == nil {
				mr = newMR()
			}
			before := *mr.st.Load()
			err := mr.Rereg(tc.flags, tc.pd, tc.buf, tc.access)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.errSub) {
				t.Fatalf("Rereg = %v; want an error matching %v containing %q", err, tc.want, tc.errSub)
			}
			if after := *mr.st.Load(); after.pd != before.pd || after.access != before.access || after.addr != before.addr {
				t.Errorf("a refused Rereg changed the MR: %+v -> %+v", before, after)
			}
			for _, p := range []*PD{pd, other, foreign} {
				if n := p.users.Load(); n != 0 {
					t.Errorf("PD users = %d after a refused Rereg", n)
				}
			}
		})
	}
}

func TestReregFlagsString(t *testing.T) {
	for f, want := range map[ReregFlags]string{
		0:                              "0",
		ReregTranslation:               "CHANGE_TRANSLATION",
		ReregPD | ReregAccess:          "CHANGE_PD|CHANGE_ACCESS",
		ReregTranslation | 1<<4:        "CHANGE_TRANSLATION|0x10",
		ReregTranslation | ReregPD | 4: "CHANGE_TRANSLATION|CHANGE_PD|CHANGE_ACCESS",
	} {
		if got := f.String(); got != want {
			t.Errorf("ReregFlags(%#x).String() = %q, want %q", uint32(f), got, want)
		}
	}
}

func TestMWTypeValidation(t *testing.T) {
	for _, typ := range []MWType{0, 3, 255} {
		if _, err := fakePD(0).AllocMW(typ); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("AllocMW(%v) = %v, want EINVAL", typ, err)
		}
	}
	closed := fakePD(0)
	closed.closed.Store(true)
	if _, err := closed.AllocMW(MWType2); !errors.Is(err, ErrClosed) {
		t.Errorf("AllocMW on a closed PD = %v, want ErrClosed", err)
	}
	if closed.users.Load() != 0 {
		t.Errorf("PD users = %d after a refused AllocMW", closed.users.Load())
	}
	if got := MWType1.String() + " " + MWType2.String() + " " + MWType(7).String(); got != "TYPE_1 TYPE_2 MWType(7)" {
		t.Errorf("MWType names = %q", got)
	}
}

// TestProbeForkMode: only the kernel's answers (including its refusal of
// an unknown request) are definite.
func TestProbeForkMode(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sys          rdmanl.System
		err          error
		want         ForkMode
		wantDefinite bool
	}{
		{name: "unneeded", sys: rdmanl.System{CopyOnFork: true}, want: ForkUnneeded, wantDefinite: true},
		{name: "old kernel", sys: rdmanl.System{}, want: ForkDontFork, wantDefinite: true},
		{name: "request unknown", err: &rdmanl.OpError{Op: "SYS_GET", Err: syscall.EOPNOTSUPP, Kernel: true}, want: ForkDontFork, wantDefinite: true},
		{name: "no rdma netlink", err: &rdmanl.OpError{Op: "socket", Err: syscall.EPROTONOSUPPORT}, want: ForkDontFork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode, definite, _ := probeForkMode(func() (rdmanl.System, error) { return tc.sys, tc.err })
			if mode != tc.want || definite != tc.wantDefinite {
				t.Errorf("probeForkMode = %v, definite %v; want %v, %v", mode, definite, tc.want, tc.wantDefinite)
			}
		})
	}
	if ForkUnneeded.String() != "unneeded" || ForkDontFork.String() != "dontfork" || ForkMode(9).String() != "ForkMode(9)" {
		t.Errorf("ForkMode names: %v %v %v", ForkUnneeded, ForkDontFork, ForkMode(9))
	}
}

// TestForkRanges checks the per-page counting with recorded madvise
// calls: a page is marked when its first registration arrives and
// unmarked when its last one leaves.
func TestForkRanges(t *testing.T) {
	const ps = 4096
	var calls []string
	failAt := uint64(0)
	madvDontFork = func(addr, n uint64) error {
		if failAt != 0 && addr <= failAt && failAt < addr+n {
			return syscall.ENOMEM
		}
		calls = append(calls, fmt.Sprintf("dontfork %d+%d", addr/ps, n/ps))
		return nil
	}
	madvDoFork = func(addr, n uint64) error {
		calls = append(calls, fmt.Sprintf("dofork %d+%d", addr/ps, n/ps))
		return nil
	}
	t.Cleanup(func() { madvDontFork, madvDoFork = sys.DontFork, sys.DoFork })

	var f forkRanges
	step := func(op string, addr, length uint64, want ...string) {
		t.Helper()
		calls = nil
		var err error
		if op == "protect" {
			err = f.protect(addr, length)
		} else {
			err = f.release(addr, length)
		}
		if err != nil {
			t.Fatalf("%s(%d, %d): %v", op, addr, length, err)
		}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("%s(%d, %d) madvise calls (-want +got):\n%s", op, addr, length, diff)
		}
	}
	step("protect", 10*ps+5, 2*ps, "dontfork 10+3")              // pages 10-12
	step("protect", 11*ps, ps, nil...)                           // 11: inside, counted twice
	step("protect", 8*ps, 8*ps, "dontfork 8+2", "dontfork 13+3") // 8-15 around 10-12
	step("release", 10*ps+5, 2*ps, nil...)                       // 10-12 still held by 8-15
	step("release", 8*ps, 8*ps, "dofork 8+3", "dofork 12+4")
	step("release", 11*ps, ps, "dofork 11+1")
	if len(f.spans) != 0 {
		t.Fatalf("spans left: %+v", f.spans)
	}

	// A failing madvise rolls back the pages already marked.
	step("protect", 20*ps, ps, "dontfork 20+1")
	calls = nil
	failAt = 23 * ps
	if err := f.protect(18*ps, 6*ps); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("protect over a failing page = %v, want ENOMEM", err)
	}
	if diff := cmp.Diff([]string{"dontfork 18+2", "dofork 18+2"}, calls); diff != "" {
		t.Errorf("rollback calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]forkSpan{{20 * ps, 21 * ps, 1}}, f.spans, cmp.AllowUnexported(forkSpan{})); diff != "" {
		t.Errorf("spans after a failed protect (-want +got):\n%s", diff)
	}
	failAt = 0
	step("release", 20*ps, ps, "dofork 20+1")
}

func TestAsyncEventDecode(t *testing.T) {
	cq, qp, srq := &CQ{}, &QP{}, &SRQ{}
	objects := map[uint64]any{1: cq, 2: qp, 3: srq}
	lookup := func(h uint64) any { return objects[h] }
	for _, tc := range []struct {
		typ     AsyncEventType
		element uint64
		want    AsyncEvent
		drop    bool
	}{
		{typ: EventPortErr, element: 1, want: AsyncEvent{Type: EventPortErr, Port: 1}},
		{typ: EventPortActive, element: 2, want: AsyncEvent{Type: EventPortActive, Port: 2}},
		{typ: EventGIDChange, element: 1, want: AsyncEvent{Type: EventGIDChange, Port: 1}},
		{typ: EventDeviceFatal, element: 0, want: AsyncEvent{Type: EventDeviceFatal}},
		{typ: EventCQErr, element: 1, want: AsyncEvent{Type: EventCQErr, CQ: cq}},
		{typ: EventQPFatal, element: 2, want: AsyncEvent{Type: EventQPFatal, QP: qp}},
		{typ: EventCommEst, element: 2, want: AsyncEvent{Type: EventCommEst, QP: qp}},
		{typ: EventQPLastWQEReached, element: 2, want: AsyncEvent{Type: EventQPLastWQEReached, QP: qp}},
		{typ: EventSRQLimitReached, element: 3, want: AsyncEvent{Type: EventSRQLimitReached, SRQ: srq}},
		{typ: EventWQFatal, element: 9, want: AsyncEvent{Type: EventWQFatal}},
		{typ: 42, element: 1, want: AsyncEvent{Type: 42, Port: 1}},
		{typ: EventCQErr, element: 9, drop: true},   // closed CQ
		{typ: EventQPFatal, element: 1, drop: true}, // handle of another kind
		{typ: EventSRQErr, element: 2, drop: true},
	} {
		ev, ok := decodeAsyncEvent(abi.AsyncEventDesc{Element: tc.element, EventType: uint32(tc.typ)}, lookup)
		if ok == tc.drop || (ok && ev != tc.want) {
			t.Errorf("decode(%v, %d) = %+v, %v; want %+v (dropped %v)", tc.typ, tc.element, ev, ok, tc.want, tc.drop)
		}
	}
}

// TestMRSpanAccess: an MR goes into the provider context's table of
// memory inline copies read without a fault net (provider.Spans) unless
// it pages on demand, whose memory may be unmapped while registered.
func TestMRSpanAccess(t *testing.T) {
	pd := fakePD(0)
	pd.ctx.pc = provider.NewContext(nil, 0)
	buf := make([]byte, 64)
	for _, tc := range []struct {
		access Access
		want   bool
	}{
		{AccessLocalWrite, true},
		{0, true},
		{AccessLocalWrite | AccessRemoteRead, true},
		{AccessOnDemand, false},
		{AccessLocalWrite | AccessOnDemand, false},
	} {
		mr := &MR{pv: provider.MR{LKey: 0x4711, RKey: 2}}
		mr.resource = resource{ctx: pd.ctx, kind: "MR", handle: 3}
		mr.st.Store(&mrState{pd: pd, buf: buf, addr: uint64(sys.PointerTo(buf)), length: 64, access: tc.access})
		mr.addSpan()
		if got := pd.ctx.pc.Spans().Covers(0x4711, uint64(sys.PointerTo(buf)), 64); got != tc.want {
			t.Errorf("access %v: in the table %v, want %v", tc.access, got, tc.want)
		}
		pd.ctx.pc.Spans().Remove(0x4711)
	}
}
