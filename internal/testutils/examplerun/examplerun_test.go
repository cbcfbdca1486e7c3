package examplerun

import (
	"context"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

func TestMatchLines(t *testing.T) {
	for _, c := range []struct {
		name string
		out  string
		want []string
		err  string // a part of the error; "" for none
	}{
		{"equal", "a\nb\n", []string{"a", "b"}, ""},
		{"no final newline", "a\nb", []string{"a", "b"}, ""},
		{"regexp", "qp 0x1f\n", []string{"~qp 0x[0-9a-f]+"}, ""},
		{"regexp is the whole line", "qp 0x1f!\n", []string{"~qp 0x[0-9a-f]+"}, `line 1 is "qp 0x1f!", want one matching`},
		{"alternatives anchored", "xb\n", []string{"~a|b"}, "want one matching"},
		{"differs", "a\nc\n", []string{"a", "b"}, `line 2 is "c", want "b"`},
		{"missing", "a\n", []string{"a", "b"}, `missing line 2, want "b"`},
		{"extra", "a\nb\n", []string{"a"}, `extra line 2: "b"`},
		{"empty line", "a\n\nb\n", []string{"a", "", "b"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := MatchLines(c.out, c.want)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("MatchLines(%q, %q) = %v, want an error with %q", c.out, c.want, err, c.err)
			}
		})
	}
}

// TestProc runs a shell that prints on both streams and exits 3.
func TestProc(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := Start(t, ctx, "sh", "/bin/sh", "sh", false, "-c", "echo 'qp 0x1f'; echo oops >&2; echo done; exit 3")
	p.WaitFor(t, "oops")
	p.Expect(t, 3, []string{"~qp 0x[0-9a-f]+", "done"})
	<-p.Exited()
	if got := p.Wait(t); got != 3 {
		t.Errorf("Wait = %d, want 3", got)
	}
	if got := p.Field(`qp (0x[0-9a-f]+)`); got != "0x1f" {
		t.Errorf("Field = %q, want 0x1f", got)
	}
	if got := p.Stderr(); got != "oops\n" {
		t.Errorf("Stderr = %q, want %q", got, "oops\n")
	}
	ran := false
	p.WaitUntil(t, "never", func() bool { ran = true; return true })
	if !ran {
		t.Error("WaitUntil did not check its condition")
	}
}
