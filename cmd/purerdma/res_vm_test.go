package main

import (
	"encoding/json"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// resObjects makes one object of each kind on the server device of the
// VM's rxe pair: a PD, a CQ, an MR, a QP (uverbs) and a listening
// rdma_cm ID.
func resObjects(t *testing.T) {
	t.Helper()
	testenv.Devices(t, 2)
	f := testenv.RXE
	ctx, err := uverbs.Open(f.Devs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(uverbs.CQConfig{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	_, err = pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.Close() })
	if err := id.Bind(netip.AddrPortFrom(f.Addrs[0], 0)); err != nil {
		t.Fatal(err)
	}
	if err := id.Listen(1); err != nil {
		t.Fatal(err)
	}
}

// rdmaJSON runs iproute2's rdma with -j and decodes its array. rdma may
// fail after printing (statistic show stops at a device without
// counters), so its stdout counts when it holds JSON.
func rdmaJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, err := exec.Command("rdma", append([]string{"-j"}, args...)...).Output()
	var v []map[string]any
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		t.Fatalf("rdma -j %s: %v, output %q: %v", strings.Join(args, " "), err, out, jerr)
	}
	return v
}

// purerdmaJSON runs purerdma in this process and decodes its array.
func purerdmaJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	code, stdout, stderr := runArgs(args...)
	if code != 0 {
		t.Fatalf("purerdma %s = %d: %s", strings.Join(args, " "), code, stderr)
	}
	var v []map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("purerdma %s printed %q: %v", strings.Join(args, " "), stdout, err)
	}
	return v
}

// TestResMatchesRdma compares "purerdma res -json OBJECT" with "rdma -j
// res show OBJECT", key for key and value for value, on objects this
// process made (and the kernel's own), on the kernel the VM runs. Nothing
// moves between the two reads: no traffic runs, so even the PSNs hold.
func TestResMatchesRdma(t *testing.T) {
	resObjects(t)
	for _, obj := range []string{"", "qp", "cq", "mr", "pd", "cm_id", "ctx"} {
		t.Run("object="+obj, func(t *testing.T) {
			args := []string{"res", "show"}
			if obj != "" {
				args = append(args, obj)
			}
			want := rdmaJSON(t, args[0:]...)
			got := purerdmaJSON(t, append([]string{"res", "-json"}, args[2:]...)...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rdma -j res show %s vs purerdma res -json (-rdma +purerdma):\n%s", obj, diff)
			}
			if obj != "" && obj != "ctx" && !mine(got) {
				t.Errorf("purerdma res %s lists none of this process's objects: %v", obj, got)
			}
		})
	}
	// The text, too, is rdma's.
	for _, obj := range []string{"", "qp", "cq", "mr", "pd", "cm_id", "ctx"} {
		args := []string{"res", "show"}
		if obj != "" {
			args = append(args, obj)
		}
		want, err := exec.Command("rdma", args...).Output()
		if err != nil {
			t.Fatalf("rdma %s: %v", strings.Join(args, " "), err)
		}
		code, got, stderr := runArgs(append([]string{"res"}, args[2:]...)...)
		if code != 0 {
			t.Fatalf("purerdma res %s = %d: %s", obj, code, stderr)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("rdma res show %s vs purerdma res %s (-rdma +purerdma):\n%s", obj, obj, diff)
		}
	}
}

// mine reports whether a listing holds an object of this process.
func mine(objs []map[string]any) bool {
	for _, o := range objs {
		if comm, _ := o["comm"].(string); comm != "" && o["pid"] != nil && comm != "ib_core" {
			return true
		}
	}
	return false
}

// TestStatMatchesRdma compares "purerdma stat -json" with "rdma -j
// statistic show link" on each rxe port while traffic may run: the same
// ports and counter names in the same order, and each of rdma's values
// between purerdma's reads before and after it (counters only grow).
func TestStatMatchesRdma(t *testing.T) {
	testenv.Devices(t, 2)
	for _, dev := range testenv.RXE.Devs {
		link := dev + "/1"
		before := purerdmaJSON(t, "stat", "-json", link)
		rdma := rdmaJSON(t, "statistic", "show", "link", link)
		after := purerdmaJSON(t, "stat", "-json", "link", link)
		if len(rdma) != 1 || len(before) != 1 || len(after) != 1 {
			t.Fatalf("%s: %d, %d and %d ports", link, len(before), len(rdma), len(after))
		}
		var keys []string
		for k := range rdma[0] {
			keys = append(keys, k)
		}
		for _, k := range keys {
			lo, lok := before[0][k]
			hi, hok := after[0][k]
			if !lok || !hok {
				t.Errorf("%s: rdma has %q, purerdma not", link, k)
				continue
			}
			switch v := rdma[0][k].(type) {
			case float64:
				if lo.(float64) > v || v > hi.(float64) {
					t.Errorf("%s %s: rdma read %v between purerdma's %v and %v", link, k, v, lo, hi)
				}
			default:
				if lo != v || hi != v {
					t.Errorf("%s %s: rdma %v, purerdma %v and %v", link, k, v, lo, hi)
				}
			}
		}
		if len(before[0]) != len(rdma[0]) {
			t.Errorf("%s: purerdma prints %d keys, rdma %d", link, len(before[0]), len(rdma[0]))
		}
	}
	// Every device: the ports with counters, in rdma's order (rdma stops
	// at the first siw device; purerdma leaves siw out).
	all := purerdmaJSON(t, "stat", "-json")
	rdma := rdmaJSON(t, "statistic", "show")
	if len(all) != len(rdma) {
		t.Fatalf("purerdma stat lists %d ports, rdma %d", len(all), len(rdma))
	}
	for i := range rdma {
		if all[i]["ifname"] != rdma[i]["ifname"] || all[i]["port"] != rdma[i]["port"] {
			t.Errorf("port %d: purerdma %v/%v, rdma %v/%v", i, all[i]["ifname"], all[i]["port"], rdma[i]["ifname"], rdma[i]["port"])
		}
	}
}
