package rdmacm_test

import "testing"

// TestExampleGetRecvComp runs ExampleID_GetRecvComp in the VM (it
// log.Fatals on any error, and would wait for its context if
// GetRecvComp did not see the server's close), so the documentation
// cannot rot.
func TestExampleGetRecvComp(t *testing.T) {
	needDevices(t)
	ExampleID_GetRecvComp()
}
