package riostream

import (
	"strings"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
)

// TestRiostreamCommand: the command takes its help flag, and refuses
// rstream's flags that riostream has not (-k, -T s) with exit status 2
// and a message naming riostream. Package rstream's tests run the
// transfers.
func TestRiostreamCommand(t *testing.T) {
	code, stdout, stderr := clitest.Run(Command, "riostream", "-h")
	if code != 0 || stdout != Command.HelpText() || stderr != "" {
		t.Errorf("riostream -h = %d, stdout %q, stderr %q; want 0 and the help", code, stdout, stderr)
	}
	for _, bad := range [][]string{{"-k", "5"}, {"-T", "s"}} {
		code, stdout, stderr := clitest.Run(Command, append([]string{"riostream"}, bad...)...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "purerdma: riostream: ") {
			t.Errorf("riostream %q = %d, stdout %q, stderr %q; want 2 and an error naming riostream", bad, code, stdout, stderr)
		}
	}
}
