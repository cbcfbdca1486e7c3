package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
)

func TestWords(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		words []string
		json  bool
		err   string // "" for none; "help" for ErrHelp
	}{
		{nil, nil, false, ""},
		{[]string{"qp", "-json", "rxe0"}, []string{"qp", "rxe0"}, true, ""},
		{[]string{"--json"}, nil, true, ""},
		{[]string{"rxe0", "-h"}, nil, false, "help"},
		{[]string{"help"}, nil, false, "help"},
		{[]string{"--help", "-x"}, nil, false, "help"},
		{[]string{"-x", "rxe0"}, nil, false, `usage: res: unknown flag "-x"`},
	} {
		words, jsonOut, err := Words("res", tt.args)
		switch {
		case tt.err == "help":
			if !errors.Is(err, ErrHelp) {
				t.Errorf("Words(%q) = %v, want ErrHelp", tt.args, err)
			}
		case tt.err != "":
			if !errors.Is(err, ErrUsage) || err.Error() != tt.err {
				t.Errorf("Words(%q) = %v, want the usage error %q", tt.args, err, tt.err)
			}
		case err != nil || !slices.Equal(words, tt.words) || jsonOut != tt.json:
			t.Errorf("Words(%q) = %q, %v, %v; want %q, %v", tt.args, words, jsonOut, err, tt.words, tt.json)
		}
	}
}

func TestParseLink(t *testing.T) {
	for _, tt := range []struct {
		in   string
		dev  string
		port uint32
		ok   bool
	}{
		{"", "", 0, true},
		{"rxe0", "rxe0", 0, true},
		{"rxe0/2", "rxe0", 2, true},
		{"rxe0/0", "", 0, false},
		{"rxe0/x", "", 0, false},
		{"/1", "", 0, false},
	} {
		dev, port, err := ParseLink(tt.in)
		if tt.ok != (err == nil) || dev != tt.dev || port != tt.port {
			t.Errorf("ParseLink(%q) = %q, %d, %v", tt.in, dev, port, err)
		}
		if err != nil && !errors.Is(err, ErrUsage) {
			t.Errorf("ParseLink(%q): %v is no usage error", tt.in, err)
		}
	}
}

// TestSetRun runs command lines through a set of two commands: the exit
// statuses, and what goes to stdout and stderr.
func TestSetRun(t *testing.T) {
	boom := errors.New("boom")
	s := Set{}
	s.Add(Command{Name: "b", Usage: "  b   the second\n", Help: "Examples:\n  purerdma b\n",
		Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			switch {
			case len(args) == 0:
				io.WriteString(stdout, "ran b\n")
				return nil
			case args[0] == "fail":
				return boom
			case args[0] == "bad":
				return UsageError("b: bad %q", args[0])
			}
			return ErrHelp
		}})
	s.Add(Command{Name: "a", Usage: "  a   the first"})
	usage := UsageHeader + "  a   the first\n  b   the second\n" + ExitText
	helpB := "usage:\n  b   the second\n\nExamples:\n  purerdma b\n\n" + ExitText
	for _, tt := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, 2, "", usage},
		{[]string{"-h"}, 0, usage, ""},
		{[]string{"help"}, 0, usage, ""},
		{[]string{"help", "b"}, 0, helpB, ""},
		{[]string{"help", "c"}, 2, "", "purerdma: help: unknown command \"c\"\n" + usage},
		{[]string{"help", "a", "b"}, 2, "", "purerdma: help takes at most one command\n" + usage},
		{[]string{"c"}, 2, "", "purerdma: unknown command \"c\"\n" + usage},
		{[]string{"b"}, 0, "ran b\n", ""},
		{[]string{"b", "--help"}, 0, helpB, ""},
		{[]string{"b", "x", "-h"}, 0, helpB, ""},
		{[]string{"b", "fail"}, 1, "", "purerdma: boom\n"},
		{[]string{"b", "bad"}, 2, "", "purerdma: b: bad \"bad\"\n" + usage},
	} {
		var stdout, stderr bytes.Buffer
		code := s.Run(context.Background(), tt.args, &stdout, &stderr)
		if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
			t.Errorf("%q = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a second command a did not panic")
		}
	}()
	s.Add(Command{Name: "a"})
}

// TestCFloat: %.2f, and C's spellings of what is not a finite number.
func TestCFloat(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{0, "0.00"}, {2.5, "2.50"}, {1234.567, "1234.57"},
		{math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "-nan"},
	} {
		if got := CFloat(tt.v); got != tt.want {
			t.Errorf("CFloat(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
