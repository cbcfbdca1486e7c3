package layering

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

const module = "github.com/purerdma/rdma"

// allowed lists, for each project package (by path below the module; a
// trailing "/" covers a subtree), the project packages it may import. A
// package missing here fails the test: new packages take a place in the
// layering on purpose.
var allowed = map[string][]string{
	"mmio":                     nil,
	"internal/netlink":         nil,
	"internal/rdmanl":          {"internal/netlink"},
	"internal/abi":             nil,
	"internal/sys":             {"internal/abi"},
	"internal/evfd":            {"internal/sys"},
	"internal/ucma":            {"internal/abi", "internal/sys", "internal/evfd"},
	"internal/cmd/genabi":      {"internal/cmd/genabi/", "internal/cmd/modroot"},
	"internal/cmd/genabi/":     {"internal/cmd/genabi/"},
	"internal/cmd/genviews":    {"internal/cmd/modroot"},
	"internal/cmd/racetests":   {"internal/cmd/modroot"},
	"internal/cmd/modroot":     nil,
	"internal/layering":        nil,
	"internal/bench":           nil,
	"internal/cycles":          nil,
	"internal/testutils":       nil,
	"internal/faults":          nil, // its tests only: the two-VM bed's network faults
	"uverbs":                   {"mmio", "internal/", "uverbs/internal/"},
	"uverbs/internal/provider": {"mmio", "internal/abi", "internal/sys"},
	"uverbs/internal/rxe":      {"mmio", "internal/abi", "internal/sys", "uverbs/internal/provider"},
	"uverbs/internal/mlx5":     {"mmio", "internal/abi", "internal/sys", "uverbs/internal/provider"},
	"uverbs/internal/siw":      {"mmio", "internal/abi", "internal/sys", "uverbs/internal/provider"},
	"uverbs/examples":          nil, // the manual's RC example's test (it runs the built programs)
	"uverbs/examples/":         {"uverbs"},
	"rdmacm":                   {"uverbs", "mmio", "internal/"},
	"rpma":                     {"rdmacm", "uverbs", "mmio", "spin", "internal/"},
	"rsocket":                  {"rdmacm", "uverbs", "spin", "internal/sys"},
	"rpma/examples":            {"rpma/examples/", "internal/", "testenv"},
	"rdmacm/examples":          nil, // the manual's rdma_cm examples' test
	"rdmacm/examples/":         {"rdmacm", "uverbs", "rdmacm/examples/"},
	"rpma/examples/":           {"rpma", "uverbs", "mmio", "rpma/examples/"},
	"spin":                     {"internal/cycles"},
	"testenv":                  {"uverbs", "internal/"},
	"testenv/vm":               {"internal/rdmanl", "internal/netlink"},
	"rdmactl":                  {"internal/rdmanl"},
	"cmd/":                     {"uverbs", "rdmacm", "rpma", "rsocket", "rdmactl", "mmio", "spin", "internal/", "testenv/vm", "cmd/purerdma/internal/"},
	"examples":                 nil,                                                // their test (it runs the built programs)
	"examples/":                {"uverbs", "rdmacm", "rpma", "rsocket", "testenv"}, // docs/getting-started.md's programs

	// Runs the manual's example programs, Go and C, for the tests of
	// uverbs/examples and rdmacm/examples.
	"internal/testutils/examplerun": {"testenv"},

	// Runs purerdma's commands against rdma-core's tools, for the tests
	// of cmd/purerdma and its commands' packages.
	"internal/testutils/toolrun": {"testenv"},

	// What the tests that run purerdma pingpong against rdma-core's
	// ibv_*_pingpong share (cmd/purerdma and its pingpong package).
	"internal/testutils/pingpongrun": {"testenv"},

	// The mlx5 differential harness: all its code is tests
	// (docs/testing.md, "The mlx5 oracle").
	"uverbs/internal/mlx5/oracle": nil,
}

// lowLevel may import unsafe, syscall and golang.org/x/sys/unix: the few
// places where raw kernel access lives.
var lowLevel = []string{"mmio", "internal/netlink", "internal/rdmanl", "internal/sys", "internal/abi", "internal/evfd", "internal/ucma", "testenv/vm", "cmd/rxevm",
	"uverbs/internal/provider"} // provider: the views of uverbs' work requests (provider.As)

var rawImports = []string{"unsafe", "syscall", "golang.org/x/sys/unix"}

var thirdParty = []string{"golang.org/x/sys/", "github.com/google/go-cmp/", "go.uber.org/goleak/", testOnly}

// testOnly may be imported by tests only: x/net's nettest, the net.Conn
// conformance suite rsocket's tests run (docs/architecture.md).
const testOnly = "golang.org/x/net/"

type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	CgoFiles     []string
	Module       *struct{ Path string }
}

