//go:build linux

package rdmactl_test

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rdmactl"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// fakeKernel is what the test VM's kernel answered while rping ran
// ("rdma -j res show ..." there), plus a siw device without counters.
func fakeKernel(t *testing.T) *rdmanl.Fake {
	t.Helper()
	pid := uint32(os.Getpid())
	attrs := func(r rdmanl.ResAttrs, a ...rdmanl.Attr) rdmanl.ResAttrs { r.SetAttr(a...); return r }
	f := &rdmanl.Fake{
		Devices: []rdmanl.Device{
			{Index: 0, Name: "rxe0", PortCount: 1, Protocol: "roce"},
			{Index: 2, Name: "siw0", PortCount: 1, Protocol: "iw"},
		},
		Summaries: []rdmanl.Summary{
			{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.SummaryEntry{{Name: "pd", Current: 3}, {Name: "qp", Current: 2}}},
			{DevIndex: 2, DevName: "siw0", Entries: []rdmanl.SummaryEntry{{Name: "pd", Current: 0}, {Name: "qp", Current: 0}}},
		},
		Res: map[rdmanl.ResKind][]rdmanl.Res{
			rdmanl.ResQP: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{Port: 1, LQPN: 17, RQPN: 17, RQPSN: 4124860, SQPSN: 8379976, Type: 2, State: 3, PID: pid, PDN: 2},
					rdmanl.AttrPortIndex, rdmanl.AttrLQPN, rdmanl.AttrRQPN, rdmanl.AttrRQPSN, rdmanl.AttrSQPSN,
					rdmanl.AttrPathMigState, rdmanl.AttrType, rdmanl.AttrState, rdmanl.AttrPID, rdmanl.AttrPDN),
				attrs(rdmanl.ResAttrs{Port: 1, LQPN: 1, SQPSN: 1, Type: 1, State: 3, KernName: "ib_core"},
					rdmanl.AttrPortIndex, rdmanl.AttrLQPN, rdmanl.AttrSQPSN, rdmanl.AttrType, rdmanl.AttrState, rdmanl.AttrKernName),
			}}},
			rdmanl.ResCQ: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{CQN: 0, CQE: 1023, Users: 2, PollCtx: 2, KernName: "ib_core"},
					rdmanl.AttrCQN, rdmanl.AttrCQE, rdmanl.AttrUsers, rdmanl.AttrPollCtx, rdmanl.AttrDIM, rdmanl.AttrKernName),
			}}},
			rdmanl.ResMR: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{MRN: 2, RKey: 0x4c3, LKey: 0x4c3, MRLen: 64, PDN: 2, PID: pid},
					rdmanl.AttrMRN, rdmanl.AttrRKey, rdmanl.AttrLKey, rdmanl.AttrMRLen, rdmanl.AttrPDN, rdmanl.AttrPID),
			}}},
			rdmanl.ResPD: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{PDN: 0, LocalDMALKey: 0x1f6, Users: 1, KernName: "ib_core"},
					rdmanl.AttrPDN, rdmanl.AttrLocalDMALKey, rdmanl.AttrUsers, rdmanl.AttrKernName),
			}}},
			rdmanl.ResCMID: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{Port: 1, CMIDN: 0, State: 8, PS: 0x106, PID: pid,
					SrcAddr: netip.MustParseAddrPort("198.18.0.1:7174"), DstAddr: netip.MustParseAddrPort("0.0.0.0:0")},
					rdmanl.AttrPortIndex, rdmanl.AttrCMIDN, rdmanl.AttrState, rdmanl.AttrPS, rdmanl.AttrPID,
					rdmanl.AttrSrcAddr, rdmanl.AttrDstAddr),
			}}},
			rdmanl.ResCtx: {{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.ResAttrs{
				attrs(rdmanl.ResAttrs{CtxN: 0, PID: pid}, rdmanl.AttrCtxN, rdmanl.AttrPID),
			}}},
		},
		Stats: []rdmanl.PortStats{{DevIndex: 0, DevName: "rxe0", Port: 1,
			Counters: []rdmanl.Counter{{Name: "sent_pkts", Value: 3170}, {Name: "rcvd_pkts", Value: 3171}}}},
		StatErr: map[uint32]error{2: syscall.EINVAL},
	}
	t.Cleanup(rdmanl.InstallFake(f))
	return f
}

// comm is this process's name as rdma would print it.
func comm(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return strings.Fields(string(b))[0]
}

