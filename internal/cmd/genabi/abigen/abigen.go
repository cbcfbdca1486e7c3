// Package abigen generates internal/abi from the kernel's RDMA UAPI
// headers: Go types with the C layouts (read from the DWARF of a compiled
// probe, see package cdwarf), the headers' integer constants, and a table
// the layout tests of internal/abi check against the headers of the
// machine they run on.
//
// It is the body of the maintainer tool internal/cmd/genabi; the tests of
// internal/abi call Generate too, to fail when the checked-in files are
// stale.
package abigen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/purerdma/rdma/internal/cmd/genabi/cdwarf"
)

// Headers are the UAPI headers that are generated, in output order.
var Headers = []string{
	"rdma/ib_user_verbs.h",
	"rdma/ib_user_ioctl_verbs.h",
	"rdma/ib_user_ioctl_cmds.h",
	"rdma/rdma_user_ioctl_cmds.h",
	"rdma/rdma_user_ioctl.h",
	"rdma/rdma_user_cm.h",
	"rdma/rdma_user_rxe.h",
	"rdma/siw-abi.h",
	"rdma/mlx5-abi.h",
	"rdma/mlx5_user_ioctl_verbs.h",
	"rdma/mlx5_user_ioctl_cmds.h",
}

// Config is the probe configuration for Headers with the system compiler
// and headers.
func Config() cdwarf.Config {
	return cdwarf.Config{Headers: slices.Clone(Headers)}
}

// The generated files, in the internal/abi directory.
const (
	GoFile   = "zabi.go"
	TestFile = "zlayout_test.go"
)

// Command is how the files say they were made.
const Command = "go run ./internal/cmd/genabi"

// Options configure Generate.
type Options struct {
	// Config selects the compiler and headers; Config() when zero.
	Config cdwarf.Config
	// Dir is the internal/abi directory. Names declared by its
	// hand-written files (all but GoFile and tests) are not generated,
	// so that newer.go can hold declarations that newer headers also
	// have.
	Dir string
}

// Result is the output of Generate.
type Result struct {
	// Files maps GoFile and TestFile to their contents.
	Files map[string][]byte
	// Counts of what was generated.
	Structs, Unions, Opaque, Constants, Flex int
	// Rejected lists the #define names whose bodies are not integer
	// constant expressions, and so were left out.
	Rejected []string
	// Kernel is the version of the headers, "6.1".
	Kernel string
}

// Generate reads the headers and renders the files.
func Generate(opt Options) (*Result, error) {
	cfg := opt.Config
	if len(cfg.Headers) == 0 {
		cfg = Config()
		cfg.CC, cfg.IncludeDirs = opt.Config.CC, opt.Config.IncludeDirs
	}
	if err := cfg.Available(); err != nil {
		return nil, err
	}
	g := &gen{
		cfg:   cfg,
		taken: map[string]string{},
		byC:   map[*cdwarf.Type]*goType{},
	}
	var err error
	if g.hand, err = readHandWritten(opt.Dir); err != nil {
		return nil, err
	}
	if g.prog, err = cdwarf.Layout(cfg); err != nil {
		return nil, err
	}
	if err := g.types(); err != nil {
		return nil, err
	}
	if err := g.constants(); err != nil {
		return nil, err
	}
	g.kernel = kernelVersion(cfg)
	res := &Result{Files: map[string][]byte{}, Rejected: g.rejected, Kernel: g.kernel}
	for _, t := range g.all {
		switch t.kind {
		case kindStruct:
			res.Structs++
		case kindUnion:
			res.Unions++
		case kindOpaque:
			res.Opaque++
		}
		res.Flex += len(t.flex)
	}
	res.Constants = len(g.consts)
	if res.Files[GoFile], err = g.renderGo(); err != nil {
		return nil, err
	}
	if res.Files[TestFile], err = g.renderTest(); err != nil {
		return nil, err
	}
	return res, nil
}

