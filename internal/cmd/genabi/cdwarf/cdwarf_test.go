package cdwarf

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// testConfig compiles testdata/probe/probe.h, or skips without gcc
// (unless PURERDMA_REQUIRE_DEVICE or PURERDMA_TEST_ABI say it must run).
func testConfig(t *testing.T) Config {
	t.Helper()
	testutils.HostOnly(t)
	cfg := Config{IncludeDirs: []string{"testdata"}, Headers: []string{"probe/probe.h"}}
	if err := cfg.Available(); err != nil {
		testutils.NeedTool(t, "PURERDMA_TEST_ABI", err)
	}
	return cfg
}

func TestScanDefines(t *testing.T) {
	cfg := testConfig(t)
	defs, err := ScanDefines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range defs {
		got = append(got, d.Name+"="+d.Body)
	}
	want := []string{
		"PROBE_PLAIN=42",
		"PROBE_HEX=0x80000000u",
		"PROBE_SHIFT=(1UL << 40)",
		"PROBE_NEG=(-5)",
		"PROBE_MULTI=(PROBE_PLAIN + 1)",
		`PROBE_STRING="not a number"`,
		"PROBE_FLOAT=1.5",
		"PROBE_TYPE=struct probe_plain",
		"PROBE_UNDEFINED_REF=NO_SUCH_NAME",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScanDefines (-want +got):\n%s", diff)
	}
	if defs[4].Line != 11 {
		t.Errorf("PROBE_MULTI on line %d, want 11", defs[4].Line)
	}
}

