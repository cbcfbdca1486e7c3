package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocListsCommands checks the package doc's command list against the
// registry, so the two texts cannot drift apart: every registered command
// has a "purerdma NAME" line, and each usage line of a packaged command
// (cli.Command) appears there with its synopsis word for word.
func TestDocListsCommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var list []string // the doc's indented "purerdma ..." lines
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if s, ok := strings.CutPrefix(line, "\tpurerdma "); ok {
			list = append(list, s)
		}
	}
	listed := func(prefix string) bool {
		for _, l := range list {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	}
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !listed(n + " ") {
			t.Errorf("the package doc lists no line for command %q", n)
		}
	}
	gap := regexp.MustCompile(`\s{2,}`) // between a usage line's synopsis and its description
	for _, c := range packaged {
		for _, line := range strings.Split(strings.TrimRight(c.Usage, "\n"), "\n") {
			if syn := gap.Split(strings.TrimSpace(line), 2)[0]; !listed(syn + " ") {
				t.Errorf("the package doc lacks %q, a usage line of %s", "purerdma "+syn, c.Name)
			}
		}
	}
	if len(packaged) == 0 {
		t.Error("no packaged commands to check")
	}
}
