package rpma_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

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

// waitListening polls iproute2's `rdma res show cm_id` for an rdma_cm
// ID listening on addr.
func waitListening(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		out, err := exec.Command("rdma", "-j", "res", "show", "cm_id").Output()
		if err != nil {
			t.Fatalf("rdma res show cm_id: %v", err)
		}
		if s := string(out); strings.Contains(s, `"state":"LISTEN"`) && strings.Contains(s, `"src-addr":"`+addr+`"`) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no rdma_cm listener on %s within %v", addr, d)
}
