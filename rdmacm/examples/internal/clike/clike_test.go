package clike

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// TestGetopt checks the parse and the messages against what glibc's
// getopt does with the same arguments (the cases were run through a C
// program on Debian 12's glibc 2.36).
func TestGetopt(t *testing.T) {
	for _, c := range []struct {
		args     string
		opts     []Opt
		operands []string
		stderr   string
	}{
		{"p -s -a host", []Opt{{'s', ""}, {'a', "host"}}, nil, ""},
		{"p -sahost -p5 x", []Opt{{'s', ""}, {'a', "host"}, {'p', "5"}}, []string{"x"}, ""},
		{"p x -s -- -a", []Opt{{'s', ""}}, []string{"x", "-a"}, ""},
		{"p -s -x -a h", []Opt{{'s', ""}, {'?', ""}}, nil, "p: invalid option -- 'x'\n"},
		{"p -a", []Opt{{'?', ""}}, nil, "p: option requires an argument -- 'a'\n"},
		{"p -:", []Opt{{'?', ""}}, nil, "p: invalid option -- ':'\n"},
		{"p - -s", []Opt{{'s', ""}}, []string{"-"}, ""},
	} {
		var stderr strings.Builder
		opts, operands := Getopt(&stderr, strings.Fields(c.args), "sa:p:")
		if diff := cmp.Diff(c.opts, opts); diff != "" {
			t.Errorf("%q: options (-want +got):\n%s", c.args, diff)
		}
		if diff := cmp.Diff(c.operands, operands); diff != "" {
			t.Errorf("%q: operands (-want +got):\n%s", c.args, diff)
		}
		if stderr.String() != c.stderr {
			t.Errorf("%q: stderr %q, want %q", c.args, stderr.String(), c.stderr)
		}
	}
}

func TestAtoiStrtol(t *testing.T) {
	for s, want := range map[string]int{"": 0, "12": 12, " -7x": -7, "+3": 3, "abc": 0, "0x10": 0, "4294967297": 1} {
		if got := Atoi(s); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]int64{"0x111": 0x111, "0X2": 2, "010": 8, "9": 9, "0x": 0, "-0x10": -16, "99999999999999999999": 1<<63 - 1} {
		if got := Strtol(s, 0); got != want {
			t.Errorf("Strtol(%q, 0) = %d, want %d", s, got, want)
		}
	}
}

func TestErrno(t *testing.T) {
	wrapped := fmt.Errorf("bind: %w", &os.SyscallError{Syscall: "write", Err: syscall.EADDRNOTAVAIL})
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, -1},
		{errors.New("no errno"), -1},
		{syscall.EINVAL, 22},
		{wrapped, 99},
		{errors.Join(errors.New("x"), wrapped), 99},
	} {
		if got := Errno(c.err, -1); got != c.want {
			t.Errorf("Errno(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestCMErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("connect: %w", rdmacm.ErrRejected), 111},
		{&os.SyscallError{Syscall: "write", Err: syscall.EADDRNOTAVAIL}, 99},
		{errors.New("no errno"), 22},
	} {
		if got := CMErrno(c.err); got != c.want {
			t.Errorf("CMErrno(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestIsWCStatus(t *testing.T) {
	if !IsWCStatus(fmt.Errorf("send: %w", uverbs.WCRetryExcErr)) {
		t.Error("a wrapped WCStatus is not a completion's status")
	}
	if IsWCStatus(syscall.EINVAL) {
		t.Error("EINVAL is a completion's status")
	}
}

func TestEventStr(t *testing.T) {
	if got, want := EventStr(rdmacm.EventEstablished), "RDMA_CM_EVENT_ESTABLISHED"; got != want {
		t.Errorf("EventStr(EventEstablished) = %q, want %q", got, want)
	}
}

// TestVerbErr checks VERB_ERR's line on stderr.
func TestVerbErr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stderr := os.Stderr
	os.Stderr = w
	VerbErr("rdma_connect", -1, 111)
	os.Stderr = stderr
	w.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "rdma_connect returned -1 errno 111\n"; string(got) != want {
		t.Errorf("VerbErr wrote %q, want %q", got, want)
	}
}
