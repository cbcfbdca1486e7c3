package rsocket_test

import (
	"os"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

// TestMain runs the tests, or with helperEnv set the helper process that
// TestKilledPeer starts and kills.
func TestMain(m *testing.M) {
	if addr := os.Getenv(helperEnv); addr != "" {
		os.Exit(helperMain(addr))
	}
	testutils.Main(m)
}