// Write writes the files into dir.
func (r *Result) Write(dir string) error {
	for _, name := range []string{GoFile, TestFile} {
		if err := os.WriteFile(filepath.Join(dir, name), r.Files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Check compares the files in dir with r and describes the differences,
// or returns nil when there are none.
func (r *Result) Check(dir string) error {
	var msgs []string
	for _, name := range []string{GoFile, TestFile} {
		old, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			msgs = append(msgs, err.Error())
			continue
		}
		if d := diffSummary(old, r.Files[name], 20); d != "" {
			msgs = append(msgs, fmt.Sprintf("%s differs from a fresh generation (- checked in, + generated):\n%s", filepath.Join(dir, name), d))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s\nregenerate with: %s", strings.Join(msgs, "\n"), Command)
}

// diffSummary lists up to max lines only in old (-) and only in new (+),
// compared as multisets, or "" when old and new are equal.
func diffSummary(old, new []byte, max int) string {
	if bytes.Equal(old, new) {
		return ""
	}
	count := map[string]int{}
	for _, l := range strings.Split(string(old), "\n") {
		count[l]++
	}
	var plus []string
	for _, l := range strings.Split(string(new), "\n") {
		if count[l] > 0 {
			count[l]--
		} else {
			plus = append(plus, l)
		}
	}
	var minus []string
	for _, l := range strings.Split(string(old), "\n") {
		if count[l] > 0 {
			count[l]--
			minus = append(minus, l)
		}
	}
	var b strings.Builder
	ol, nl := strings.Split(string(old), "\n"), strings.Split(string(new), "\n")
	for i := 0; i < len(ol) || i < len(nl); i++ {
		if i >= len(ol) || i >= len(nl) || ol[i] != nl[i] {
			fmt.Fprintf(&b, "\tfirst difference at line %d\n", i+1)
			break
		}
	}
	fmt.Fprintf(&b, "\t%d line(s) removed, %d added\n", len(minus), len(plus))
	for i, l := range minus {
		if i == max {
			fmt.Fprintf(&b, "\t- ...\n")
			break
		}
		fmt.Fprintf(&b, "\t- %s\n", l)
	}
	for i, l := range plus {
		if i == max {
			fmt.Fprintf(&b, "\t+ ...\n")
			break
		}
		fmt.Fprintf(&b, "\t+ %s\n", l)
	}
	return strings.TrimRight(b.String(), "\n")
}

// handWritten holds the names the hand-written files of the package
// declare.
type handWritten struct {
	names   map[string]bool // top-level identifiers
	methods map[string]bool // "Type.Method"
}

func readHandWritten(dir string) (handWritten, error) {
	h := handWritten{names: map[string]bool{}, methods: map[string]bool{}}
	if dir == "" {
		return h, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return h, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		base := filepath.Base(f)
		if base == GoFile || strings.HasSuffix(base, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return h, err
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					h.names[d.Name.Name] = true
					continue
				}
				rt := d.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					h.methods[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						h.names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							h.names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return h, nil
}

var versionRE = regexp.MustCompile(`(?m)^#define LINUX_VERSION_CODE (\d+)`)

// kernelVersion is the major.minor of the headers' <linux/version.h>, or
// "unknown". The sublevel is left out on purpose: distributions update it
// with every stable release, while the UAPI stays the same.
func kernelVersion(cfg cdwarf.Config) string {
	p, err := cfg.HeaderPath("linux/version.h")
	if err != nil {
		return "unknown"
	}
	src, err := os.ReadFile(p)
	if err != nil {
		return "unknown"
	}
	m := versionRE.FindSubmatch(src)
	if m == nil {
		return "unknown"
	}
	var code int
	fmt.Sscan(string(m[1]), &code)
	return fmt.Sprintf("%d.%d", code>>16, (code>>8)&0xff)
}

// headerOf returns the index in cfg.Headers of the header that declared
// file, or -1.
func (g *gen) headerOf(file string) int {
	for i, h := range g.cfg.Headers {
		if file == h || strings.HasSuffix(file, "/"+h) {
			return i
		}
	}
	return -1
}

// shortFile is the last two elements of a path: "linux/in6.h". It keeps
// the output the same on hosts whose headers live in other directories.
func shortFile(path string) string {
	dir, file := filepath.Split(filepath.Clean(path))
	return filepath.Join(filepath.Base(dir), file)
}
