package testenv

import (
	"strings"
	"testing"
)

// TestPeerHostOutsideBed: without the bed's environment PeerHost skips
// on a plain host and fails where devices are promised.
func TestPeerHostOutsideBed(t *testing.T) {
	for _, name := range []string{"RXEVM_PEER_ADDR", "RXEVM_LOCAL_ADDR", "RXEVM_PEER_DEV", "RXEVM_LOCAL_DEV"} {
		t.Setenv(name, "")
	}
	t.Run("host", func(t *testing.T) {
		t.Setenv("PURERDMA_REQUIRE_DEVICE", "")
		r := &recorder{TB: t}
		if p := PeerHost(r); p != nil {
			t.Errorf("PeerHost = %+v, want nil", p)
		}
		if r.failed != "" {
			t.Errorf("failed: %s", r.failed)
		}
		if !strings.Contains(r.skipped, "peer host") || !strings.Contains(r.skipped, "PURERDMA_PEER_KERNEL=") {
			t.Errorf("skip message %q does not name the peer host and how to run in the bed", r.skipped)
		}
	})
	t.Run("VM", func(t *testing.T) {
		t.Setenv("PURERDMA_REQUIRE_DEVICE", "1")
		r := &recorder{TB: t}
		if p := PeerHost(r); p != nil {
			t.Errorf("PeerHost = %+v, want nil", p)
		}
		if r.skipped != "" {
			t.Errorf("skipped: %s", r.skipped)
		}
		if !strings.Contains(r.failed, "PURERDMA_REQUIRE_DEVICE=1") || !strings.Contains(r.failed, "RXEVM_PEER_ADDR") {
			t.Errorf("failure %q does not name PURERDMA_REQUIRE_DEVICE=1 and the missing variable", r.failed)
		}
	})
}
