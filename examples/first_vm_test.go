// Package examples holds the test of docs/getting-started.md's
// programs, which are in its subdirectories.
package examples_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// TestFirstPrograms runs docs/getting-started.md's programs in the VM
// as its commands do, built as users build them (make examples puts
// them in $PURERDMA_EXAMPLES_BIN-first; building inside the emulated VM
// would take minutes), and checks what each prints.
func TestFirstPrograms(t *testing.T) {
	testenv.Devices(t, 2)
	dir := os.Getenv("PURERDMA_EXAMPLES_BIN")
	if dir == "" {
		t.Fatal("PURERDMA_EXAMPLES_BIN is not set: run the VM tests with make vmtest (make examples builds the programs)")
	}
	dir += "-first"
	for _, p := range []struct {
		name string
		want string
	}{
		{"first-verbs", `^rxe1 received "hello from rxe0"\n$`},
		{"first-rdmacm", `^server: received "ping"\nclient: the server answered "pong"\n$`},
		{"first-rpma", `^client: wrote, flushed and read back "hello, rpma"\nserver: my memory holds "hello, rpma"\n$`},
		{"first-rsocket", `^198\.18\.0\.2:\d+ -> 198\.18\.0\.1:7471 echoed "hello over RDMA\\n"\n$`},
	} {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, filepath.Join(dir, p.name))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", p.name, err, stdout.String(), stderr.String())
			}
			if !regexp.MustCompile(p.want).Match(stdout.Bytes()) || stderr.Len() != 0 {
				t.Errorf("%s printed %q (stderr %q); want %s", p.name, stdout.String(), stderr.String(), p.want)
			}
		})
	}
}
