package uverbs

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// errPrefix is the shape every error of this package starts with:
// "uverbs <Operation>", the Go API the caller called (a method as
// Type.Method where the bare name would be ambiguous), then a space (a
// port, a device) or ": " and the cause.
var errPrefix = regexp.MustCompile(`^uverbs [A-Z][A-Za-z0-9]*(\.[A-Z][A-Za-z0-9]*)?[ :]`)

// srcPrefix is errPrefix in source, where the operation may be a %s
// verb filled in by a helper's op argument.
var srcPrefix = regexp.MustCompile(`^uverbs (([A-Z][A-Za-z0-9]*(%s)?|%s)(\.[A-Z][A-Za-z0-9]*)?([ :]|$)|$)`)

// TestErrorDialect: representative failures (bad input caught before
// any kernel call, a closed context, a closed or zero-value object, a
// post on a QP in the wrong state, a call nested in another) start with
// "uverbs <Operation>", carry that one prefix only, and still match
// their cause with errors.Is. No device: the fake context has no
// command fd, and every case fails before a kernel call.
func TestErrorDialect(t *testing.T) {
	c := fakeContext("dev0", 1)
	closedCtx := fakeContext("dev1", 1)
	closedCtx.closed.Store(true)
	pd := &PD{resource: resource{ctx: c, kind: "PD", handle: 1}}
	qpIn := func(st QPState) *QP {
		qp := &QP{resource: resource{ctx: c, kind: "QP", handle: 2}, typ: QPTypeRC}
		qp.pv.State.Store(uint32(st))
		return qp
	}
	closedQP := qpIn(QPStateRTS)
	closedQP.closed.Store(true)
	for _, tt := range []struct {
		name string
		call func() error
		op   string // the prefix the error starts with
		is   error
	}{
		{"AllocBuffer size 0", func() error { _, err := AllocBuffer(0); return err }, "uverbs AllocBuffer: ", errInvalid},
		{"ParseGID", func() error { _, err := ParseGID("x"); return err }, "uverbs ParseGID: ", nil},
		{"CreateQP without CQs", func() error { _, err := pd.CreateQP(QPConfig{Type: QPTypeRC}); return err }, "uverbs CreateQP: ", errInvalid},
		{"RegMR empty", func() error { _, err := pd.RegMR(nil, AccessLocalWrite); return err }, "uverbs RegMR: ", errInvalid},
		{"QueryPort bad port", func() error { _, err := c.QueryPort(2); return err }, "uverbs QueryPort dev0/2: ", errInvalid},
		{"AllocPD closed context", func() error { _, err := closedCtx.AllocPD(); return err }, "uverbs AllocPD: context: ", ErrClosed},
		{"QueryPort closed context", func() error { _, err := closedCtx.QueryPort(1); return err }, "uverbs QueryPort dev1/1: context: ", ErrClosed},
		{"Modify closed QP", func() error { return closedQP.Modify(&QPAttr{State: QPStateErr}, QPAttrState) }, "uverbs QP.Modify: QP: ", ErrClosed},
		{"Modify zero QP", func() error { return (&QP{}).Modify(&QPAttr{State: QPStateErr}, QPAttrState) }, "uverbs QP.Modify: ", errInvalid},
		{"Close zero CQ", func() error { return (&CQ{}).Close() }, "uverbs CQ.Close: ", errInvalid},
		{"PostSend closed QP", func() error { return closedQP.PostSend(&SendWR{}) }, "uverbs PostSend: QP: ", ErrClosed},
		{"PostSend in INIT", func() error { return qpIn(QPStateInit).PostSend(&SendWR{}) }, "uverbs PostSend: QP in INIT", errInvalid},
		{"PostRecv in RESET", func() error { return qpIn(QPStateReset).PostRecv(&RecvWR{}) }, "uverbs PostRecv: QP in RESET", errInvalid},
		{"Modify bad transition", func() error { return qpIn(QPStateReset).Modify(&QPAttr{State: QPStateRTS}, QPAttrState) }, "uverbs QP.Modify: ", errInvalid},
		{"ConnectRC bad port", func() error {
			return qpIn(QPStateReset).ConnectRC(RCPeer{QPNum: 1, LID: 1}, &RCOptions{Port: 2})
		}, "uverbs ConnectRC: QP 0x0: RCOptions.Port 2: ", errInvalid},
		// How ConnectRC wraps a call it makes (QueryPort): the inner
		// call's name stays, as part of the cause.
		{"a call inside another", func() error {
			_, err := c.QueryPort(2)
			return fmt.Errorf("uverbs ConnectRC: %w", inner(err))
		}, "uverbs ConnectRC: QueryPort dev0/2: dev0 has no port 2", errInvalid},
		// A provider's error under the operation that reached it, once.
		{"provider error", func() error {
			return providerErr("CreateCQ", fmt.Errorf("rxe map CQ: a 0-byte queue: %w", errInvalid))
		}, "uverbs CreateCQ: rxe map CQ: ", errInvalid},
		{"provider error that names the operation", func() error {
			return providerErr("CreateQP", fmt.Errorf("uverbs CreateQP: mlx5: QP type 9: %w", ErrNotSupported))
		}, "uverbs CreateQP: mlx5: ", ErrNotSupported},
	} {
		err := tt.call()
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		s := err.Error()
		if !errPrefix.MatchString(s) || !strings.HasPrefix(s, tt.op) {
			t.Errorf("%s: %q, want it to start with %q", tt.name, s, tt.op)
		}
		if strings.Contains(s, ": uverbs ") {
			t.Errorf("%s: %q names the package twice", tt.name, s)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: %v does not match %v", tt.name, err, tt.is)
		}
	}
}

// TestErrorDialectSource reads this package's source and its providers'
// (rxe, siw, mlx5 and the provider layer) and checks every literal that names
// an error's operation: the first literal of fmt.Errorf, errors.New,
// sys.InUse, sys.NewMethod and the FD commands, and the Op of a
// sys.Error. One that starts with "uverbs" has the errPrefix shape (not
// "uverbs: ", "uverbs post send" or "uverbs CQ_CREATE"); a kernel
// command is named after the operation ("uverbs CreateCQ: CQ_CREATE").
func TestErrorDialectSource(t *testing.T) {
	dirs := []string{".", "internal/provider", "internal/rxe", "internal/siw", "internal/mlx5"}
	calls := map[string]bool{"Errorf": true, "New": true, "InUse": true, "NewMethod": true,
		"Command": true, "CommandEx": true, "CommandPinned": true}
	checked := 0
	check := func(fset *token.FileSet, lit *ast.BasicLit) {
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !strings.HasPrefix(s, "uverbs") {
			return
		}
		checked++
		if !srcPrefix.MatchString(s) {
			t.Errorf("%s: %q: an error starts with \"uverbs <Operation>\"", fset.Position(lit.Pos()), s)
		}
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || !calls[sel.Sel.Name] || len(n.Args) == 0 {
						return true
					}
					if lit, ok := firstLit(n.Args[0]); ok {
						check(fset, lit)
					}
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Op" {
						if lit, ok := firstLit(n.Value); ok {
							check(fset, lit)
						}
					}
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("only %d error literals found: the test reads nothing", checked)
	}
}

// firstLit is the string literal e is, or starts with ("uverbs X " + y).
func firstLit(e ast.Expr) (*ast.BasicLit, bool) {
	for {
		switch x := e.(type) {
		case *ast.BasicLit:
			return x, x.Kind == token.STRING
		case *ast.BinaryExpr:
			e = x.X
		default:
			return nil, false
		}
	}
}
