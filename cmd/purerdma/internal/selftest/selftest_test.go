package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
)

func TestParseSelftestArgs(t *testing.T) {
	def := cmdline{Options: Options{Port: 1, GIDIndex: -1, Iters: DefaultIters}}
	for _, tt := range []struct {
		args []string
		want cmdline
	}{
		{nil, def},
		{[]string{"-d", "mlx5_0"}, cmdline{Options: Options{Dev: "mlx5_0", Port: 1, GIDIndex: -1, Iters: DefaultIters}}},
		{[]string{"-i", "2", "-g", "3"}, cmdline{Options: Options{Port: 2, GIDIndex: 3, Iters: DefaultIters}}},
		{[]string{"-g", "0"}, cmdline{Options: Options{Port: 1, GIDIndex: 0, Iters: DefaultIters}}},
		{[]string{"-iters", "5", "-json"}, cmdline{Options: Options{Port: 1, GIDIndex: -1, Iters: 5}, json: true}},
		{[]string{"--json", "--d=rxe1", "-iters=100000"}, cmdline{Options: Options{Dev: "rxe1", Port: 1, GIDIndex: -1, Iters: 100000}, json: true}},
	} {
		got, err := parseArgs(tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q = %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

// TestSelftestUsage: a bad command line exits 2 with a message naming
// the problem, before any device is touched.
func TestSelftestUsage(t *testing.T) {
	devstest.UseDevices(t, nil, nil) // a device lookup would fail with status 1
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-x"}, "purerdma: selftest: flag provided but not defined: -x"},
		{[]string{"rxe0"}, `purerdma: selftest takes no arguments but flags, not ["rxe0"]`},
		{[]string{"-i", "0"}, "purerdma: selftest: -i 0: the port is 1 to 255"},
		{[]string{"-i", "256"}, "purerdma: selftest: -i 256: the port is 1 to 255"},
		{[]string{"-g", "-2"}, "purerdma: selftest: -g -2: the GID index is 0 to 255"},
		{[]string{"-g", "256"}, "purerdma: selftest: -g 256: the GID index is 0 to 255"},
		{[]string{"-iters", "0"}, "purerdma: selftest: -iters 0: 1 to 67108864"},
		{[]string{"-iters", "x"}, `purerdma: selftest: invalid value "x" for flag -iters: parse error`},
		{[]string{"-d"}, "purerdma: selftest: flag needs an argument: -d"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(append([]string{"selftest"}, tt.args...)...)
			if code != 2 || stdout != "" || stderr != tt.msg+"\n"+usage() {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, %q and the usage", code, stdout, stderr, tt.msg)
			}
		})
	}
}

// TestSelftestHelp: -h anywhere prints the help, which documents every
// flag and the JSON fields and has examples.
func TestSelftestHelp(t *testing.T) {
	for _, args := range [][]string{{"selftest", "-h"}, {"selftest", "-d", "rxe0", "-h"}, {"help", "selftest"}} {
		code, stdout, stderr := runArgs(args...)
		if code != 0 || stderr != "" || stdout != Command.HelpText() {
			t.Errorf("%q = %d, stdout %q, stderr %q; want 0 and the help", args, code, stdout, stderr)
		}
	}
	help := Command.HelpText()
	for _, want := range []string{"-d DEV", "-i PORT", "-g GIDIDX", "-iters N", "-json", "n/a", "Examples:\n  purerdma selftest\n",
		`"device", "driver", "provider", "kernel", "port", "gid_index"`, `"gid", "gid_type", "link_layer", "connect", "rows": [{"name", "result"`,
		`"passed", "failed", "not_applicable"`} {
		if !strings.Contains(help, want) {
			t.Errorf("the help lacks %q:\n%s", want, help)
		}
	}
	if !strings.Contains(usage(), "\n  selftest [-d DEV]") {
		t.Errorf("the usage does not list selftest:\n%s", usage())
	}
}

// TestSelftestWithoutDevices: no device, or a name that is not one,
// fails at once with status 1 and what there is.
func TestSelftestWithoutDevices(t *testing.T) {
	devstest.UseDevices(t, nil, nil)
	dir := devstest.UseDir(t, false)
	clitest.RunChecked(t, runContext, []string{"selftest"}, "purerdma: selftest: no RDMA device: "+dir+" does not exist")
	devstest.UseDevices(t, devstest.Rxe, devstest.RxeAddrs)
	clitest.RunChecked(t, runContext, []string{"selftest", "-d", "nosuch"}, `purerdma: selftest: no RDMA device named "nosuch"; the RDMA devices here: `+devstest.RxeList+"\n")
}

// fakeChecks are checks that touch no device: one of each outcome.
func fakeChecks(closed *[]string) []Check {
	closer := func(name string, err error) func() error {
		return func() error { *closed = append(*closed, name); return err }
	}
	return []Check{
		{"passes", func(r *Case) (string, error) {
			r.onClose(closer("first", nil))
			r.onClose(closer("second", nil))
			return "it worked", nil
		}},
		{"fails", func(*Case) (string, error) { return "", errors.New("wrong data") }},
		{"does not apply", func(*Case) (string, error) { return "", stNA("the device has no %s", "atomics") }},
		{"panics", func(*Case) (string, error) { panic("boom") }},
		{"fails to close", func(r *Case) (string, error) {
			r.onClose(closer("bad", errors.New("EBUSY")))
			return "fine until the close", nil
		}},
	}
}

// TestSelftestRows: each outcome becomes its row, objects close newest
// first, a panic or a failed close fails the row, and n/a is no pass.
func TestSelftestRows(t *testing.T) {
	var closed []string
	env := &Env{report: Report{Device: "fake0", Rows: []Row{}}}
	rep := env.Run(context.Background(), fakeChecks(&closed))
	var got []Row
	for _, r := range rep.Rows {
		r.USec = 0
		got = append(got, r)
	}
	want := []Row{
		{Name: "passes", Result: "pass", Detail: "it worked"},
		{Name: "fails", Result: "fail", Detail: "wrong data"},
		{Name: "does not apply", Result: "n/a", Detail: "the device has no atomics"},
		{Name: "panics", Result: "fail", Detail: "panic: boom"},
		{Name: "fails to close", Result: "fail", Detail: "closing the check's objects: EBUSY"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if rep.Passed != 1 || rep.Failed != 3 || rep.NotApplicable != 1 {
		t.Errorf("counts %d passed, %d failed, %d n/a; want 1, 3, 1", rep.Passed, rep.Failed, rep.NotApplicable)
	}
	if diff := cmp.Diff([]string{"second", "first", "bad"}, closed); diff != "" {
		t.Errorf("close order (-want +got):\n%s", diff)
	}

	// An interrupt stops the run before the next check.
	ctx, cancel := context.WithCancel(context.Background())
	stop := []Check{{"cancels", func(*Case) (string, error) { cancel(); return "ok", nil }},
		{"never runs", func(*Case) (string, error) { t.Error("a check ran after the interrupt"); return "", nil }}}
	rep = (&Env{}).Run(ctx, stop)
	if len(rep.Rows) != 1 {
		t.Errorf("%d rows after an interrupt in the first, want 1", len(rep.Rows))
	}
	if err := output(ctx, rep, false, new(bytes.Buffer)); !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted run: %v, want context.Canceled", err)
	}
}

// TestSelftestExitStatus: the command fails (status 1) when any row
// failed or none passed; n/a rows next to passes are fine.
func TestSelftestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		results []string
		err     string // "" for success
	}{
		{[]string{"pass", "pass"}, ""},
		{[]string{"pass", "n/a"}, ""},
		{[]string{"pass", "fail", "n/a"}, "selftest: fake0: 1 of 2 checks failed"},
		{[]string{"n/a", "n/a"}, "selftest: fake0: no check applies"},
		{nil, "selftest: fake0: no check applies"},
	} {
		rep := &Report{Device: "fake0", Rows: []Row{}}
		for i, res := range tt.results {
			rep.add(Row{Name: string(rune('a' + i)), Result: res})
		}
		err := output(context.Background(), rep, false, new(bytes.Buffer))
		if (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
			t.Errorf("%v: %v, want %q", tt.results, err, tt.err)
		}
	}
}

