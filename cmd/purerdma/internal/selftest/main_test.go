package selftest

import (
	"context"
	"io"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// runArgs runs a purerdma command line with selftest its one command.
func runArgs(args ...string) (code int, stdout, stderr string) { return clitest.Run(Command, args...) }

// runContext is purerdma's dispatch with selftest its one command.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return clitest.Set(Command).Run(ctx, args, stdout, stderr)
}

// usage is what that purerdma prints after a bad command line.
func usage() string { return clitest.Set(Command).Usage() }
