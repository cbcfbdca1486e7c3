package uverbs_test

import (
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// TestExample runs the package example in the VM (it log.Fatals on any
// error), so the documentation cannot rot.
func TestExample(t *testing.T) {
	testenv.Devices(t, 2)
	Example()
}
