package examples_test

import (
	"testing"
)

// TestExample02ReadToVolatile: the client reads the server's greeting
// from its DRAM.
func TestExample02ReadToVolatile(t *testing.T) {
	runExample(t, example{name: "02-read-to-volatile",
		clientOut: []string{"Read a message: Hello client!\n"}})
}
