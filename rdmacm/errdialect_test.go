package rdmacm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// opName is an operation as errors name it: the Go API the caller
// called ("Connect", "ResolveAddrContext"; "ID.Close" where the bare
// name would be ambiguous).
var opName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*(\.[A-Z][A-Za-z0-9]*)?$`)

// opFuncs take the operation's name as their first (string) argument.
var opFuncs = map[string]bool{"opError": true, "alive": true, "claimOwn": true, "setOption": true,
	"reg": true, "postSend": true, "postSendv": true, "shared": true, "device": true, "verbsPD": true,
	"postQP": true, "sge": true, "kernelTimeout": true, "checkPrivateData": true, "privateDataLimit": true}

// TestErrorDialect reads this package's source: every operation name
// (a `const op`, the first argument of opError and the helpers that
// pass it on, the op of a blocking step) is a Go API name, and every
// error literal that starts with "rdmacm" reads "rdmacm <Operation>"
// or "rdmacm %s", never "rdmacm: ".
func TestErrorDialect(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	prefix := regexp.MustCompile(`^rdmacm ([A-Z][A-Za-z0-9]*(\.[A-Z][A-Za-z0-9]*)?|%s)[ :]`)
	ops, lits := 0, 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkOp := func(e ast.Expr) {
			lit, ok := e.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return
			}
			s, _ := strconv.Unquote(lit.Value)
			ops++
			if !opName.MatchString(s) {
				t.Errorf("%s: operation %q is not a Go API name", fset.Position(lit.Pos()), s)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if len(n.Names) == 1 && n.Names[0].Name == "op" && len(n.Values) == 1 {
					checkOp(n.Values[0])
				}
			case *ast.CallExpr:
				var fn string
				switch x := n.Fun.(type) {
				case *ast.Ident:
					fn = x.Name
				case *ast.SelectorExpr:
					fn = x.Sel.Name
				}
				if len(n.Args) == 0 {
					return true
				}
				switch {
				case opFuncs[fn]:
					checkOp(n.Args[0])
				case (fn == "step" || fn == "newResolution" || fn == "getComp") && len(n.Args) > 1:
					checkOp(n.Args[1])
				case fn == "Errorf" || fn == "New" || fn == "Fprintf":
					arg := n.Args[0]
					if fn == "Fprintf" && len(n.Args) > 1 {
						arg = n.Args[1]
					}
					if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						if strings.HasPrefix(s, "rdmacm") {
							lits++
							if !prefix.MatchString(s) {
								t.Errorf("%s: %q: an error starts with \"rdmacm <Operation>\"", fset.Position(lit.Pos()), s)
							}
						}
					}
				}
			}
			return true
		})
	}
	if ops < 30 || lits < 10 {
		t.Fatalf("%d operation names, %d error literals found: the test reads nothing", ops, lits)
	}
}