func open(t *testing.T) *rdmactl.Client {
	t.Helper()
	c, err := rdmactl.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestResources(t *testing.T) {
	fakeKernel(t)
	c := open(t)
	sums, err := c.Resources("")
	if err != nil {
		t.Fatal(err)
	}
	want := []rdmactl.Summary{
		{DevIndex: 0, Device: "rxe0", Counts: []rdmactl.Count{{Name: "pd", Current: 3}, {Name: "qp", Current: 2}}},
		{DevIndex: 2, Device: "siw0", Counts: []rdmactl.Count{{Name: "pd", Current: 0}, {Name: "qp", Current: 0}}},
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("Resources (-want +got):\n%s", diff)
	}
	if n, ok := sums[0].Count("qp"); n != 2 || !ok {
		t.Errorf("Count(qp) = %d, %v", n, ok)
	}
	if _, ok := sums[0].Count("srq"); ok {
		t.Error("Count(srq) found a kind the kernel did not send")
	}
	_, err = c.Resources("rxe9")
	var e *rdmactl.Error
	if !errors.Is(err, rdmactl.ErrNoDevice) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &e) || e.Op != "Resources" || e.Device != "rxe9" {
		t.Errorf("Resources(rxe9): %v", err)
	}
}

func TestObjects(t *testing.T) {
	fakeKernel(t)
	c := open(t)
	me := uint32(os.Getpid())
	name := comm(t)
	some := func(v uint32) rdmactl.Optional[uint32] { return rdmactl.Optional[uint32]{Value: v, Valid: true} }

	qps, err := c.QPs("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	wantQPs := []rdmactl.QP{
		{Device: "rxe0", Port: some(1), QPNum: 17, RemoteQPNum: some(17), RQPSN: some(4124860), SQPSN: 8379976,
			PathMigState: rdmactl.Optional[rdmactl.PathMigState]{Valid: true}, Type: 2, State: 3, PDN: some(2),
			Owner: rdmactl.Owner{PID: me, Comm: name}},
		{Device: "rxe0", Port: some(1), QPNum: 1, SQPSN: 1, Type: 1, State: 3, Owner: rdmactl.Owner{Kernel: true, Comm: "ib_core"}},
	}
	if diff := cmp.Diff(wantQPs, qps); diff != "" {
		t.Errorf("QPs (-want +got):\n%s", diff)
	}
	if s := qps[0].Type.String() + " " + qps[0].State.String() + " " + qps[0].PathMigState.Value.String(); s != "RC RTS MIGRATED" {
		t.Errorf("QP strings %q", s)
	}

	cqs, err := c.CQs("")
	if err != nil {
		t.Fatal(err)
	}
	wantCQs := []rdmactl.CQ{{Device: "rxe0", CQN: some(0), CQE: 1023, Users: 2,
		PollContext:        rdmactl.Optional[rdmactl.PollContext]{Value: 2, Valid: true},
		AdaptiveModeration: rdmactl.Optional[bool]{Valid: true}, Owner: rdmactl.Owner{Kernel: true, Comm: "ib_core"}}}
	if diff := cmp.Diff(wantCQs, cqs); diff != "" {
		t.Errorf("CQs (-want +got):\n%s", diff)
	}

	mrs, err := c.MRs("")
	if err != nil {
		t.Fatal(err)
	}
	wantMRs := []rdmactl.MR{{Device: "rxe0", MRN: some(2), RKey: some(0x4c3), LKey: some(0x4c3), Length: 64, PDN: some(2),
		Owner: rdmactl.Owner{PID: me, Comm: name}}}
	if diff := cmp.Diff(wantMRs, mrs); diff != "" {
		t.Errorf("MRs (-want +got):\n%s", diff)
	}

	pds, err := c.PDs("")
	if err != nil {
		t.Fatal(err)
	}
	wantPDs := []rdmactl.PD{{Device: "rxe0", PDN: some(0), LocalDMALKey: some(0x1f6), Users: 1,
		Owner: rdmactl.Owner{Kernel: true, Comm: "ib_core"}}}
	if diff := cmp.Diff(wantPDs, pds); diff != "" {
		t.Errorf("PDs (-want +got):\n%s", diff)
	}

	ids, err := c.CMIDs("")
	if err != nil {
		t.Fatal(err)
	}
	addr := func(s string) rdmactl.Optional[netip.AddrPort] {
		return rdmactl.Optional[netip.AddrPort]{Value: netip.MustParseAddrPort(s), Valid: true}
	}
	wantIDs := []rdmactl.CMID{{Device: "rxe0", Port: some(1), CMIDN: some(0), State: rdmactl.CMListen, PS: 0x106,
		Src: addr("198.18.0.1:7174"), Dst: addr("0.0.0.0:0"), Owner: rdmactl.Owner{PID: me, Comm: name}}}
	if diff := cmp.Diff(wantIDs, ids, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("CMIDs (-want +got):\n%s", diff)
	}
	if s := ids[0].State.String() + " " + ids[0].PS.String(); s != "LISTEN TCP" {
		t.Errorf("CM ID strings %q", s)
	}

	ctxs, err := c.Contexts("")
	if err != nil || len(ctxs) != 1 || ctxs[0].Owner.PID != me {
		t.Errorf("Contexts = %+v, %v", ctxs, err)
	}
	// A device whose table is empty lists nothing, and not nil.
	if qps, err := c.QPs("siw0"); err != nil || qps == nil || len(qps) != 0 {
		t.Errorf("QPs(siw0) = %#v, %v; want an empty list", qps, err)
	}
}

