package selftest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/selftest/selftesttest"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// runSelftestJSON runs selftest -json with args and decodes its report.
func runSelftestJSON(t *testing.T, args ...string) (int, Report, string) {
	t.Helper()
	code, stdout, stderr := runArgs(append([]string{"selftest", "-json"}, args...)...)
	var rep Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("selftest %q: exit %d, stdout is no report (%v):\n%s\nstderr: %s", args, code, err, stdout, stderr)
	}
	return code, rep, stderr
}

func rowNames(rep Report) []string {
	var names []string
	for _, r := range rep.Rows {
		names = append(names, r.Name)
	}
	return names
}

// TestSelftestPasses runs every check on each device of the fabric under
// test (PURERDMA_FABRIC). On soft-RoCE every row must pass: rxe has every
// operation. On soft-iWARP, whose QPs selftest connects through the
// rdma_cm, every row passes but exactly those of selftesttest.IWARPNA, which
// are n/a with their reasons. The header describes the device.
func TestSelftestPasses(t *testing.T) {
	f := testenv.NeedFabric(t)
	for i, dev := range f.Devs {
		t.Run(dev, func(t *testing.T) {
			code, rep, stderr := runSelftestJSON(t, "-d", dev)
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if diff := cmp.Diff(selftesttest.RowNames, rowNames(rep)); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			wantNA := 0
			for _, r := range rep.Rows {
				t.Logf("%-24s %-4s %8d us  %s", r.Name, r.Result, r.USec, r.Detail)
				why, na := selftesttest.IWARPNA[r.Name]
				na = na && f.IWARP
				switch {
				case na && (r.Result != NA || !strings.Contains(r.Detail, why)):
					t.Errorf("%s: %s %q; want n/a with a reason that says %q", r.Name, r.Result, r.Detail, why)
				case !na && r.Result != Pass:
					t.Errorf("%s: %s: %s", r.Name, r.Result, r.Detail)
				}
				if na {
					wantNA++
				}
			}
			if wantPass := len(selftesttest.RowNames) - wantNA; rep.Passed != wantPass || rep.Failed != 0 || rep.NotApplicable != wantNA {
				t.Errorf("counts: %d passed, %d failed, %d n/a; want %d, 0, %d", rep.Passed, rep.Failed, rep.NotApplicable, wantPass, wantNA)
			}
			driver, connect := "rxe", "QP modify (INIT, RTR, RTS) to the port's own address"
			if f.IWARP {
				driver, connect = "siw", fmt.Sprintf("rdma_cm, %v to itself", f.Addrs[i])
			}
			if rep.Device != dev || rep.Driver != driver || !strings.HasPrefix(rep.Provider, driver+" ") ||
				rep.Port != 1 || rep.LinkLayer != "Ethernet" || rep.Connect != connect || rep.Kernel == "" || rep.Kernel == "unknown" {
				t.Errorf("header %+v", rep)
			}
			if !f.IWARP && (rep.GIDIndex < 0 || rep.GIDType != "RoCE v2" || !strings.HasPrefix(rep.GID, "::ffff:198.18.0.")) {
				t.Errorf("GID: index %d, %s (%s); want the RoCE v2 GID of the veth's address", rep.GIDIndex, rep.GID, rep.GIDType)
			}
		})
	}
}

// TestSelftestText: the table has a line per row and the summary.
func TestSelftestText(t *testing.T) {
	testenv.Device(t)
	code, stdout, stderr := runArgs("selftest", "-d", "rxe0", "-iters", "100")
	if code != 0 || stderr != "" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"device      rxe0\n", "driver      rxe\n", "link layer  Ethernet\n",
		"20 passed, 0 failed, 0 n/a\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, name := range selftesttest.RowNames {
		if !slices.ContainsFunc(strings.Split(stdout, "\n"), func(l string) bool {
			return strings.HasPrefix(l, name+" ") && strings.Contains(l, " pass ")
		}) {
			t.Errorf("no passing line for %q:\n%s", name, stdout)
		}
	}
}

