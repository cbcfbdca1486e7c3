// Package clitest runs a purerdma command in tests as purerdma would,
// through cli.Set's dispatch, with no other commands registered.
package clitest

import (
	"bytes"
	"context"
	"net"

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

// T is the part of *testing.T FreePort uses.
type T interface {
	Helper()
	Fatal(args ...any)
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
