package uverbs_test

import (
	"errors"
	"os"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// Regression tests of defects found by outside testing (docs/reliability.md,
// "Defects fixed"): each failed before its fix.

// TestSRQQueryMatchesPostable: Query's MaxWR is what PostRecv takes:
// that many receives post, one more is ErrBusy. (6.1's rxe reports the
// ring's size, 15 for 8 asked, while only 8 could be posted.)
func TestSRQQueryMatchesPostable(t *testing.T) {
	c := openContext(t)
	pd := newPD(t, c)
	buf := make([]byte, 64)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	fill := func(t *testing.T, srq *uverbs.SRQ) {
		t.Helper()
		attr, err := srq.Query()
		if err != nil {
			t.Fatal(err)
		}
		for i := range attr.MaxWR {
			if err := srq.PostRecv(&uverbs.RecvWR{WRID: uint64(i), SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}); err != nil {
				t.Fatalf("receive %d of Query's MaxWR %d: %v", i+1, attr.MaxWR, err)
			}
		}
		if err := srq.PostRecv(&uverbs.RecvWR{WRID: 999}); !errors.Is(err, uverbs.ErrBusy) {
			t.Errorf("receive %d on an SRQ whose Query says MaxWR %d = %v, want ErrBusy", attr.MaxWR+1, attr.MaxWR, err)
		}
		t.Logf("%s: MaxWR %d", os.Getenv("PURERDMA_VM"), attr.MaxWR)
	}
	for _, n := range []uint32{1, 8, 100} {
		srq, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: n, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		fill(t, srq)
		if err := srq.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dev, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if dev.DeviceCapFlags&uverbs.DeviceCapSRQResize == 0 {
		return
	}
	srq, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	if err := srq.Modify(&uverbs.SRQAttr{MaxWR: 40}, uverbs.SRQMaxWR); err != nil {
		t.Fatal(err)
	}
	fill(t, srq)
}
