// Package clitest runs a purerdma command in tests as purerdma would,
// through cli.Set's dispatch, with no other commands registered.
package clitest

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
)

// Run runs the command line args ("devices", "-json") with only c
// registered and returns the exit status and what it printed.
func Run(c cli.Command, args ...string) (code int, stdout, stderr string) {
	return RunContext(context.Background(), c, args...)
}

// RunContext is Run with a context.
func RunContext(ctx context.Context, c cli.Command, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Set(c).Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// Set is the commands purerdma would have if c were its only one.
func Set(c cli.Command) cli.Set {
	s := cli.Set{}
	s.Add(c)
	return s
}

// T is the part of *testing.T FreePort and RunChecked use.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// FreePort returns a TCP port of the loopback that nothing listens on
// right now, for a command's server in a test.
func FreePort(t T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// DeviceCheckTimeout bounds a command that should fail at once: one that
// waits for a peer instead runs into it and fails the test.
const DeviceCheckTimeout = 20 * time.Second

// RunChecked runs a command line, through run, that must fail its
// device check: exit status 1, nothing on stdout, and stderr with want,
// without waiting for a peer.
func RunChecked(t T, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int, args []string, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DeviceCheckTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	if ctx.Err() != nil {
		t.Fatalf("%q still waited after %v: exit %d, stderr %q", args, DeviceCheckTimeout, code, stderr.String())
	}
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("%q = %d, stdout %q, stderr %q; want 1, nothing and %q", args, code, stdout.String(), stderr.String(), want)
	}
}
