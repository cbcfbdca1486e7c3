package main

import (
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/purerdma/rdma/internal/testutils/pingpongrun"
)

// The pingpong helpers of this package's VM tests that run the command
// (devcheck_vm_test.go, peer_vm_test.go); the pingpong command's own
// tests are in internal/pingpong.

// ppPorts hands each run its own TCP port, so no run meets another's
// listener or TIME_WAIT.
var ppPorts atomic.Int32

func ppNextPort() int { return 18600 + int(ppPorts.Add(1)) }

// ppResult is how one end of a run exited and what it printed.
type ppResult struct {
	code           int
	stdout, stderr string
}

// ppCTool finds rdma-core's ibv_KIND_pingpong (pingpongrun.CTool).
func ppCTool(t *testing.T, kind string) string {
	t.Helper()
	return pingpongrun.CTool(t, kind)
}

// ppListening reports whether a TCP socket listens on port
// (pingpongrun.Listening).
func ppListening(port int) bool { return pingpongrun.Listening(port) }

// ppAddresses lists the "LID QPN PSN GID" of the lines re matches
// (pingpongrun.Addresses).
func ppAddresses(out string, re *regexp.Regexp) []string { return pingpongrun.Addresses(out, re) }

// The output lines the tests read (pingpongrun).
var (
	ppLocalRE  = pingpongrun.LocalRE
	ppRemoteRE = pingpongrun.RemoteRE
	ppBytesRE  = pingpongrun.BytesRE
	ppItersRE  = pingpongrun.ItersRE
)
