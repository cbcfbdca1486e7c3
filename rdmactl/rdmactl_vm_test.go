package rdmactl_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestExamples runs the package's examples in the VM (they log.Fatal on
// any error), so the documentation cannot rot.
func TestExamples(t *testing.T) {
	testenv.Devices(t, 2)
	Example()
	ExampleClient_Counters()
	ExampleClient_CMIDs()
}

// rdmaJSON runs "rdma -j ARGS" and decodes its array.
func rdmaJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, err := exec.Command("rdma", append([]string{"-j"}, args...)...).Output()
	var v []map[string]any
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		t.Fatalf("rdma -j %s: %v, output %q: %v", strings.Join(args, " "), err, out, jerr)
	}
	return v
}

// ours reports whether pid, as the kernel records an object's owner, is
// this process: the kernel records the thread that made the object, so
// for a Go program it is one of the process's threads.
func ours(pid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", pid))
	return err == nil
}

// find returns rdma's entry of device dev whose key has value v and
// whose pid is this process's.
func find(t *testing.T, entries []map[string]any, dev, key string, v uint32) map[string]any {
	t.Helper()
	for _, e := range entries {
		pid, _ := e["pid"].(float64)
		if e["ifname"] == dev && e[key] == float64(v) && ours(uint32(pid)) {
			return e
		}
	}
	t.Fatalf("rdma lists no %s %s %d of this process: %v", dev, key, v, entries)
	return nil
}

// fields is what rdma prints for one object, built from the API's values.
type fields map[string]any

func (f fields) num(key string, v uint32, ok bool) {
	if ok {
		f[key] = float64(v)
	}
}

func (f fields) hex(key string, v uint32, ok bool) {
	if ok {
		f[key] = fmt.Sprintf("%x", v)
	}
}

func (f fields) owner(o rdmactl.Owner) {
	if !o.Kernel {
		f["pid"] = float64(o.PID)
	}
	f["comm"] = o.Comm
}