func TestCounters(t *testing.T) {
	fakeKernel(t)
	c := open(t)
	pc, err := c.Counters("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := rdmactl.PortCounters{Device: "rxe0", Port: 1, Counters: []rdmactl.Counter{{Name: "sent_pkts", Value: 3170}, {Name: "rcvd_pkts", Value: 3171}}}
	if diff := cmp.Diff(want, pc); diff != "" {
		t.Errorf("Counters (-want +got):\n%s", diff)
	}
	if v, ok := pc.Get("rcvd_pkts"); v != 3171 || !ok {
		t.Errorf("Get = %d, %v", v, ok)
	}

	_, err = c.Counters("siw0", 1)
	if !errors.Is(err, rdmactl.ErrNoCounters) || !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Counters(siw0/1) = %v; want ErrNoCounters and EINVAL", err)
	}
	if want := "rdmactl Counters siw0/1: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if _, err := c.Counters("rxe0", 2); !errors.Is(err, rdmactl.ErrNoDevice) {
		t.Errorf("Counters(rxe0/2) = %v; want ErrNoDevice", err)
	}

	all, err := c.AllCounters("")
	if err != nil || len(all) != 1 || all[0].Device != "rxe0" {
		t.Errorf("AllCounters = %+v, %v; want rxe0/1 alone (siw0 keeps none)", all, err)
	}
}

func TestLinks(t *testing.T) {
	f := fakeKernel(t)
	f.Links = []rdmanl.Link{{DevIndex: 0, DevName: "rxe0", Port: 1, State: 4, PhysState: 5, NetdevIndex: 3, Netdev: "veth0"}}
	c := open(t)
	if err := c.AddLink("rxe9", "rxe", "veth9"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLink("rxe0"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"NewLink rxe9 rxe veth9", "DelLink rxe0"}, f.Calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	err := c.DeleteLink("rxe7")
	var e *rdmactl.Error
	if !errors.Is(err, rdmactl.ErrNoDevice) || !errors.As(err, &e) || e.Op != "DeleteLink" {
		t.Errorf("DeleteLink(rxe7) = %v", err)
	}
	links, err := c.Links()
	want := []rdmactl.Link{{Device: "rxe0", Port: 1, State: "ACTIVE", PhysState: "LINK_UP", Netdev: "veth0", NetdevIndex: 3}}
	if err != nil || !cmp.Equal(want, links) {
		t.Errorf("Links = %+v, %v", links, err)
	}
}

func TestClosed(t *testing.T) {
	c, err := rdmactl.Open()
	if errors.Is(err, syscall.EPROTONOSUPPORT) {
		t.Skipf("no RDMA netlink here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.QPs(""); !errors.Is(err, rdmactl.ErrClosed) {
		t.Errorf("QPs after Close = %v; want ErrClosed", err)
	}
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{rdmactl.QPType(4).String(), "UD"}, {rdmactl.QPType(99).String(), "UNKNOWN"},
		{rdmactl.QPState(6).String(), "ERR"}, {rdmactl.PathMigState(2).String(), "ARMED"},
		{rdmactl.PollContext(0).String(), "DIRECT"}, {rdmactl.CMState(10).String(), "DESTROYING"},
		{rdmactl.PortSpace(0x111).String(), "UDP"}, {rdmactl.PortSpace(0x13f).String(), "IPoIB"},
		{rdmactl.PortSpace(7).String(), "---"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
