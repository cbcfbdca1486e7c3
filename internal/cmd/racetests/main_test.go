package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree writes files (path: content) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestScan(t *testing.T) {
	root := tree(t, map[string]string{
		"go.mod": "module m\n",
		"a/a_test.go": `package a
// TestOne waits.
//
//purerdma:race
func TestOne(t *testing.T) {}
func TestTwo(t *testing.T) {}
//purerdma:race
func Example() {}
`,
		"b/b_test.go":              "package b\n//purerdma:race\nfunc TestThree(t *testing.T) {}\n",
		"b/testdata/x_test.go":     "package x\n//purerdma:race\nfunc TestIgnored(t *testing.T) {}\n",
		"nested/go.mod":            "module n\n",
		"nested/n_test.go":         "package n\n//purerdma:race\nfunc TestNested(t *testing.T) {}\n",
		"c/c.go":                   "package c\n//purerdma:race\nfunc TestNotATestFile() {}\n",
		"c/helpers_test.go":        "package c\nfunc helper() {}\n",
		"d/testing_helper_test.go": "package d\nfunc Testify() {}\n",
	})
	l, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"./a", "./b"}, l.pkgs()); diff != "" {
		t.Errorf("pkgs (-want +got):\n%s", diff)
	}
	if got, want := l.pattern(), "^(Example|TestOne|TestThree)$"; got != want {
		t.Errorf("pattern %q, want %q", got, want)
	}
}

func TestScanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"misplaced", map[string]string{"a/a_test.go": "package a\n//purerdma:race\nvar x = 1\n//purerdma:race\nfunc TestOne(t *testing.T) {}\n"},
			"is not on a line of its own in a Test or Example function's doc comment"},
		{"on a helper", map[string]string{"a/a_test.go": "package a\n//purerdma:race\nfunc helper() {}\n//purerdma:race\nfunc TestOne(t *testing.T) {}\n"},
			"a_test.go:2:1: //purerdma:race is not"},
		{"collision", map[string]string{
			"a/a_test.go": "package a\n//purerdma:race\nfunc TestOne(t *testing.T) {}\n",
			"b/b_test.go": "package b\n//purerdma:race\nfunc TestTwo(t *testing.T) {}\nfunc TestOne(t *testing.T) {}\n"},
			"./a TestOne is marked, and ./b has an unmarked TestOne"},
		{"none", map[string]string{"a/a_test.go": "package a\nfunc TestOne(t *testing.T) {}\n"},
			"no test is marked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.files["go.mod"] = "module m\n"
			_, err := scan(tree(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("scan = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRepository: the module's own marks pass the checks and name the
// packages whose concurrency tests make vmrace has always run.
func TestRepository(t *testing.T) {
	l, err := scan(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"./internal/evfd", "./mmio", "./rdmacm", "./rpma", "./rsocket", "./spin", "./uverbs"} {
		if len(l.marked[p]) == 0 {
			t.Errorf("no marked test in %s", p)
		}
	}
}
