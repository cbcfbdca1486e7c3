package uverbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// TestParentDomain: objects made on a parent domain take its TD, which
// (like the PD) stays in use until they close; the domain itself is in
// use while they live.
func TestParentDomain(t *testing.T) {
	c := openContext(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	td, err := c.AllocTD()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := c.AllocParentDomain(pd, td)
	if err != nil {
		t.Fatal(err)
	}
	if dom.TD() != td || pd.TD() != nil {
		t.Fatalf("TD of the domain %p, of the PD %p", dom.TD(), pd.TD())
	}
	if _, err := c.AllocParentDomain(dom, td); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a parent domain of a parent domain: %v, want EINVAL", err)
	}
	for name, cl := range map[string]interface{ Close() error }{"TD": td, "PD": pd} {
		if err := cl.Close(); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("%s Close under a parent domain = %v, want EBUSY", name, err)
		}
	}
	cq, err := c.CreateCQ(uverbs.CQConfig{Size: 8, ParentDomain: dom})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCQ(uverbs.CQConfig{Size: 8, ParentDomain: pd}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("CQ with a plain PD as ParentDomain: %v, want EINVAL", err)
	}
	qp, err := dom.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := dom.RegMR(make([]byte, 64), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := dom.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("domain Close with a QP and an MR on it = %v, want EBUSY", err)
	}
	for _, cl := range []interface{ Close() error }{mr, qp} {
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// The CQ still holds the TD it inherited.
	if err := dom.Close(); err != nil {
		t.Fatal(err)
	}
	if err := td.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("TD Close while the CQ that inherited it lives = %v, want EBUSY", err)
	}
	for _, cl := range []interface{ Close() error }{cq, td, pd} {
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
