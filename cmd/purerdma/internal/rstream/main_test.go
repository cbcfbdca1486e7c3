package rstream

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// riostreamCmd is "purerdma riostream" as package riostream defines it
// (its Run is Stream's riostream), for the riostream tests here, which
// share rstream's run helpers; package riostream imports this one.
var riostreamCmd = cli.Command{
	Name: "riostream",
	Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return Stream(ctx, "riostream", args, stdout, stderr)
	},
}

// commands is purerdma with rstream and riostream its commands.
var commands = func() cli.Set {
	s := cli.Set{}
	s.Add(Command)
	s.Add(riostreamCmd)
	return s
}()

// runContext runs a purerdma command line of those commands.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return commands.Run(ctx, args, stdout, stderr)
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runContext(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// usage is what that purerdma prints after a bad command line.
func usage() string { return commands.Usage() }

// linkAddHint says how to get a device where there is none.
const linkAddHint = devs.LinkAddHint

// runChecked runs a command line that must fail its device check
// (clitest.RunChecked).
func runChecked(t *testing.T, args []string, want string) {
	t.Helper()
	clitest.RunChecked(t, runContext, args, want)
}
