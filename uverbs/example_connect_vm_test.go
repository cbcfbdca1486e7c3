package uverbs_test

import (
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// TestConnectExamples runs the examples of ConnectRC, PollContext and
// the GID helpers in the VM (they log.Fatal on any error), so the
// documentation cannot rot.
func TestConnectExamples(t *testing.T) {
	testenv.Devices(t, 2)
	for name, ex := range map[string]func(){
		"QP.ConnectRC":           ExampleQP_ConnectRC,
		"CQ.PollContext":         ExampleCQ_PollContext,
		"Context.RoCEv2GIDIndex": ExampleContext_RoCEv2GIDIndex,
		"Context.RoCEv2GID":      ExampleContext_RoCEv2GID,
	} {
		t.Run(name, func(t *testing.T) { ex() })
	}
}
