package rsocket_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// TestExamples runs the net/http example in the VM, so the
// documentation cannot rot (it log.Fatals on any error), and checks what
// it printed.
func TestExamples(t *testing.T) {
	testenv.Devices(t, 2)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	Example_http()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	r.Close()
	if got := out.String(); !strings.HasPrefix(got, "hello over RDMA, 198.18.0.2:") {
		t.Fatalf("Example_http printed %q", got)
	}
	t.Logf("Example_http: %s", strings.TrimSpace(out.String()))
}
