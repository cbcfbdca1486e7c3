package uverbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

func TestCQLifecycle(t *testing.T) {
	c := openContext(t)
	cq, err := c.CreateCQ(uverbs.CQConfig{Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	if cq.Size() < 10 {
		t.Errorf("Size = %d, want >= 10", cq.Size())
	}
	var wc [4]uverbs.WorkCompletion
	if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
		t.Errorf("Poll on an empty CQ = %d, %v", n, err)
	}
	if testenv.CurrentFabric().IWARP {
		// siw has no RESIZE_CQ: refused before the kernel, the CQ as it
		// was.
		if err := cq.Resize(100); !errors.Is(err, uverbs.ErrNotSupported) || cq.Size() < 10 {
			t.Errorf("siw Resize(100) = %v, Size %d; want ErrNotSupported and the size unchanged", err, cq.Size())
		}
	} else if err := cq.Resize(100); err != nil {
		t.Fatalf("Resize: %v", err)
	} else if cq.Size() < 100 {
		t.Errorf("Size after Resize(100) = %d", cq.Size())
	}
	if n, err := cq.Poll(wc[:]); n != 0 || err != nil {
		t.Errorf("Poll after Resize = %d, %v", n, err)
	}
	if err := cq.RequestNotify(false); err != nil {
		t.Errorf("RequestNotify: %v", err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Poll(wc[:]); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Poll after Close = %v", err)
	}
	for _, tc := range []uverbs.CQConfig{{Size: 0}, {Size: 4, CompVector: 99}, {Size: 1 << 30}} {
		if cq, err := c.CreateCQ(tc); err == nil {
			cq.Close()
			t.Errorf("CreateCQ(%+v) succeeded", tc)
		} else {
			t.Logf("CreateCQ(%+v): %v", tc, err)
		}
	}
}

func TestCQsShareChannel(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq1 := newCQ(t, c, uverbs.CQConfig{Size: 4, Channel: ch})
	cq2 := newCQ(t, c, uverbs.CQConfig{Size: 4, Channel: ch})
	if err := ch.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("channel Close under CQs = %v, want EBUSY", err)
	}
	cq1.Close()
	cq2.Close()
	if err := ch.Close(); err != nil {
		t.Errorf("channel Close = %v", err)
	}
}

func TestSRQLifecycle(t *testing.T) {
	c := openContext(t)
	pd := newPD(t, c)
	srq, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 2, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, err := srq.Query()
	if err != nil || a.MaxWR < 16 || a.MaxSGE < 2 || a.Limit != 4 {
		t.Errorf("Query = %+v, %v", a, err)
	}
	if err := srq.Modify(&uverbs.SRQAttr{Limit: 8}, uverbs.SRQLimit); err != nil {
		t.Errorf("Modify limit: %v", err)
	}
	if a, _ := srq.Query(); a.Limit != 8 {
		t.Errorf("limit after Modify = %d", a.Limit)
	}
	if testenv.CurrentFabric().IWARP {
		// siw changes only an SRQ's limit.
		if err := srq.Modify(&uverbs.SRQAttr{MaxWR: 64}, uverbs.SRQMaxWR); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("siw Modify (resize) = %v, want ErrNotSupported", err)
		}
	} else if err := srq.Modify(&uverbs.SRQAttr{MaxWR: 64}, uverbs.SRQMaxWR); err != nil {
		t.Errorf("Modify (resize): %v", err)
	} else if a, _ := srq.Query(); a.MaxWR < 64 {
		t.Errorf("MaxWR after resize = %d", a.MaxWR)
	}
	cq := newCQ(t, c, uverbs.CQConfig{Size: 4})
	qp := newQP(t, pd, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
	if err := qp.PostRecv(&uverbs.RecvWR{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostRecv on an SRQ QP = %v, want EINVAL", err)
	}
	if err := srq.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("SRQ.Close under a QP = %v, want EBUSY", err)
	}
	qp.Close()
	if err := srq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateSRQ(uverbs.SRQConfig{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateSRQ(zero) = %v", err)
	}
}

func TestAHLifecycle(t *testing.T) {
	c := openContext(t)
	pd := newPD(t, c)
	sgid, gid := roceV2GID(t, c.Device().Name)
	ah, err := pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: sgid, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("PD.Close under an AH = %v", err)
	}
	if err := ah.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAH(uverbs.AHAttr{}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CreateAH(port 0) = %v, want EINVAL", err)
	}
}

func TestThreadDomain(t *testing.T) {
	c := openContext(t)
	td, err := c.AllocTD()
	if err != nil {
		t.Fatal(err)
	}
	pd := newPD(t, c)
	cq := newCQ(t, c, uverbs.CQConfig{Size: 4, TD: td})
	qp := newQP(t, pd, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, TD: td, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err := td.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("TD.Close under objects = %v, want EBUSY", err)
	}
	qp.Close()
	cq.Close()
	if err := td.Close(); err != nil {
		t.Errorf("TD.Close = %v", err)
	}
}
