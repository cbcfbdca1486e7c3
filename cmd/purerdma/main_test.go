package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs"
)

// TestMain runs the tests or, with mainEnv set, the command itself with
// the arguments after the program name, as a process the tests start.
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" {
		os.Exit(runContext(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	testutils.Main(m)
}

// mainEnv makes the test binary the purerdma command (TestMain).
const mainEnv = "PURERDMA_TEST_RUN_COMMAND"

// useFakes points the commands at fake devices and RDMA netlink for the
// rest of the test.
func useFakes(t *testing.T, ds []uverbs.Device, c *devstest.Netlink) {
	t.Helper()
	devstest.UseDevices(t, ds, nil)
	devstest.UseNetlink(t, c)
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args    []string
		message string // the line before the usage text, if any
	}{
		{nil, ""},
		{[]string{"frobnicate"}, `purerdma: unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `purerdma: help: unknown command "frobnicate"`},
		{[]string{"help", "link", "devices"}, "purerdma: help takes at most one command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := &devstest.Netlink{}
			useFakes(t, nil, c)
			code, stdout, stderr := runArgs(tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			want := usage()
			if tt.message != "" {
				want = tt.message + "\n" + usage()
			}
			if diff := cmp.Diff(want, stderr); diff != "" {
				t.Errorf("stderr mismatch (-want +got):\n%s", diff)
			}
			if len(c.Calls) != 0 {
				t.Errorf("a bad command line reached netlink: %v", c.Calls)
			}
		})
	}
}

// TestHelp asks every registered command for its help, in each way there
// is: each prints its usage and example command lines on stdout and
// exits 0.
func TestHelp(t *testing.T) {
	if len(commands) < 6 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for name, c := range commands {
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {name, "-help"}, {"help", name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				useFakes(t, nil, &devstest.Netlink{})
				code, stdout, stderr := runArgs(args...)
				if code != 0 || stderr != "" {
					t.Errorf("exit status %d, stderr %q; want 0 and no errors", code, stderr)
				}
				if stdout != commandHelp(c) {
					t.Errorf("stdout = %q, want the command's help", stdout)
				}
				if !strings.Contains(stdout, "Examples:\n  purerdma "+name) {
					t.Errorf("the help has no example command line:\n%s", stdout)
				}
				if !strings.Contains(stdout, c.Usage) || !strings.Contains(stdout, exitText) {
					t.Errorf("the help lacks the usage or the exit statuses:\n%s", stdout)
				}
			})
		}
	}
	// Help flags further along the command line.
	for _, args := range [][]string{
		{"link", "show", "-h"}, {"link", "help"}, {"devinfo", "-v", "--help"}, {"devinfo", "-lh"},
		{"bench", "write_lat", "-h"}, {"bench", "connect", "-h"}, {"ping", "-s", "-h"},
	} {
		code, stdout, _ := runArgs(args...)
		if want := commandHelp(commands[args[0]]); code != 0 || stdout != want {
			t.Errorf("%q = %d, stdout %q; want 0 and the help", args, code, stdout)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		code, stdout, stderr := runArgs(args...)
		if code != 0 || stdout != usage() || stderr != "" {
			t.Errorf("%q = %d, stdout %q, stderr %q; want 0 and the usage", args, code, stdout, stderr)
		}
	}
	for name := range commands {
		if !strings.Contains(usage(), "\n  "+name+" ") {
			t.Errorf("the usage does not list %s", name)
		}
	}
}

// TestExitStatus checks each exit status the usage documents.
func TestExitStatus(t *testing.T) {
	for _, s := range []string{"0 success", "1 the operation failed", "2 bad command line"} {
		if !strings.Contains(usage(), s) {
			t.Errorf("the usage does not document exit status %q", s)
		}
	}
	useFakes(t, nil, &devstest.Netlink{})
	if code, _, _ := runArgs("link", "show"); code != 0 {
		t.Errorf("a working command exited %d, want 0", code)
	}
	useFakes(t, nil, &devstest.Netlink{Err: &rdmanl.OpError{Op: "GET", Err: syscall.EPERM}})
	if code, _, _ := runArgs("link", "show"); code != 1 {
		t.Errorf("a failing command exited %d, want 1", code)
	}
	useFakes(t, nil, &devstest.Netlink{})
	if code, _, stderr := runArgs("devinfo"); code != 1 || !strings.Contains(stderr, "no RDMA device") {
		t.Errorf("devinfo without devices exited %d (stderr %q), want 1 and a message", code, stderr)
	}
	if code, _, _ := runArgs("link", "frob"); code != 2 {
		t.Errorf("a bad command line exited %d, want 2", code)
	}
}
