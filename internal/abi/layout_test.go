//go:build amd64 || arm64

package abi

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/purerdma/rdma/internal/cmd/genabi/abigen"
	"github.com/purerdma/rdma/internal/cmd/genabi/cdwarf"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// The table types of zlayout_test.go.
type (
	cKind int

	// cType pairs a Go type with the C type at path C (a cdwarf
	// Program.Lookup path).
	cType struct {
		C    string
		Go   reflect.Type
		Kind cKind
		// Fields are the Go fields of a struct, or the accessor
		// methods of a union, with the C member each stands for
		// (its name, or "#i" for the i'th, unnamed, member).
		Fields []cField
		// Bitfields are C bitfields and the Go field holding each.
		Bitfields []cField
		// Flex are the trailing flexible array members (a path
		// from the type) and their Offsetof constant.
		Flex []cFlex
	}
	cField struct{ Go, C string }
	cFlex  struct {
		C      string
		Offset int64
	}

	// cConstant is a constant and its value: Value, or -Value when Neg.
	cConstant struct {
		Name  string
		Value uint64
		Neg   bool
	}
)

const (
	cStruct cKind = iota
	cUnion
	cOpaque
)

// requireCompiler returns the probe configuration, or skips the test when
// gcc or the headers are missing, unless the environment says they must
// be there.
func requireCompiler(t *testing.T) cdwarf.Config {
	t.Helper()
	testutils.HostOnly(t)
	cfg := abigen.Config()
	if err := cfg.Available(); err != nil {
		testutils.NeedTool(t, "PURERDMA_TEST_ABI", fmt.Errorf("cannot check the ABI against the C headers: %w", err))
	}
	return cfg
}

// probed is the headers of this machine, compiled once for all tests: the
// layouts, and the values of every generated and hand-written constant
// and of sizeof/_Alignof of every named type in the table.
var probed struct {
	once     sync.Once
	prog     *cdwarf.Program
	vals     map[string]cdwarf.Value
	rejected map[string]bool
	err      error
}

func probe(t *testing.T) (*cdwarf.Program, map[string]cdwarf.Value, map[string]bool) {
	t.Helper()
	cfg := requireCompiler(t)
	probed.once.Do(func() {
		probed.prog, probed.err = cdwarf.Layout(cfg)
		if probed.err != nil {
			return
		}
		var exprs []cdwarf.Expr
		for _, c := range cConstants {
			exprs = append(exprs, cdwarf.Expr{Name: c.Name, C: c.Name})
		}
		for _, c := range newerConstants {
			exprs = append(exprs, cdwarf.Expr{Name: c.Name, C: c.Name})
		}
		for _, c := range cTypes {
			if !strings.Contains(c.C, ".") {
				exprs = append(exprs,
					cdwarf.Expr{Name: "sizeof " + c.C, C: "sizeof(" + c.C + ")"},
					cdwarf.Expr{Name: "_Alignof " + c.C, C: "_Alignof(" + c.C + ")"})
			}
		}
		var rejected []string
		probed.vals, rejected, probed.err = cdwarf.Eval(cfg, exprs)
		probed.rejected = map[string]bool{}
		for _, r := range rejected {
			probed.rejected[r] = true
		}
	})
	if probed.err != nil {
		t.Fatal(probed.err)
	}
	return probed.prog, probed.vals, probed.rejected
}

// member finds the member of t that a path step names.
func member(t *cdwarf.Type, step string) (*cdwarf.Member, int) {
	for i, m := range t.Members {
		if m.Name == step || fmt.Sprintf("#%d", i) == step {
			return m, i
		}
	}
	return nil, -1
}

// elemType resolves typedefs and arrays down to the struct or union a
// path ends at.
func elemType(t *cdwarf.Type) *cdwarf.Type {
	t = t.Resolve()
	for t.Kind == cdwarf.Array {
		t = t.Elem.Resolve()
	}
	return t
}