// TestSelftestJSON: -json's document has exactly the documented keys.
func TestSelftestJSON(t *testing.T) {
	rep := &Report{Device: "mlx5_0", Driver: "mlx5_core", Provider: "mlx5 (purerdma, in Go)", Kernel: "6.12.0",
		Port: 1, GIDIndex: 3, GID: "::ffff:10.0.0.1", LinkLayer: "Ethernet", Rows: []Row{}}
	rep.add(Row{Name: "rc send/recv", Result: "pass", Detail: "ok", USec: 12})
	rep.add(Row{Name: "rc fetch-and-add", Result: "n/a", Detail: "no atomics", USec: 1})
	var out bytes.Buffer
	if err := output(context.Background(), rep, true, &out); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out.String())
	}
	wantKeys := []string{"connect", "device", "driver", "failed", "gid", "gid_index", "gid_type", "kernel", "link_layer", "not_applicable",
		"passed", "port", "provider", "rows"}
	if diff := cmp.Diff(wantKeys, keys(doc)); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	rows, _ := doc["rows"].([]any)
	if len(rows) != 2 {
		t.Fatalf("rows %v", doc["rows"])
	}
	row0, _ := rows[0].(map[string]any)
	if diff := cmp.Diff([]string{"detail", "name", "result", "usec"}, keys(row0)); diff != "" {
		t.Errorf("row keys (-want +got):\n%s", diff)
	}
	if row0["result"] != "pass" || row0["usec"] != 12.0 || doc["passed"] != 1.0 || doc["not_applicable"] != 1.0 ||
		doc["failed"] != 0.0 || doc["gid_index"] != 3.0 || doc["device"] != "mlx5_0" {
		t.Errorf("values: %s", out.String())
	}
}

func keys(m map[string]any) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// TestSelftestText: the header names the device, the table has a line
// per row, the summary counts them.
func TestSelftestTextFormat(t *testing.T) {
	rep := &Report{Device: "ib0", Driver: "mlx5_core", Provider: "p", Kernel: "6.1.0", Port: 1, GIDIndex: -1,
		LinkLayer: "InfiniBand", Connect: "QP modify", Rows: []Row{}}
	rep.add(Row{Name: "rc send/recv", Result: "pass", Detail: "ok", USec: 12})
	rep.add(Row{Name: "srq", Result: "fail", Detail: "lost", USec: 5000000})
	rep.add(Row{Name: "ud send", Result: "n/a", Detail: "no UD", USec: 1})
	var out bytes.Buffer
	rep.writeText(&out)
	want := `device      ib0
driver      mlx5_core
provider    p
kernel      6.1.0
port        1
gid         none: LID routing
link layer  InfiniBand
connect     QP modify

check         result        usec  detail
rc send/recv  pass            12  ok
srq           fail       5000000  lost
ud send       n/a              1  no UD

1 passed, 1 failed, 1 n/a
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
}
