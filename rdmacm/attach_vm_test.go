package rdmacm_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// ownQP is a QP of type typ of the test's own on id's device, with a
// context, a PD and a CQ of its own, all closed when the test ends; the
// QP's cleanup fails the test if the QP was closed already (by the ID).
func ownQP(t testing.TB, id *rdmacm.ID, typ uverbs.QPType) (*uverbs.QP, error) {
	d, ok := id.Device()
	if !ok {
		return nil, errors.New("the ID has no device")
	}
	c, err := d.Open(nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	pd, err := c.AllocPD()
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { pd.Close() })
	cq, err := c.CreateCQ(uverbs.CQConfig{Size: 16})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cq.Close() })
	cfg := qpConfig()
	cfg.Type, cfg.SendCQ, cfg.RecvCQ = typ, cq, cq
	qp, err := pd.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := qp.Close(); err != nil {
			t.Errorf("closing an attached QP: %v", err)
		}
	})
	return qp, nil
}

func mustOwnQP(t testing.TB, id *rdmacm.ID, typ uverbs.QPType) *uverbs.QP {
	t.Helper()
	qp, err := ownQP(t, id, typ)
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// TestAttachQP: an ID drives a QP the caller owns (AttachQP) through a
// connection as it drives CreateQP's, adds the access rights it was
// given at INIT, and never destroys it: Close and DestroyQP forget it,
// and the owner closes it afterwards. Bad QPs are refused before any
// kernel call.
func TestAttachQP(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	iwarp := testenv.CurrentFabric().IWARP

	// The server attaches its own QP, adding MW_BIND (a right rdma_cm
	// never gives; uverbs reports it from QUERY_QP on RoCE).
	accepted := make(chan *uverbs.QP, 1)
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		s := req.ID
		t.Cleanup(func() { s.Close() })
		qp, err := ownQP(t, s, uverbs.QPTypeRC)
		if err != nil {
			return err
		}
		if err := s.AttachQP(qp, uverbs.AccessMWBind); err != nil {
			return err
		}
		if s.QP() != qp {
			return errors.New("server: QP() is not the attached QP")
		}
		if _, err := s.AcceptContext(ctx, nil); err != nil {
			return err
		}
		accepted <- qp
		return nil
	})

	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	qp := mustOwnQP(t, c, uverbs.QPTypeRC)

	// Refused before any kernel call; the QP stays in RESET, usable.
	if err := c.AttachQP(nil, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("AttachQP(nil) = %v, want EINVAL", err)
	}
	if !iwarp { // siw makes RC QPs only
		ud := mustOwnQP(t, c, uverbs.QPTypeUD)
		if err := c.AttachQP(ud, 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("AttachQP(a UD QP) on an RC ID = %v, want EINVAL", err)
		}
	}
	unbound := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := unbound.AttachQP(qp, 0); err == nil {
		t.Error("AttachQP on an ID bound to no device succeeded")
	}
	if st := qp.State(); st != uverbs.QPStateReset {
		t.Fatalf("the QP is in %v after refusals, want RESET", st)
	}

	if err := c.AttachQP(qp, 0); err != nil {
		t.Fatalf("AttachQP: %v", err)
	}
	if st := qp.State(); st != uverbs.QPStateInit {
		t.Errorf("attached QP in %v, want INIT", st)
	}
	if err := c.AttachQP(qp, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a second AttachQP = %v, want EINVAL", err)
	}
	other := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if err := other.AttachQP(qp, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("AttachQP of a QP in INIT to another ID = %v, want EINVAL", err)
	}
	// The QP number goes to the peer from the attached QP: a nil
	// ConnParam needs no QPNum.
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatalf("ConnectContext: %v", err)
	}
	wait()
	sqp := <-accepted
	if st := qp.State(); st != uverbs.QPStateRTS {
		t.Errorf("client's attached QP in %v after ESTABLISHED, want RTS", st)
	}
	if st := sqp.State(); st != uverbs.QPStateRTS {
		t.Errorf("server's attached QP in %v after accepting, want RTS", st)
	}
	if !iwarp { // siw's QUERY_QP reports fixed access rights
		a, err := sqp.Query(uverbs.QPAttrAccessFlags)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		want := uverbs.AccessMWBind | uverbs.AccessRemoteWrite
		if a.AccessFlags&want != want {
			t.Errorf("server's QP access %v, want %v and the CM's", a.AccessFlags, want)
		}
	}

	if err := c.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	// The ID forgets the QP; the QP's owner closes it (ownQP's cleanup
	// fails the test if the ID closed it).
	if err := c.DestroyQP(); err != nil {
		t.Fatalf("DestroyQP: %v", err)
	}
	if c.QP() != nil {
		t.Error("QP() after DestroyQP is not nil")
	}
	if _, err := qp.Query(uverbs.QPAttrState); err != nil {
		t.Errorf("the attached QP after DestroyQP: Query = %v, want it open", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
