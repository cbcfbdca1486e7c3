// Package examples_test runs the manual's verbs example (rc-example)
// in the VM, against the C program built from the manual's listing
// (internal/testutils/examplerun builds and runs them).
package examples_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/internal/testutils/examplerun"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// waitListening waits until a TCP socket listens on port (IPv4, any
// address), as /proc/net/tcp shows: the listing prints that it waits
// before it calls listen, so its line does not say the port is open.
func waitListening(t *testing.T, p *examplerun.Proc, port int) {
	t.Helper()
	needle := fmt.Sprintf(":%04X 00000000:0000 0A ", port)
	p.WaitUntil(t, fmt.Sprintf("listening on %d", port), func() bool {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, []byte(needle))
	})
}