// TestLayout checks every generated type against the C headers of this
// machine: size, alignment, and the offset and size of each field (each
// union member's accessor), and the flexible array offsets.
func TestLayout(t *testing.T) {
	prog, vals, _ := probe(t)
	for _, c := range cTypes {
		t.Run(c.C, func(t *testing.T) { checkType(t, c, prog, vals) })
	}
}

// checkType checks one table entry; vals has the compiler's sizeof and
// _Alignof of named types (nil to skip that).
func checkType(t *testing.T, c cType, prog *cdwarf.Program, vals map[string]cdwarf.Value) {
	t.Helper()
	ct, _, err := prog.Lookup(c.C)
	if err != nil {
		t.Fatalf("%s (Go %v) is not in the headers: %v", c.C, c.Go, err)
	}
	ct = elemType(ct)
	if got, want := int64(c.Go.Size()), ct.Size; got != want {
		t.Errorf("%v: Go size %d, C size %d", c.Go, got, want)
	}
	if got, want := int64(c.Go.Align()), ct.Align; got != want {
		t.Errorf("%v: Go alignment %d, C alignment %d", c.Go, got, want)
	}
	if vals != nil && !strings.Contains(c.C, ".") {
		if v := vals["sizeof "+c.C]; v != cdwarf.ValueOf(int64(c.Go.Size())) {
			t.Errorf("%v: Go size %d, sizeof(%s) %v", c.Go, c.Go.Size(), c.C, v)
		}
		if v := vals["_Alignof "+c.C]; v != cdwarf.ValueOf(int64(c.Go.Align())) {
			t.Errorf("%v: Go alignment %d, _Alignof(%s) %v", c.Go, c.Go.Align(), c.C, v)
		}
	}
	switch c.Kind {
	case cStruct:
		checkStruct(t, c, ct)
	case cUnion:
		checkUnion(t, c, ct)
	}
}

func checkStruct(t *testing.T, c cType, ct *cdwarf.Type) {
	t.Helper()
	covered := map[int]bool{}
	for _, f := range c.Fields {
		gf, ok := c.Go.FieldByName(f.Go)
		if !ok {
			t.Errorf("%v has no field %s", c.Go, f.Go)
			continue
		}
		m, i := member(ct, f.C)
		if m == nil {
			t.Errorf("%v.%s: %s has no member %s", c.Go, f.Go, c.C, f.C)
			continue
		}
		covered[i] = true
		if int64(gf.Offset) != m.Offset || int64(gf.Type.Size()) != m.Type.Size {
			t.Errorf("%v.%s: Go offset %d size %d; C %s offset %d size %d", c.Go, f.Go, gf.Offset, gf.Type.Size(), f.C, m.Offset, m.Type.Size)
		}
	}
	for _, f := range c.Bitfields {
		gf, ok := c.Go.FieldByName(f.Go)
		m, i := member(ct, f.C)
		if !ok || m == nil {
			t.Errorf("%v: bitfield %s (Go %s) not found", c.Go, f.C, f.Go)
			continue
		}
		covered[i] = true
		lo, hi := int64(gf.Offset)*8, int64(gf.Offset+gf.Type.Size())*8
		if m.BitSize == 0 || m.BitOffset < lo || m.BitOffset+m.BitSize > hi {
			t.Errorf("%v.%s: Go bits %d-%d do not hold C bitfield %s at bits %d+%d", c.Go, f.Go, lo, hi-1, f.C, m.BitOffset, m.BitSize)
		}
	}
	for _, f := range c.Flex {
		_, _, off, err := lookupOffset(ct, f.C)
		if err != nil {
			t.Errorf("%v: flexible member %s: %v", c.Go, f.C, err)
			continue
		}
		first, _, _ := strings.Cut(f.C, ".")
		_, i := member(ct, first)
		covered[i] = true
		if off != f.Offset {
			t.Errorf("%v: the Offsetof constant of %s is %d, C offset %d", c.Go, f.C, f.Offset, off)
		}
	}
	for i, m := range ct.Members {
		if !covered[i] && m.Type.Size != 0 {
			t.Errorf("%v: C member %s (#%d, %s) has no Go field", c.Go, m.Name, i, m.Type.CName())
		}
	}
}

