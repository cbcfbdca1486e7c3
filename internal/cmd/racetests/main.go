// Command racetests lists the tests that make vmrace runs with the race
// detector: the Test and Example functions whose doc comment holds the
// directive
//
//	//purerdma:race
//
// on a line of its own. The mark lives with the test, so a renamed or
// moved test stays in the race run, and a new concurrency test joins it
// where it is written.
//
//	go run ./internal/cmd/racetests -pkgs   # the packages: ./uverbs ./rdmacm ...
//	go run ./internal/cmd/racetests -run    # the -run pattern: ^(TestA|TestB|...)$
//
// go test applies one -run pattern to every package it is given, so a
// marked name that another of those packages also defines, unmarked,
// would run there too: racetests refuses that (mark both, or rename),
// and a mark anywhere but on a Test or Example function of a _test.go
// file.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/purerdma/rdma/internal/cmd/modroot"
)

// directive marks a test for the race run.
const directive = "//purerdma:race"

func main() {
	pkgs := flag.Bool("pkgs", false, "print the packages that have marked tests")
	run := flag.Bool("run", false, "print the -run pattern of the marked tests")
	flag.Parse()
	if *pkgs == *run || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: racetests -pkgs | -run")
		os.Exit(2)
	}
	root, err := modroot.Find()
	if err == nil {
		var l list
		if l, err = scan(root); err == nil {
			if *pkgs {
				fmt.Println(strings.Join(l.pkgs(), " "))
			} else {
				fmt.Println(l.pattern())
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "racetests:", err)
	os.Exit(1)
}

// list is what scan found: per package (./dir), the names of its
// marked tests and of all its tests.
type list struct {
	marked map[string][]string
	all    map[string]map[string]bool
}

func (l list) pkgs() []string {
	var p []string
	for k := range l.marked {
		p = append(p, k)
	}
	slices.Sort(p)
	return p
}

func (l list) pattern() string {
	var names []string
	for _, ns := range l.marked {
		names = append(names, ns...)
	}
	slices.Sort(names)
	return "^(" + strings.Join(slices.Compact(names), "|") + ")$"
}

// scan parses the _test.go files of the module under root (not those of
// testdata directories or of nested modules) and checks the marks.
func scan(root string) (list, error) {
	l := list{marked: map[string][]string{}, all: map[string]map[string]bool{}}
	var errs []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := "./" + filepath.ToSlash(rel)
		if l.all[pkg] == nil {
			l.all[pkg] = map[string]bool{}
		}
		onFunc := map[*ast.Comment]bool{}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isTest(fn.Name.Name) {
				continue
			}
			l.all[pkg][fn.Name.Name] = true
			if fn.Doc == nil {
				continue
			}
			for _, c := range fn.Doc.List {
				if c.Text == directive {
					onFunc[c] = true
					l.marked[pkg] = append(l.marked[pkg], fn.Name.Name)
				}
			}
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if strings.HasPrefix(c.Text, directive) && !onFunc[c] {
					errs = append(errs, fmt.Sprintf("%s: %s is not on a line of its own in a Test or Example function's doc comment", fset.Position(c.Pos()), directive))
				}
			}
		}
		return nil
	})
	if err != nil {
		return list{}, err
	}
	for pkg, names := range l.marked {
		for _, name := range names {
			for other := range l.marked {
				if other != pkg && l.all[other][name] && !slices.Contains(l.marked[other], name) {
					errs = append(errs, fmt.Sprintf("%s %s is marked, and %s has an unmarked %s that the same -run pattern would select", pkg, name, other, name))
				}
			}
		}
	}
	if len(l.marked) == 0 {
		errs = append(errs, "no test is marked "+directive)
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return list{}, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return l, nil
}

// isTest reports whether name is a Test or Example function's name as
// go test finds them (Test or Example alone, or followed by a
// non-lowercase rune).
func isTest(name string) bool {
	for _, p := range []string{"Test", "Example"} {
		if rest, ok := strings.CutPrefix(name, p); ok && (rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z')) {
			return true
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
