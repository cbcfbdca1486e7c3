package main

import (
	"flag"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the command list in main.go's package doc from the commands")

// docBlock finds the package doc's copy of the usage in main.go's source:
// the comment lines from "//\tusage: purerdma" through "//\texit status:",
// returned without their "//\t", and their line indexes [from, to) in src.
func docBlock(t *testing.T, src []string) (block []string, from, to int) {
	t.Helper()
	from = -1
	for i, l := range src {
		if from < 0 && strings.HasPrefix(l, "//\tusage: purerdma ") {
			from = i
		}
		if l == "package main" {
			break
		}
		if from >= 0 {
			s, ok := strings.CutPrefix(l, "//\t")
			if l == "//" { // an empty line, as gofmt writes it
				s, ok = "", true
			}
			if !ok {
				t.Fatalf("main.go:%d: %q inside the doc's usage block, which ends with its exit status line", i+1, l)
			}
			block = append(block, s)
			if strings.HasPrefix(s, "exit status:") {
				return block, from, i + 1
			}
		}
	}
	t.Fatal(`main.go's package doc has no usage block ("//\tusage: purerdma ..." through "//\texit status: ...")`)
	return nil, 0, 0
}

// TestDocListsCommands checks that the package doc lists the commands
// as "purerdma -h" does, line for line, so the list is the commands'
// Usage values and never written a second time by hand. After a change
// to a command's usage, regenerate it:
//
//	go test ./cmd/purerdma -run TestDocListsCommands -update-doc
func TestDocListsCommands(t *testing.T) {
	data, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Split(string(data), "\n")
	block, from, to := docBlock(t, src)
	want := strings.Split(strings.TrimSuffix(usage(), "\n"), "\n")
	if *updateDoc {
		var lines []string
		for _, l := range want {
			lines = append(lines, strings.TrimRight("//\t"+l, " \t"))
		}
		out := append(append(append([]string{}, src[:from]...), lines...), src[to:]...)
		if err := os.WriteFile("main.go", []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for i := range want {
		want[i] = strings.TrimRight(want[i], " ")
	}
	if diff := cmp.Diff(block, want); diff != "" {
		t.Errorf("main.go's package doc does not list the commands as purerdma -h does (-doc +usage); run\n"+
			"\tgo test ./cmd/purerdma -run TestDocListsCommands -update-doc\n%s", diff)
	}
}

// TestDocListsJSONKeys checks the package doc's JSON keys of each
// command that takes -json against the type it prints
// (cli.Command's JSON): the outline of its keys, {"key", "list": [{...}]},
// must be in the doc as written there, and each key in the command's
// help.
func TestDocListsJSONKeys(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(f.Doc.Text()), " ")
	checked := 0
	for _, name := range commands.Names() {
		c := commands[name]
		if c.JSON == nil {
			continue
		}
		want := jsonOutline(reflect.TypeOf(c.JSON))
		if !strings.Contains(doc, "- "+c.Name) || !strings.Contains(doc, want) {
			t.Errorf("the package doc's JSON output section lacks %s's keys: %s", c.Name, want)
		}
		help := regexp.MustCompile(`[a-z_]+`).FindAllString(c.Help, -1)
		for _, k := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(want, -1) {
			if !slices.Contains(help, k[1]) {
				t.Errorf("%s -h does not name the JSON key %q", c.Name, k[1])
			}
		}
		checked++
	}
	if checked == 0 {
		t.Error("no command declares its JSON output")
	}
}

// jsonOutline is the keys of the JSON encoding of t, nested as in the
// package doc: {"a", "b": [{"c"}]}.
func jsonOutline(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if e := jsonOutline(t.Elem()); e != "" {
			return "[" + e + "]"
		}
	case reflect.Struct:
		var keys []string
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			k := `"` + name + `"`
			if inner := jsonOutline(sf.Type); inner != "" {
				k += ": " + inner
			}
			keys = append(keys, k)
		}
		return "{" + strings.Join(keys, ", ") + "}"
	}
	return ""
}