func TestEval(t *testing.T) {
	cfg := testConfig(t)
	defs, err := ScanDefines(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []Expr
	for _, d := range defs {
		exprs = append(exprs, Expr{Name: d.Name, C: d.Name})
	}
	exprs = append(exprs,
		Expr{Name: "PROBE_F_BIG", C: "PROBE_F_BIG"},
		Expr{Name: "PROBE_S_NEG", C: "PROBE_S_NEG"},
		Expr{Name: "sizeof packed", C: "sizeof(struct probe_packed)"},
	)
	vals, rejected, err := Eval(cfg, exprs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Value{
		"PROBE_PLAIN":   {Abs: 42},
		"PROBE_HEX":     {Abs: 0x80000000},
		"PROBE_SHIFT":   {Abs: 1 << 40},
		"PROBE_NEG":     {Abs: 5, Neg: true},
		"PROBE_MULTI":   {Abs: 43},
		"PROBE_F_BIG":   {Abs: 1 << 63},
		"PROBE_S_NEG":   {Abs: 2, Neg: true},
		"sizeof packed": {Abs: 11},
	}
	if diff := cmp.Diff(want, vals); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	wantRejected := []string{"PROBE_STRING", "PROBE_FLOAT", "PROBE_TYPE", "PROBE_UNDEFINED_REF"}
	if diff := cmp.Diff(wantRejected, rejected); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
}

// layoutOf describes the members of a type: name@offset:size, and
// name@bitoffset+bits for bitfields.
func layoutOf(t *Type) string {
	var parts []string
	for i, m := range t.Members {
		name := m.Name
		if name == "" {
			name = "#" + string(rune('0'+i))
		}
		if m.BitSize > 0 {
			parts = append(parts, name+"@b"+itoa(m.BitOffset)+"+"+itoa(m.BitSize))
		} else {
			parts = append(parts, name+"@"+itoa(m.Offset)+":"+itoa(m.Type.Size))
		}
	}
	return strings.Join(parts, " ")
}

func itoa(i int64) string { return Value{Abs: uint64(i)}.String() }

func TestLayout(t *testing.T) {
	cfg := testConfig(t)
	p, err := Layout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path         string
		size, align  int64
		packed       bool
		layout       string
		memberOfPath string // CName of the type at the path
	}{
		{"struct probe_plain", 40, 8, false, "a@0:1 b@4:4 c@8:8 d@16:2 e@18:6 ptr@24:8 s@32:4", "struct probe_plain"},
		{"struct probe_bits", 12, 4, false, "x@0:4 lo@b32+3 mid@b35+5 hi@b40+24 after@8:2", "struct probe_bits"},
		{"struct probe_packed", 11, 1, true, "a@0:1 b@1:8 c@9:2", "struct probe_packed"},
		{"struct probe_anon", 24, 8, false, "kind@0:4 u@8:8 #2@16:4 tail@24:0", "struct probe_anon"},
		{"struct probe_anon.u", 8, 8, false, "pair@0:8 whole@0:8", "union <anonymous>"},
		{"struct probe_anon.u.pair", 8, 4, false, "x@0:4 y@4:4", "struct <anonymous>"},
		{"struct probe_anon.#2", 4, 4, false, "alias_a@0:4 alias_b@0:4", "union <anonymous>"},
		{"struct probe_flexunion", 8, 8, false, "n@0:4 #1@8:0", "struct probe_flexunion"},
		{"struct probe_zero", 4, 4, false, "n@0:4 data@4:0", "struct probe_zero"},
	}
	for _, tt := range tests {
		typ, _, err := p.Lookup(tt.path)
		if err != nil {
			t.Errorf("%s: %v", tt.path, err)
			continue
		}
		if typ.Size != tt.size || typ.Align != tt.align || typ.Packed != tt.packed {
			t.Errorf("%s: size %d align %d packed %v, want %d %d %v", tt.path, typ.Size, typ.Align, typ.Packed, tt.size, tt.align, tt.packed)
		}
		if got := layoutOf(typ); got != tt.layout {
			t.Errorf("%s: layout\n got %s\nwant %s", tt.path, got, tt.layout)
		}
		if got := typ.CName(); got != tt.memberOfPath {
			t.Errorf("%s: CName %q, want %q", tt.path, got, tt.memberOfPath)
		}
		if !strings.HasSuffix(typ.File, "probe/probe.h") {
			t.Errorf("%s: declared in %q", tt.path, typ.File)
		}
	}

	plain := p.Named("struct probe_plain")
	kinds := map[string]string{}
	for _, m := range plain.Members {
		kinds[m.Name] = m.Type.CName()
	}
	wantKinds := map[string]string{"a": "__u8", "b": "__u32", "c": "__u64", "d": "__be16", "e": "__u8[3][2]", "ptr": "void *", "s": "enum probe_signed"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("probe_plain member types (-want +got):\n%s", diff)
	}
	if c := plain.Members[2]; c.Align != 8 {
		t.Errorf("__aligned_u64 member has alignment %d, want 8", c.Align)
	}
	if d := plain.Members[3].Type; d.Kind != Typedef || !strings.Contains(d.Resolve().Name, "short") {
		t.Errorf("__be16 resolves to %s", d.Resolve().CName())
	}

	flags := p.Named("enum probe_flags")
	if flags == nil || flags.Signed || len(flags.Enumerators) != 3 || uint64(flags.Enumerators[2].Value) != 1<<63 {
		t.Errorf("enum probe_flags: %+v", flags)
	}
	signed := p.Named("enum probe_signed")
	if signed == nil || !signed.Signed || signed.Enumerators[0].Value != -2 {
		t.Errorf("enum probe_signed: %+v", signed)
	}

	if _, _, err := p.Lookup("struct probe_plain.nope"); err == nil {
		t.Error("Lookup of a missing member succeeded")
	}
	if _, _, err := p.Lookup("struct nope"); err == nil {
		t.Error("Lookup of a missing type succeeded")
	}
}

func TestStripComments(t *testing.T) {
	in := "a /* x\ny */ b // c\n\"/* s */\" '/'\n"
	want := "a  \n b \n\"/* s */\" '/'\n"
	if got := stripComments(in); got != want {
		t.Errorf("stripComments(%q) = %q, want %q", in, got, want)
	}
}

func TestAvailable(t *testing.T) {
	cfg := Config{CC: "no-such-compiler-here"}
	if err := cfg.Available(); err == nil {
		t.Error("Available with a missing compiler succeeded")
	}
	cfg = Config{Headers: []string{"no/such/header.h"}}
	if err := cfg.Available(); err == nil || !strings.Contains(err.Error(), "no/such/header.h") {
		t.Errorf("Available with a missing header: %v", err)
	}
}