// lookupOffset walks a member path from ct, adding up the offsets.
func lookupOffset(ct *cdwarf.Type, path string) (*cdwarf.Type, *cdwarf.Member, int64, error) {
	var off int64
	var m *cdwarf.Member
	t := ct
	for _, st := range strings.Split(path, ".") {
		m, _ = member(elemType(t), st)
		if m == nil {
			return nil, nil, 0, fmt.Errorf("no member %s", st)
		}
		off += m.Offset
		t = m.Type
	}
	return t, m, off, nil
}

func checkUnion(t *testing.T, c cType, ct *cdwarf.Type) {
	t.Helper()
	if n := c.Go.NumField(); n > 2 {
		t.Errorf("%v: a union type should have only its storage, has %d fields", c.Go, n)
	}
	covered := map[int]bool{}
	for _, f := range c.Fields {
		m, i := member(ct, f.C)
		if m == nil {
			t.Errorf("%v.%s: %s has no member %s", c.Go, f.Go, c.C, f.C)
			continue
		}
		covered[i] = true
		v := reflect.New(c.Go)
		meth := v.MethodByName(f.Go)
		if !meth.IsValid() {
			t.Errorf("%v has no method %s", c.Go, f.Go)
			continue
		}
		p := meth.Call(nil)[0]
		if p.Pointer() != v.Pointer() {
			t.Errorf("(*%v).%s points %d bytes into the union", c.Go, f.Go, p.Pointer()-v.Pointer())
		}
		et := p.Type().Elem()
		if int64(et.Size()) != m.Type.Size {
			t.Errorf("(*%v).%s: Go %v has size %d, C member %s size %d", c.Go, f.Go, et, et.Size(), f.C, m.Type.Size)
		}
		if int64(et.Align()) > ct.Align {
			t.Errorf("(*%v).%s: Go %v needs alignment %d, the union has %d", c.Go, f.Go, et, et.Align(), ct.Align)
		}
	}
	for i, m := range ct.Members {
		if !covered[i] && m.Type.Size != 0 {
			t.Errorf("%v: C member %s (#%d, %s) has no method", c.Go, m.Name, i, m.Type.CName())
		}
	}
}

// TestEveryTypeListed fails when the headers of this machine declare a
// struct or union the table does not have (newer headers: regenerate).
func TestEveryTypeListed(t *testing.T) {
	prog, _, _ := probe(t)
	listed := map[string]bool{}
	for _, c := range cTypes {
		listed[c.C] = true
	}
	for _, ct := range prog.Types {
		if ct.Name == "" || ct.Incomplete || (ct.Kind != cdwarf.Struct && ct.Kind != cdwarf.Union) {
			continue
		}
		for _, h := range abigen.Headers {
			if strings.HasSuffix(ct.File, "/"+h) && !listed[ct.CName()] {
				t.Errorf("%s (%s) has no Go type: run %s", ct.CName(), h, abigen.Command)
			}
		}
	}
}

// TestConstants checks every generated constant against the value the C
// compiler gives it on this machine.
func TestConstants(t *testing.T) {
	_, vals, rejected := probe(t)
	for _, c := range cConstants {
		if rejected[c.Name] {
			t.Errorf("%s: not an integer constant in the headers of this machine", c.Name)
			continue
		}
		want, ok := vals[c.Name]
		if !ok {
			t.Errorf("%s: no value from the C probe", c.Name)
			continue
		}
		if got := (cdwarf.Value{Abs: c.Value, Neg: c.Neg}); got != want {
			t.Errorf("%s = %v in Go, %v in C", c.Name, got, want)
		}
	}
}

// TestGeneratedFilesUpToDate regenerates the files in memory and fails if
// the checked-in ones differ, as go run ./internal/cmd/genabi -check does.
func TestGeneratedFilesUpToDate(t *testing.T) {
	cfg := requireCompiler(t)
	res, err := abigen.Generate(abigen.Options{Config: cfg, Dir: "."})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Check("."); err != nil {
		t.Error(err)
	}
}
