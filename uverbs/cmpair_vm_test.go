package uverbs_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// Pairs of ends on iWARP. An iWARP QP reaches RTS only through the
// iWARP CM, so on siw the pair constructors connect their two ends
// through rdmacm instead of by QP modify: each end's QP is created by an
// rdmacm ID (ID.CreateQP) on the end's own PD, CQs and SRQ, with the
// configuration newEnd chose, and the ID owns it from then on (it
// destroys the QP when the test's cleanup closes the ID, before the
// PD, CQs and SRQ, which were registered for cleanup earlier). The
// rest of each test sees a QP like any other.

// iwarp reports whether the current fabric is iWARP (siw).
func iwarp() bool { return testenv.CurrentFabric().IWARP }

// setQP gives e a QP of cfg: created now on RoCE; on iWARP cfg is kept
// and connectPair creates the QP through the rdmacm ID that connects it.
func setQP(t *testing.T, e *end, cfg uverbs.QPConfig) {
	t.Helper()
	if iwarp() {
		e.qcfg = cfg
		return
	}
	e.qp = newQP(t, e.pd, cfg)
}

// connectPair connects a's and b's RC QPs to each other: by QP modify
// on RoCE (connect both ways), through the rdma_cm on iWARP (cmConnect).
func connectPair(t *testing.T, a, b *end) {
	t.Helper()
	if !iwarp() {
		connect(t, a, b)
		connect(t, b, a)
		return
	}
	cmConnect(t, a, b, nil)
}

// cmConnect connects two ends that have no QP yet (setQP on iWARP)
// through the rdma_cm: cmDial, then cmPending.finish. p is both sides'
// ConnParam (nil: rdmacm's defaults, the device's read depths).
func cmConnect(t *testing.T, a, b *end, p *rdmacm.ConnParam) {
	t.Helper()
	cp, _ := cmDial(t, a, b, p)
	cp.finish(t)
}

// cmPending is a connection cmDial started: the connecting end's QP
// exists (in INIT), the accepting end's does not yet.
type cmPending struct {
	ctx    context.Context
	cancel context.CancelFunc
	srv    *end
	c      *rdmacm.ID
	addr   netip.AddrPort
	p      *rdmacm.ConnParam
	done   chan accepted
}

type accepted struct {
	id  *rdmacm.ID
	qp  *uverbs.QP
	err error
}

// cmDial starts connecting two ends that have no QP yet: the end on the
// fabric's first device listens on its address and accepts in a
// goroutine, each end's QP created by its ID with the end's recorded
// configuration; the end on the second device resolves the listener
// from its own address and has its ID create its QP, which it returns
// with the pending connection (finish connects).
func cmDial(t *testing.T, a, b *end, p *rdmacm.ConnParam) (*cmPending, *end) {
	t.Helper()
	f := testenv.CurrentFabric()
	srv, cli := a, b
	if srv.ctx.Device().Name != f.Devs[0] {
		srv, cli = b, a
	}
	if srv.ctx.Device().Name != f.Devs[0] || cli.ctx.Device().Name != f.Devs[1] {
		t.Fatalf("cmConnect: the ends are on %s and %s; one must be on %s, the other on %s",
			a.ctx.Device().Name, b.ctx.Device().Name, f.Devs[0], f.Devs[1])
	}
	if srv.qp != nil || cli.qp != nil {
		t.Fatal("cmConnect: an end has a QP already; its ID must create it")
	}
	newID := func() *rdmacm.ID {
		t.Helper()
		id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { id.Close() })
		return id
	}
	l := newID()
	if err := l.Bind(netip.AddrPortFrom(testenv.Server(), 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(0); err != nil {
		t.Fatal(err)
	}
	addr, err := l.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cp := &cmPending{ctx: ctx, cancel: cancel, srv: srv, addr: addr, p: p, done: make(chan accepted, 1)}
	go func() {
		ev, err := l.GetRequest(ctx)
		if err != nil {
			cp.done <- accepted{err: err}
			return
		}
		s := ev.ID
		qp, err := s.CreateQP(srv.pd, srv.qcfg)
		if err == nil {
			_, err = s.AcceptContext(ctx, p)
		}
		cp.done <- accepted{id: s, qp: qp, err: err}
	}()
	cp.c = newID()
	err = cp.c.Resolve(ctx, netip.AddrPortFrom(testenv.Client(), 0), addr)
	if err == nil {
		cli.qp, err = cp.c.CreateQP(cli.pd, cli.qcfg)
	}
	if err != nil {
		cp.abort(t)
		t.Fatalf("rdma_cm: a QP on %s for %v: %v", cli.ctx.Device().Name, addr, err)
	}
	return cp, cli
}

// wait waits for the accepting goroutine; its ID closes with the test,
// before the PD and CQs (t.Cleanup is LIFO).
func (cp *cmPending) wait(t *testing.T) accepted {
	r := <-cp.done
	cp.cancel()
	if r.id != nil {
		t.Cleanup(func() { r.id.Close() })
	}
	return r
}

func (cp *cmPending) abort(t *testing.T) {
	cp.cancel()
	cp.wait(t)
}

// finish connects and returns only after both the connect and the
// accept have returned: siw can leave a message the connecting side
// sends before the accept returned unread (docs/providers.md, siw).
func (cp *cmPending) finish(t *testing.T) {
	t.Helper()
	if _, err := cp.c.ConnectContext(cp.ctx, cp.p); err != nil {
		cp.abort(t)
		t.Fatalf("rdma_cm connect from %v to %v: %v", testenv.Client(), cp.addr, err)
	}
	r := cp.wait(t)
	if r.err != nil {
		t.Fatalf("rdma_cm accept on %v: %v", cp.addr, r.err)
	}
	cp.srv.qp = r.qp
}

// standalone gives an end newEnd left without a QP on iWARP (setQP) a
// QP of its own that no ID connects, for a test that uses it
// unconnected. On RoCE the end has its QP already.
func standalone(t *testing.T, e *end) {
	t.Helper()
	if e.qp == nil {
		e.qp = newQP(t, e.pd, e.qcfg)
	}
}

// wantWritten checks the target of an RDMA WRITE whose completion the
// test has: on RoCE the data is there (rxe completes a write when the
// responder acknowledged it); on iWARP it may not be yet (siw completes
// a write once it handed it to TCP), so wantWritten waits for it.
func wantWritten(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if !written(want, got) {
		wantBytes(t, what, want, got)
	}
}

// written reports whether got, the target of an RDMA WRITE whose
// completion the test has, holds want: at once on RoCE; on iWARP once
// the data has landed (see wantWritten), with 30 s that only end a hang.
func written(want, got []byte) bool {
	if !iwarp() {
		return bytes.Equal(want, got)
	}
	for deadline := time.Now().Add(30 * time.Second); !bytes.Equal(want, got); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// wantNotSupported checks a post of what iWARP does not have (immediate
// data, atomics): refused before anything reached the queue, with
// ErrNotSupported.
func wantNotSupported(t *testing.T, err error) {
	t.Helper()
	var pe *uverbs.PostError
	if !errors.Is(err, uverbs.ErrNotSupported) || errors.As(err, &pe) {
		t.Errorf("post on iWARP = %v, want ErrNotSupported, nothing posted", err)
	}
}
