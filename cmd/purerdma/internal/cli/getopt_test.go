package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testOpts is a table like the commands': shorts with and without a
// value, long names sharing prefixes, a short-only and a long-only row.
var testOpts = []Opt{
	{Short: 's', Long: "size", HasArg: true},
	{Short: 'l', Long: "sl", HasArg: true},
	{Short: 'd', Long: "ib-dev", HasArg: true},
	{Short: 'i', Long: "ib-port", HasArg: true},
	{Short: 'e', Long: "events"},
	{Short: 'v'},
	{Short: 'V'},
	{Long: "long-only"},
}

// parseTest runs g.Parse over args and returns what it set, one
// "-S=value" or "--long=value" per option, and the operands.
func parseTest(g Getopt, args []string) (calls, operands []string, err error) {
	operands, err = g.Parse(args, func(opt Opt, val string) error {
		name := "--" + opt.Long
		if opt.Short != 0 {
			name = "-" + string(opt.Short)
		}
		if opt.Short == 'V' && val == "" && len(calls) > 0 && calls[len(calls)-1] == "-V=" {
			return errors.New("-V twice") // an error of set stops the walk
		}
		calls = append(calls, name+"="+val)
		return nil
	})
	return calls, operands, err
}

func TestGetopt(t *testing.T) {
	tests := []struct {
		args     []string
		permute  bool
		calls    []string
		operands []string
		err      string // "" for none, "help" for ErrHelp
	}{
		{args: nil},
		// Bundles, and a value attached to the last of one or after it.
		{args: []string{"-vVe"}, calls: []string{"-v=", "-V=", "-e="}},
		{args: []string{"-vs64", "-ds"}, calls: []string{"-v=", "-s=64", "-d=s"}},
		{args: []string{"-vs", "64"}, calls: []string{"-v=", "-s=64"}},
		// A separate value is the next argument, whatever it is.
		{args: []string{"-s", "-v", "-d", "--", "-l", "--size"}, calls: []string{"-s=-v", "-d=--", "-l=--size"}},
		{args: []string{"-s", ""}, calls: []string{"-s="}},
		// Long names: =value or the next argument, unique prefixes, an
		// exact name before the names it prefixes.
		{args: []string{"--size=64", "--size", "65", "--sl=", "--ib-d", "x", "--ev", "--long"},
			calls: []string{"-s=64", "-s=65", "-l=", "-d=x", "-e=", "--long-only="}},
		{args: []string{"--ib-dev=a=b"}, calls: []string{"-d=a=b"}},
		{args: []string{"--si", "1", "--sl", "2"}, calls: []string{"-s=1", "-l=2"}},
		{args: []string{"--s"}, err: "t: --s is ambiguous (--size, --sl)"},
		{args: []string{"--ib=1"}, err: "t: --ib is ambiguous (--ib-dev, --ib-port)"},
		{args: []string{"--i"}, err: "t: --i is ambiguous (--ib-dev, --ib-port)"},
		// Missing values; values given to an option without one.
		{args: []string{"-v", "-s"}, calls: []string{"-v="}, err: "t: -s needs a value"},
		{args: []string{"-vd"}, calls: []string{"-v="}, err: "t: -d needs a value"},
		{args: []string{"--size"}, err: "t: --size needs a value"},
		{args: []string{"--ib-p"}, err: "t: --ib-port needs a value"},
		{args: []string{"--events=1"}, err: "t: --events takes no value"},
		{args: []string{"--ev="}, err: "t: --events takes no value"},
		// Unknown options, in order: what came before them is set.
		{args: []string{"-v", "-x", "-V"}, calls: []string{"-v="}, err: "t: unknown flag -x"},
		{args: []string{"-vxV"}, calls: []string{"-v="}, err: "t: unknown flag -x"},
		{args: []string{"--bogus=1"}, err: "t: unknown flag --bogus=1"},
		{args: []string{"--=x"}, err: "t: unknown flag --=x"},
		{args: []string{"---"}, err: "t: unknown flag ---"},
		{args: []string{"-json"}, err: "t: unknown flag -j"},      // without JSON
		{args: []string{"--json"}, err: "t: unknown flag --json"}, // without JSON
		// "--" ends the options.
		{args: []string{"-v", "--"}, calls: []string{"-v="}},
		{args: []string{"-v", "--", "-V"}, calls: []string{"-v="}, err: `t: unexpected argument "-V" (all arguments are flags)`},
		{args: []string{"-v", "--", "-V", "--", "x"}, permute: true, calls: []string{"-v="}, operands: []string{"-V", "--", "x"}},
		// Operands: refused in order, or kept in order among the options.
		{args: []string{"-v", "x", "-x"}, calls: []string{"-v="}, err: `t: unexpected argument "x" (all arguments are flags)`},
		{args: []string{"-"}, err: `t: unexpected argument "-" (all arguments are flags)`},
		{args: []string{""}, err: `t: unexpected argument "" (all arguments are flags)`},
		{args: []string{"a", "-v", "-", "-sb", "c", "--ev", "d"}, permute: true,
			calls: []string{"-v=", "-s=b", "-e="}, operands: []string{"a", "-", "c", "d"}},
		// -h and --help, at their place; -help is -h first.
		{args: []string{"-v", "-h", "-x"}, calls: []string{"-v="}, err: "help"},
		{args: []string{"-x", "-h"}, err: "t: unknown flag -x"},
		{args: []string{"-vh"}, calls: []string{"-v="}, err: "help"},
		{args: []string{"-help"}, err: "help"},
		{args: []string{"--help"}, err: "help"},
		{args: []string{"--he"}, err: "help"},
		{args: []string{"--help=1"}, err: "t: --help takes no value"},
		{args: []string{"-sh"}, calls: []string{"-s=h"}},
		// An error from set stops the walk.
		{args: []string{"-VV", "-v"}, calls: []string{"-V="}, err: "-V twice"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q permute=%v", tt.args, tt.permute), func(t *testing.T) {
			calls, operands, err := parseTest(Getopt{Cmd: "t", Opts: testOpts, Permute: tt.permute}, tt.args)
			switch {
			case tt.err == "help":
				if !errors.Is(err, ErrHelp) {
					t.Errorf("error %v, want ErrHelp", err)
				}
			case tt.err == "-V twice":
				if err == nil || err.Error() != tt.err {
					t.Errorf("error %v, want %q", err, tt.err)
				}
			case tt.err != "":
				if !errors.Is(err, ErrUsage) || err.Error() != "usage: "+tt.err {
					t.Errorf("error %v, want the usage error %q", err, tt.err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			}
			if diff := cmp.Diff(tt.calls, calls); diff != "" {
				t.Errorf("options set (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.operands, operands); diff != "" {
				t.Errorf("operands (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetoptJSON: with JSON, -json and --json (or a prefix of it) set
// it, and -json is one option, not a bundle.
func TestGetoptJSON(t *testing.T) {
	opts := []Opt{{Short: 'j'}, {Short: 's'}, {Short: 'o'}, {Short: 'n'}, {Short: 'k', Long: "jx"}}
	tests := []struct {
		args  []string
		calls []string
		json  bool
		err   string
	}{
		{args: []string{"-json"}, json: true},
		{args: []string{"--json"}, json: true},
		{args: []string{"--js"}, json: true},
		{args: []string{"-s", "--json", "-s"}, calls: []string{"-s=", "-s="}, json: true},
		{args: []string{"-jsonx"}, calls: []string{"-j=", "-s=", "-o=", "-n="}, err: "unknown flag -x"},
		{args: []string{"-j"}, calls: []string{"-j="}},
		{args: []string{"--j"}, err: "--j is ambiguous (--jx, --json)"},
		{args: []string{"--json=1"}, err: "--json takes no value"},
	}
	for _, tt := range tests {
		var json bool
		calls, _, err := parseTest(Getopt{Cmd: "t", Opts: opts, JSON: &json}, tt.args)
		if (err == nil) != (tt.err == "") || err != nil && !strings.HasSuffix(err.Error(), tt.err) {
			t.Errorf("%q: error %v, want %q", tt.args, err, tt.err)
		}
		if json != tt.json || !cmp.Equal(calls, tt.calls) {
			t.Errorf("%q: json %v, set %q; want %v, %q", tt.args, json, calls, tt.json, tt.calls)
		}
	}
}

// FuzzGetopt: Parse never panics; every value it sets is an argument or
// the end of one; the operands are arguments in their order; without
// Permute there are none.
func FuzzGetopt(f *testing.F) {
	for _, s := range []string{"", "-vs64\x00-d\x00x", "--size=1\x00--ib\x00--", "a\x00-v\x00--\x00-b\x00c",
		"-json\x00--js\x00-h", "--ev=\x00---\x00-", "-s"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, permute bool) {
		args := strings.Split(line, "\x00")
		var json bool
		var vals []string
		operands, err := Getopt{Cmd: "t", Opts: testOpts, Permute: permute, JSON: &json}.Parse(args, func(opt Opt, val string) error {
			if (val != "") && !opt.HasArg {
				t.Errorf("%q: %+v without a value set to %q", args, opt, val)
			}
			vals = append(vals, val)
			return nil
		})
		if err != nil && !errors.Is(err, ErrUsage) && !errors.Is(err, ErrHelp) {
			t.Errorf("%q: error %v, want a usage error or ErrHelp", args, err)
		}
		for _, v := range vals {
			if !fromArgs(args, v) {
				t.Errorf("%q: value %q is not from an argument", args, v)
			}
		}
		if !permute && len(operands) > 0 {
			t.Errorf("%q: operands %q without Permute", args, operands)
		}
		rest := args
		for _, op := range operands {
			k := slices.Index(rest, op)
			if k < 0 {
				t.Fatalf("%q: operands %q are not arguments in order", args, operands)
			}
			rest = rest[k+1:]
		}
	})
}

func fromArgs(args []string, v string) bool {
	for _, a := range args {
		if strings.HasSuffix(a, v) {
			return true
		}
	}
	return false
}
