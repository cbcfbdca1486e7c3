package uverbs_test

import (
	"os"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs"
)

// soakCycles is how many times the soak opens and closes each object.
const soakCycles = 10000

// soakRSSGrowth bounds the RSS growth over a whole soak (docs/reliability.md).
const soakRSSGrowth = 4 << 20

// soakObjects are the kinds of object the soak cycles, each as a
// function that opens one and closes it (cycle i).
type soakObject struct {
	name  string
	cycle func(i int) error
}

// TestSoakObjects opens and closes every kind of uverbs object
// soakCycles times (make soak: PURERDMA_SOAK=1): contexts, and on one
// context PDs, MRs, CQs, completion channels, QPs, SRQs, AHs, MWs and
// TDs. Afterwards the process has the descriptors and goroutines it
// had, the kernel's object counts (rdma res) are back at the baseline
// and RSS grew by less than soakRSSGrowth. The baseline is taken after
// a warm-up of 100 cycles of each, which pages in the code and fills
// the caches a first use fills.
func TestSoakObjects(t *testing.T) {
	testutils.Soak(t, 2)
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	dev := devs[0]
	gidx, gid := roceV2GID(t, dev.Name)

	var c *uverbs.Context
	var pd *uverbs.PD
	var cq *uverbs.CQ
	var buf *uverbs.Buffer
	open := func() {
		var err error
		if c, err = dev.Open(nil); err != nil {
			t.Fatal(err)
		}
		if pd, err = c.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if cq, err = c.CreateCQ(uverbs.CQConfig{Size: 16}); err != nil {
			t.Fatal(err)
		}
		if buf, err = uverbs.AllocBuffer(64 << 10); err != nil {
			t.Fatal(err)
		}
	}
	closeAll := func() {
		for _, err := range []error{cq.Close(), pd.Close(), c.Close(), buf.Close()} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	objects := []soakObject{
		{"context", func(int) error {
			c, err := dev.Open(nil)
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"PD", func(int) error {
			p, err := c.AllocPD()
			if err != nil {
				return err
			}
			return p.Close()
		}},
		{"MR", func(i int) error {
			var mr *uverbs.MR
			var err error
			if i%2 == 0 {
				mr, err = pd.RegBuffer(buf, allAccess)
			} else {
				mr, err = pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
			}
			if err != nil {
				return err
			}
			return mr.Close()
		}},
		{"CQ", func(int) error {
			q, err := c.CreateCQ(uverbs.CQConfig{Size: 64})
			if err != nil {
				return err
			}
			return q.Close()
		}},
		{"channel", func(int) error {
			ch, err := c.CreateCompChannel()
			if err != nil {
				return err
			}
			return ch.Close()
		}},
		{"QP", func(i int) error {
			typ := []uverbs.QPType{uverbs.QPTypeRC, uverbs.QPTypeUC, uverbs.QPTypeUD}[i%3]
			qp, err := pd.CreateQP(uverbs.QPConfig{Type: typ, SendCQ: cq, RecvCQ: cq,
				Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				return err
			}
			return qp.Close()
		}},
		{"SRQ", func(int) error {
			s, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
			if err != nil {
				return err
			}
			return s.Close()
		}},
		{"AH", func(int) error {
			ah, err := pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: gidx, HopLimit: 64}})
			if err != nil {
				return err
			}
			return ah.Close()
		}},
		{"MW", func(i int) error {
			mw, err := pd.AllocMW([]uverbs.MWType{uverbs.MWType1, uverbs.MWType2}[i%2])
			if err != nil {
				return err
			}
			return mw.Close()
		}},
		{"TD", func(int) error {
			td, err := c.AllocTD()
			if err != nil {
				return err
			}
			return td.Close()
		}},
	}
	run := func(n int, log bool) {
		t.Helper()
		for _, o := range objects {
			start := time.Now()
			for i := range n {
				if err := o.cycle(i); err != nil {
					t.Fatalf("%s, cycle %d: %v", o.name, i, err)
				}
			}
			if d := time.Since(start); log {
				t.Logf("%-8s %d cycles in %v (%v each)", o.name, n, d.Round(time.Millisecond), (d / time.Duration(n)).Round(time.Microsecond))
			}
		}
	}

	open()
	run(100, false)
	closeAll()
	base := testutils.MeasureUsage(t)
	t.Logf("%s: before: %v", os.Getenv("PURERDMA_VM"), base)
	open()
	withShared := testutils.MeasureUsage(t)
	run(soakCycles, true)
	testutils.CheckUsage(t, "with the shared context open", withShared, testutils.MeasureUsage(t), soakRSSGrowth)
	closeAll()
	after := testutils.MeasureUsage(t)
	t.Logf("after: %v", after)
	testutils.CheckUsage(t, "after the soak", base, after, soakRSSGrowth)
}
