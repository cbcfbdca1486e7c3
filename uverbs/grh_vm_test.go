package uverbs_test

import (
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestMissingGRH: rxe's port is RoCE and reports GRH_REQUIRED; an RC
// QP's move to RTR with an address vector (or alternate path) lacking
// IsGlobal, and an AH without it, fail before the kernel with an error
// naming the field, the port and the GRH fields to set, matching
// EINVAL; the QP stays in INIT (as the kernel reports it) and the same
// move with the GRH then succeeds.
func TestMissingGRH(t *testing.T) {
	testenv.NotIWARP(t, "the GRH belongs to RoCE's and InfiniBand's UD and address vectors; iWARP has neither")
	c := openContext(t)
	name := c.Device().Name
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.LinkLayer != uverbs.LinkLayerEthernet || !pa.GRHRequired {
		t.Fatalf("%s/1: link layer %v, GRH required %v; want a RoCE port that requires the GRH", name, pa.LinkLayer, pa.GRHRequired)
	}
	pd := newPD(t, c)
	cq := newCQ(t, c, uverbs.CQConfig{Size: 4})
	sgid, gid := roceV2GID(t, name)
	grh := uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: sgid, HopLimit: 64}}
	why := "but port " + name + "/1 is RoCE (link layer Ethernet), where every address is global"
	check := func(what string, err error, field string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s without IsGlobal succeeded", what)
		}
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v does not match EINVAL", what, err)
		}
		for _, w := range []string{field + ".IsGlobal is false", why, "set " + field + ".IsGlobal and " + field + ".GRH", "DGID", "SGIDIndex", "HopLimit"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", what, err, w)
			}
		}
	}

	qp := newQP(t, pd, uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	rtr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPNum: qp.Num(), RQPSN: 1,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, AHAttr: uverbs.AHAttr{PortNum: 1}, AltAHAttr: grh, AltPortNum: 1}
	const rtrMask = uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
		uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	for _, tc := range []struct {
		name  string
		attr  func(a *uverbs.QPAttr)
		mask  uverbs.QPAttrMask
		field string
	}{
		{"path", func(*uverbs.QPAttr) {}, rtrMask, "AHAttr"},
		{"alternate path", func(a *uverbs.QPAttr) { a.AHAttr, a.AltAHAttr = grh, uverbs.AHAttr{PortNum: 1} }, rtrMask | uverbs.QPAttrAltPath, "AltAHAttr"},
	} {
		a := rtr
		tc.attr(&a)
		check("Modify to RTR, "+tc.name, qp.Modify(&a, tc.mask), tc.field)
		got, err := qp.Query(uverbs.QPAttrState)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != uverbs.QPStateInit || qp.State() != uverbs.QPStateInit {
			t.Errorf("after the refused move (%s): the kernel says %v, the QP %v; want INIT", tc.name, got.State, qp.State())
		}
	}
	// A GID index past the kernel's 8 bits is refused, not truncated.
	for _, bad := range []int{256, -1} {
		a := rtr
		a.AHAttr = grh
		a.AHAttr.GRH.SGIDIndex = bad
		err := qp.Modify(&a, rtrMask)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "AHAttr.GRH.SGIDIndex "+strconv.Itoa(bad)) {
			t.Errorf("Modify with SGIDIndex %d: %v; want EINVAL naming AHAttr.GRH.SGIDIndex", bad, err)
		}
		b := grh
		b.GRH.SGIDIndex = bad
		if ah, err := pd.CreateAH(b); err == nil || !errors.Is(err, syscall.EINVAL) {
			if ah != nil {
				ah.Close()
			}
			t.Errorf("CreateAH with SGIDIndex %d: %v; want EINVAL", bad, err)
		}
	}
	rtr.AHAttr = grh
	if err := qp.Modify(&rtr, rtrMask); err != nil {
		t.Fatalf("Modify to RTR with the GRH: %v", err)
	}

	ah, err := pd.CreateAH(uverbs.AHAttr{PortNum: 1, DLID: 1})
	if ah != nil {
		ah.Close()
	}
	check("CreateAH", err, "AHAttr")
	ah, err = pd.CreateAH(grh)
	if err != nil {
		t.Fatalf("CreateAH with the GRH: %v", err)
	}
	if err := ah.Close(); err != nil {
		t.Fatal(err)
	}
}