// TestAPIMatchesRdma makes a PD, a CQ, an MR, a QP (uverbs) and a
// listening rdma_cm ID on rxe0 and compares what the API says of each
// with what "rdma -j res show" prints, field for field.
func TestAPIMatchesRdma(t *testing.T) {
	testenv.Devices(t, 2)
	dev, addr := testenv.RXE.Devs[0], testenv.RXE.Addrs[0]
	ctx, err := uverbs.Open(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(uverbs.CQConfig{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Close()
	if err := id.Bind(netip.AddrPortFrom(addr, 0)); err != nil {
		t.Fatal(err)
	}
	if err := id.Listen(1); err != nil {
		t.Fatal(err)
	}

	c, err := rdmactl.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := func(index uint32, dev string) fields { return fields{"ifindex": float64(index), "ifname": dev} }

	qps, err := c.QPs(dev)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, q := range qps {
		if q.QPNum != qp.Num() {
			continue
		}
		found++
		got := base(q.DevIndex, q.Device)
		got.num("port", q.Port.Value, q.Port.Valid)
		got.num("lqpn", q.QPNum, true)
		got.num("rqpn", q.RemoteQPNum.Value, q.RemoteQPNum.Valid)
		got["type"], got["state"] = q.Type.String(), q.State.String()
		got.num("rq-psn", q.RQPSN.Value, q.RQPSN.Valid)
		got.num("sq-psn", q.SQPSN, true)
		if q.PathMigState.Valid {
			got["path-mig-state"] = q.PathMigState.Value.String()
		}
		got.num("pdn", q.PDN.Value, q.PDN.Valid)
		got.owner(q.Owner)
		want := find(t, rdmaJSON(t, "res", "show", "qp"), dev, "lqpn", q.QPNum)
		if diff := cmp.Diff(want, map[string]any(got)); diff != "" {
			t.Errorf("QP %d (-rdma +rdmactl):\n%s", q.QPNum, diff)
		}
		if !ours(q.Owner.PID) || q.Type.String() != "RC" || q.State.String() != "RESET" {
			t.Errorf("QP %+v: want this process's RC QP in RESET", q)
		}
	}

	cqs, err := c.CQs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range cqs {
		if !ours(q.Owner.PID) || q.Owner.Kernel {
			continue
		}
		found++
		got := base(q.DevIndex, q.Device)
		got.num("cqn", q.CQN.Value, q.CQN.Valid)
		got.num("cqe", q.CQE, true)
		got["users"] = float64(q.Users)
		if q.PollContext.Valid {
			got["poll-ctx"] = q.PollContext.Value.String()
		}
		if q.AdaptiveModeration.Valid {
			got["adaptive-moderation"] = q.AdaptiveModeration.Value
		}
		got.num("ctxn", q.CtxN.Value, q.CtxN.Valid)
		got.owner(q.Owner)
		want := find(t, rdmaJSON(t, "res", "show", "cq"), dev, "cqn", q.CQN.Value)
		if diff := cmp.Diff(want, map[string]any(got)); diff != "" {
			t.Errorf("CQ %d (-rdma +rdmactl):\n%s", q.CQN.Value, diff)
		}
		if q.Users != 2 {
			t.Errorf("CQ users %d, want 2 (the QP's send and receive queues)", q.Users)
		}
	}

	mrs, err := c.MRs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mrs {
		if !m.LKey.Valid || m.LKey.Value != mr.LKey() {
			continue
		}
		found++
		got := base(m.DevIndex, m.Device)
		got.num("mrn", m.MRN.Value, m.MRN.Valid)
		got.hex("rkey", m.RKey.Value, m.RKey.Valid)
		got.hex("lkey", m.LKey.Value, m.LKey.Valid)
		if m.IOVA.Valid {
			got["iova"] = fmt.Sprintf("%x", m.IOVA.Value)
		}
		got["mrlen"] = float64(m.Length)
		got.num("pdn", m.PDN.Value, m.PDN.Valid)
		got.owner(m.Owner)
		want := find(t, rdmaJSON(t, "res", "show", "mr"), dev, "mrn", m.MRN.Value)
		if diff := cmp.Diff(want, map[string]any(got)); diff != "" {
			t.Errorf("MR %d (-rdma +rdmactl):\n%s", m.MRN.Value, diff)
		}
		if m.Length != 4096 || m.RKey.Value != mr.RKey() {
			t.Errorf("MR %+v: want 4096 bytes and rkey %#x", m, mr.RKey())
		}
	}

	pds, err := c.PDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pds {
		if !ours(p.Owner.PID) || p.Owner.Kernel || p.Users == 0 {
			continue
		}
		found++
		got := base(p.DevIndex, p.Device)
		got.num("pdn", p.PDN.Value, p.PDN.Valid)
		got.hex("local_dma_lkey", p.LocalDMALKey.Value, p.LocalDMALKey.Valid)
		got["users"] = float64(p.Users)
		got.hex("unsafe_global_rkey", p.UnsafeGlobalRKey.Value, p.UnsafeGlobalRKey.Valid)
		got.num("ctxn", p.CtxN.Value, p.CtxN.Valid)
		got.owner(p.Owner)
		want := find(t, rdmaJSON(t, "res", "show", "pd"), dev, "pdn", p.PDN.Value)
		if diff := cmp.Diff(want, map[string]any(got)); diff != "" {
			t.Errorf("PD %d (-rdma +rdmactl):\n%s", p.PDN.Value, diff)
		}
	}

	ids, err := c.CMIDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ids {
		if !ours(x.Owner.PID) || x.Owner.Kernel || x.State != rdmactl.CMListen {
			continue
		}
		found++
		got := base(x.DevIndex, x.Device)
		got.num("port", x.Port.Value, x.Port.Valid)
		got.num("cm-idn", x.CMIDN.Value, x.CMIDN.Valid)
		got.num("lqpn", x.QPNum.Value, x.QPNum.Valid)
		if x.QPType.Valid {
			got["qp-type"] = x.QPType.Value.String()
		}
		got["state"], got["ps"] = x.State.String(), x.PS.String()
		got.owner(x.Owner)
		if x.Src.Valid {
			got["src-addr"] = fmt.Sprintf("%v:%d", x.Src.Value.Addr(), x.Src.Value.Port())
		}
		if x.Dst.Valid {
			got["dst-addr"] = fmt.Sprintf("%v:%d", x.Dst.Value.Addr(), x.Dst.Value.Port())
		}
		want := find(t, rdmaJSON(t, "res", "show", "cm_id"), dev, "cm-idn", x.CMIDN.Value)
		if diff := cmp.Diff(want, map[string]any(got)); diff != "" {
			t.Errorf("cm_id %d (-rdma +rdmactl):\n%s", x.CMIDN.Value, diff)
		}
		if x.Src.Value.Addr() != addr {
			t.Errorf("cm_id bound to %v, want %v", x.Src.Value, addr)
		}
	}
	if found != 5 {
		t.Errorf("found %d of this process's 5 objects (QP, CQ, MR, PD, cm_id)", found)
	}

	sums, err := c.Resources(dev)
	if err != nil {
		t.Fatal(err)
	}
	rdmaSum := rdmaJSON(t, "res", "show", dev)
	got := base(sums[0].DevIndex, sums[0].Device)
	for _, n := range sums[0].Counts {
		got[n.Name] = float64(n.Current)
	}
	if diff := cmp.Diff(rdmaSum[0], map[string]any(got)); diff != "" {
		t.Errorf("summary of %s (-rdma +rdmactl):\n%s", dev, diff)
	}
}

// TestCountersMatchRdma reads rxe0/1's counters around rdma's read of
// them: the same names, and rdma's values between the API's two reads.
func TestCountersMatchRdma(t *testing.T) {
	testenv.Devices(t, 2)
	c, err := rdmactl.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	link := testenv.RXE.Devs[0] + "/1"
	before, err := c.Counters(testenv.RXE.Devs[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	rdma := rdmaJSON(t, "statistic", "show", "link", link)[0]
	after, err := c.Counters(testenv.RXE.Devs[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if rdma["ifname"] != before.Device || rdma["port"] != float64(before.Port) || len(rdma) != len(before.Counters)+2 {
		t.Errorf("rdma %v, rdmactl %+v", rdma, before)
	}
	for i, ct := range before.Counters {
		v, ok := rdma[ct.Name].(float64)
		if !ok || after.Counters[i].Name != ct.Name {
			t.Errorf("%s: rdma has %v, the second read %q", ct.Name, rdma[ct.Name], after.Counters[i].Name)
			continue
		}
		if float64(ct.Value) > v || v > float64(after.Counters[i].Value) {
			t.Errorf("%s: rdma read %v between rdmactl's %d and %d", ct.Name, v, ct.Value, after.Counters[i].Value)
		}
	}
	// siw keeps no counters.
	if _, err := c.Counters(testenv.SIW.Devs[0], 1); err == nil {
		t.Errorf("Counters(%s/1) succeeded; siw keeps no hardware counters", testenv.SIW.Devs[0])
	} else if !strings.Contains(err.Error(), "no hardware counters") {
		t.Errorf("Counters(%s/1) = %v; want ErrNoCounters", testenv.SIW.Devs[0], err)
	}
}
