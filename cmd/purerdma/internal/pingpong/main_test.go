package pingpong

import (
	"context"
	"io"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// run runs a purerdma command line with pingpong its one command and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return clitest.Set(Command).Run(context.Background(), args, stdout, stderr)
}
