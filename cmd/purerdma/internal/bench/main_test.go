package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// runArgs runs a purerdma command line with bench its one command and
// returns the exit status and what it printed.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = clitest.Set(Command).Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}
