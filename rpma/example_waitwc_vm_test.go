package rpma_test

import (
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// TestExampleWaitWC runs ExampleCQ_WaitWC in the VM (it log.Fatals on
// any error), so the documentation cannot rot.
func TestExampleWaitWC(t *testing.T) {
	testenv.Devices(t, 2)
	ExampleCQ_WaitWC()
}
