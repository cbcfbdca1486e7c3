package layering

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

// providerPkgs are the provider layer: the interface package and one
// package per driver.
var providerPkgs = []string{
	"uverbs/internal/provider",
	"uverbs/internal/rxe",
	"uverbs/internal/siw",
	"uverbs/internal/mlx5",
}

// TestProviderSeam: the seam between uverbs and its providers runs one
// way. TestLayering already keeps uverbs' import out of the provider
// packages; this test keeps them from calling up into uverbs by other
// means:
//
//   - no type of package uverbs implements an interface that a provider
//     package declares or asserts (an interface a provider holds, that
//     uverbs fills in, is a call up);
//   - no exported function or method of a provider package takes a
//     function (a callback uverbs would hand down).
//
// The provider packages are type-checked from source, their imports
// from the compiler's export data (go list -export).
func TestProviderSeam(t *testing.T) {
	testutils.HostOnly(t)
	exports := exportData(t, append([]string{"uverbs"}, providerPkgs...))
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	uv, err := imp.Import(module + "/uverbs")
	if err != nil {
		t.Fatal(err)
	}
	var uvTypes []types.Type
	for _, name := range uv.Scope().Names() {
		tn, ok := uv.Scope().Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() || types.IsInterface(tn.Type()) {
			continue
		}
		uvTypes = append(uvTypes, tn.Type(), types.NewPointer(tn.Type()))
	}
	if len(uvTypes) < 20 {
		t.Fatalf("only %d types read from package uverbs: the test reads nothing", len(uvTypes))
	}

	checked := 0
	for _, rel := range providerPkgs {
		dir := filepath.Join("../..", rel)
		files := parseDir(t, fset, dir)
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp.(types.ImporterFrom), Error: func(error) {}}
		pkg, err := conf.Check(module+"/"+rel, fset, files, info)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		// Every interface the package declares or writes out (named
		// types, literals in assertions and fields).
		var ifaces []*types.Interface
		for _, tv := range info.Types {
			if it, ok := tv.Type.Underlying().(*types.Interface); ok && it.NumMethods() > 0 && tv.IsType() {
				ifaces = append(ifaces, it)
			}
		}
		for _, it := range ifaces {
			checked++
			for _, ut := range uvTypes {
				if types.Implements(ut, it) && !stdInterface(it) {
					t.Errorf("%s: uverbs' %v implements %v, an interface of the provider layer: a provider could call up through it", rel, ut, it)
				}
			}
		}
		// No exported function or method takes a function.
		for _, obj := range info.Defs {
			fn, ok := obj.(*types.Func)
			if !ok || !fn.Exported() || fn.Pkg() != pkg {
				continue
			}
			sig := fn.Type().(*types.Signature)
			for i := range sig.Params().Len() {
				if _, isFunc := sig.Params().At(i).Type().Underlying().(*types.Signature); isFunc {
					t.Errorf("%s: %s takes a function (%v): a callback from uverbs is a call up", rel, fn.FullName(), sig.Params().At(i).Type())
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no interfaces found in the provider packages: the test checks nothing")
	}
}

// stdInterface reports whether it is a small interface of the standard
// library's conventions, which any type may meet without calling into
// the provider layer's business (error, fmt.Stringer, a fault's Addr).
func stdInterface(it *types.Interface) bool {
	for i := range it.NumMethods() {
		switch it.Method(i).Name() {
		case "Error", "String", "Addr", "Unwrap":
		default:
			return false
		}
	}
	return true
}

// exportData runs go list -export on the packages (below the module)
// and returns the export data file of each package they depend on.
func exportData(t *testing.T, rels []string) map[string]string {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Export"}
	for _, r := range rels {
		args = append(args, "./"+r)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Export != "" {
			m[p.ImportPath] = p.Export
		}
	}
	return m
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files
}
