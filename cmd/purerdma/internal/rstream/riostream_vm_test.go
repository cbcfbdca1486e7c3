package rstream

import (
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// The riostream tests: the Go command against rdma-core's riostream both
// ways and against itself, on rsocket's iomap (riomap and riowrite).
// Every run verifies its data (-T v): the last transfer of each
// iteration carries the two sides' byte counters, so a write that landed
// at the wrong offset, or after the marker, fails the run.

// rioVMSizes are custom runs of a few seconds under emulation: one-byte
// transfers (the marker alone), sizes below and above rsocket's first
// transfer and its largest, and a send buffer smaller than a transfer.
var rioVMSizes = [][]string{
	{"-S", "1", "-C", "10", "-I", "20"},
	{"-S", "64", "-C", "100", "-I", "10"},
	{"-S", "4096", "-C", "50", "-I", "4"},
	{"-S", "65537", "-C", "16", "-I", "2"},
	{"-S", "1048576", "-C", "4", "-I", "2"},
	{"-S", "3000", "-C", "20", "-I", "2", "-B", "1024"},
	// C's blocking and rpoll calls (the Go side's are the same in every
	// mode).
	{"-S", "4096", "-C", "20", "-I", "2", "-T", "b"},
	{"-S", "4096", "-C", "20", "-I", "2", "-T", "a"},
}

// rioVMRun runs one riostream server and client pair with args on both.
// C riostream's client does not bind -b, so its connections may run
// over one device; the Go client binds rxe1's address.
func rioVMRun(t *testing.T, cServer, cClient bool, args []string) {
	t.Helper()
	testenv.Devices(t, 2)
	common := append([]string{"-T", "v"}, args...)
	server := rsEnd{c: cServer, tool: "riostream", args: append([]string{"-b", rpServerAddr}, common...)}
	client := rsEnd{c: cClient, tool: "riostream", args: append([]string{"-s", rpServerAddr, "-b", rpClientAddr}, common...)}
	sr, cr := rsPair(t, server, client, rpNextPort(), rsVMTimeout, rsWaitRDMA)
	rsCheck(t, server, client, sr, cr, rsWantRows(t, common))
}

func TestRiostreamInteropGoServerCClient(t *testing.T) {
	for _, args := range rioVMSizes {
		t.Run(rsRunName(args), func(t *testing.T) { rioVMRun(t, false, true, args) })
	}
}

func TestRiostreamInteropCServerGoClient(t *testing.T) {
	for _, args := range rioVMSizes {
		t.Run(rsRunName(args), func(t *testing.T) { rioVMRun(t, true, false, args) })
	}
}

func TestRiostreamGoGo(t *testing.T) {
	for _, args := range rioVMSizes {
		t.Run(rsRunName(args), func(t *testing.T) { rioVMRun(t, false, false, args) })
	}
}