// TestSelftestFailsOnWrongData runs the real checks on the fabric's
// first device with a tamper hook that changes one byte of what the
// check is about to compare, in one row at a time: that row must fail
// naming the data, the others pass (or are n/a on iWARP, as in
// TestSelftestPasses), and the command exits 1.
func TestSelftestFailsOnWrongData(t *testing.T) {
	f := testenv.NeedFabric(t)
	dev := f.Devs[0]
	for _, row := range []string{"rc send/recv", "rc rdma read", "rc compare-and-swap", "rc ring wrap", "cq resize", "srq", "send queue full"} {
		t.Run(row, func(t *testing.T) {
			if _, na := selftesttest.IWARPNA[row]; na {
				testenv.NotIWARP(t, "the row is n/a on iWARP (TestSelftestPasses)")
			}
			tamper = func(check string, got []byte) {
				if check == row && len(got) > 0 {
					got[len(got)-1] ^= 0x40
				}
			}
			defer func() { tamper = nil }()
			wantNA := 0
			if f.IWARP {
				wantNA = len(selftesttest.IWARPNA)
			}
			wantPass := len(selftesttest.RowNames) - wantNA - 1
			code, rep, stderr := runSelftestJSON(t, "-d", dev, "-iters", "100")
			if msg := fmt.Sprintf("selftest: %s: 1 of %d checks failed", dev, wantPass+1); code != 1 || !strings.Contains(stderr, msg) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, msg)
			}
			if rep.Failed != 1 || rep.Passed != wantPass || rep.NotApplicable != wantNA {
				t.Errorf("%d passed, %d failed, %d n/a; want %d, 1, %d", rep.Passed, rep.Failed, rep.NotApplicable, wantPass, wantNA)
			}
			for _, r := range rep.Rows {
				_, na := selftesttest.IWARPNA[r.Name]
				na = na && f.IWARP
				switch {
				case r.Name == row && (r.Result != Fail || !strings.Contains(r.Detail, "differ") && !strings.Contains(r.Detail, "no message that was sent")):
					t.Errorf("%s with a changed byte: %s %q, want a fail naming the bytes", r.Name, r.Result, r.Detail)
				case r.Name != row && na && r.Result != NA:
					t.Errorf("%s: %s %q, want n/a", r.Name, r.Result, r.Detail)
				case r.Name != row && !na && r.Result != Pass:
					t.Errorf("%s: %s %q", r.Name, r.Result, r.Detail)
				}
			}
		})
	}
}

// TestSelftestLostCompletion: a check that waits for a completion that
// never comes, as a broken provider would lose one, fails its row after
// the wait's bound instead of hanging, and the next row still runs. It
// drives the suite directly (Open, Env.Run) with a check of its own. On
// RoCE the lost completion is a send's that finds no receive (it waits,
// receiver not ready); iWARP has no such wait (the send ends the
// connection), so on iWARP it is a receive's that nothing is sent to.
func TestSelftestLostCompletion(t *testing.T) {
	f := testenv.NeedFabric(t)
	oldWait := pollWait
	defer func() { pollWait = oldWait }()
	pollWait = 200 * time.Millisecond
	what := "send"
	if f.IWARP {
		what = "recv"
	}
	checks := []Check{
		{"lost completion", func(r *Case) (string, error) {
			a, b, err := r.rcPair()
			if err != nil {
				return "", err
			}
			if f.IWARP {
				if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 1, SGL: []uverbs.SGE{b.sge(0, 8)}}); err != nil {
					return "", err
				}
				_, err = r.poll1(b.rcq, what)
				return "", err
			}
			// A send without a receive on the other side: it waits
			// (receiver not ready) and never completes.
			if err := a.qp.PostSend(&uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}}); err != nil {
				return "", err
			}
			_, err = r.poll1(a.scq, what)
			return "", err
		}},
		Checks[0],
	}
	env, err := Open(Options{Dev: f.Devs[0], Port: 1, GIDIndex: -1, Iters: DefaultIters})
	if err != nil {
		t.Fatal(err)
	}
	rep := env.Run(context.Background(), checks)
	if err := env.Close(); err != nil {
		t.Error(err)
	}
	err = output(context.Background(), rep, false, io.Discard)
	if want := fmt.Sprintf("selftest: %s: 1 of 2 checks failed", f.Devs[0]); err == nil || err.Error() != want || len(rep.Rows) != 2 {
		t.Fatalf("%v, rows %+v; want %q and two rows", err, rep.Rows, want)
	}
	if r, want := rep.Rows[0], what+": 0 of 1 completions, then none for 200ms"; r.Result != Fail || r.Detail != want {
		t.Errorf("lost completion: %s %q, want fail %q", r.Result, r.Detail, want)
	}
	if r := rep.Rows[1]; r.Result != Pass {
		t.Errorf("the row after it: %s %q", r.Result, r.Detail)
	}
}
