package rpma_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/testenv"
)

// TestExamples runs the package's examples against each other in the
// VM, so the documentation cannot rot: they log.Fatal on any error.
func TestExamples(t *testing.T) {
	testenv.Devices(t, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ExamplePeer_Listen()
	}()
	// The client example does not retry a request that finds no
	// listener: wait until the kernel lists the server's.
	waitListening(t, "198.18.0.1:7474", 30*time.Second)
	ExamplePeer_NewConnReq()
	<-done
}

// waitListening polls the kernel's table of rdma_cm IDs (rdmactl, as
// `rdma res show cm_id` shows it) for an ID listening on addr.
func waitListening(t testing.TB, addr string, d time.Duration) {
	t.Helper()
	want := netip.MustParseAddrPort(addr)
	c, err := rdmactl.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ids, err := c.CMIDs("")
		if err != nil {
			t.Fatalf("listing rdma_cm IDs: %v", err)
		}
		for _, id := range ids {
			if id.State == rdmactl.CMListen && id.Src.Valid && id.Src.Value == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no rdma_cm listener on %s within %v", addr, d)
}
