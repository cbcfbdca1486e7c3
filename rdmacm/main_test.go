package rdmacm_test

import (
	"os"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

// TestMain runs the tests, or with RDMACM_TEST_HELPER set the helper
// process that TestDisconnectOnPeerKill starts and kills.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	testutils.Main(m)
}