func list(t *testing.T) []pkg {
	cmd := exec.Command("go", "list", "-json", "-deps", "-test", module+"/...")
	cmd.Dir = "../.."
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func match(rel string, patterns []string) bool {
	for _, p := range patterns {
		if rel == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p)) {
			return true
		}
	}
	return false
}

func rules(rel string) ([]string, bool) {
	if r, ok := allowed[rel]; ok {
		return r, true
	}
	for p, r := range allowed {
		if strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p) {
			return r, true
		}
	}
	return nil, false
}

func TestLayering(t *testing.T) {
	testutils.HostOnly(t)
	for _, p := range list(t) {
		if p.Standard || strings.Contains(p.ImportPath, " [") || strings.HasSuffix(p.ImportPath, ".test") {
			continue // stdlib and test variants; each import list is checked below
		}
		if !strings.HasPrefix(p.ImportPath, module+"/") {
			if !match(p.ImportPath+"/", thirdParty) && !match(p.ImportPath, thirdParty) {
				t.Errorf("dependency %s is not on the allow-list (docs/architecture.md says how to add one)", p.ImportPath)
			}
			continue
		}
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		mayImport, ok := rules(rel)
		if !ok {
			t.Errorf("package %s has no place in the layering: add it to allowed in %s", rel, "internal/layering")
			continue
		}
		if len(p.CgoFiles) > 0 && !strings.Contains(rel, "testdata") {
			t.Errorf("%s uses cgo (%v); library and tool code must build with CGO_ENABLED=0", rel, p.CgoFiles)
		}
		for _, imp := range p.Imports {
			// Commands may name signals (syscall.SIGTERM), nothing more raw;
			// libraries may name syscall.RawConn in their signatures.
			signalsOnly := imp == "syscall" && strings.HasPrefix(rel, "cmd/")
			rawConnOnly := imp == "syscall" && !strings.HasPrefix(rel, "cmd/") && !match(rel, lowLevel) && syscallUses(t, p, "RawConn")
			if slices.Contains(rawImports, imp) && !match(rel, lowLevel) && !signalsOnly && !rawConnOnly {
				t.Errorf("%s imports %s; raw kernel access belongs in one of %v", rel, imp, lowLevel)
			}
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok && !match(dep, mayImport) {
				t.Errorf("%s imports %s; it may import only %v", rel, dep, mayImport)
			}
			if strings.HasPrefix(imp, testOnly) {
				t.Errorf("%s imports %s, which only tests may", rel, imp)
			}
			if imp == "testing" && !strings.HasPrefix(rel, "testenv") && !strings.HasPrefix(rel, "internal/testutils") {
				t.Errorf("%s imports testing outside its tests", rel)
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok && strings.HasPrefix(dep, "cmd/") && !ownCommand(rel, dep) {
				t.Errorf("tests of %s import the command %s", rel, dep)
			}
		}
	}
}

// ownCommand reports whether dep is an internal package of the command
// rel belongs to (cmd/purerdma/internal/... for cmd/purerdma and its
// packages), which the command's own tests may import.
func ownCommand(rel, dep string) bool {
	parts := strings.SplitN(rel, "/", 3)
	return len(parts) >= 2 && parts[0] == "cmd" && strings.HasPrefix(dep, "cmd/"+parts[1]+"/internal/")
}

// syscallUses reports whether p's files use nothing of package syscall
// but the names in allow; it fails t on any other use.
func syscallUses(t *testing.T, p pkg, allow ...string) bool {
	ok := true
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"syscall"` {
				local = "syscall"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, isSel := n.(*ast.SelectorExpr)
			if !isSel {
				return true
			}
			if id, isID := sel.X.(*ast.Ident); isID && id.Name == local && !slices.Contains(allow, sel.Sel.Name) {
				t.Errorf("%s: syscall.%s: a library may name only %v of package syscall", fset.Position(sel.Pos()), sel.Sel.Name, allow)
				ok = false
			}
			return true
		})
	}
	return ok
}

// TestFakesOnlyInTests checks that the test seams of internal/sys and
// internal/rdmanl (InstallFake) are installed by tests alone.
func TestFakesOnlyInTests(t *testing.T) {
	testutils.HostOnly(t)
	for _, p := range list(t) {
		if p.Standard || strings.Contains(p.ImportPath, " [") || strings.HasSuffix(p.ImportPath, ".test") ||
			!strings.HasPrefix(p.ImportPath, module+"/") {
			continue
		}
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if rel == "internal/sys" || rel == "internal/rdmanl" {
			continue
		}
		for _, name := range p.GoFiles {
			if filepath.IsAbs(name) {
				continue // generated by the go command (a test main)
			}
			b, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "InstallFake(") {
				t.Errorf("%s/%s calls InstallFake: only tests may install a fake kernel", rel, name)
			}
		}
	}
}
