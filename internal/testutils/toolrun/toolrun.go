// Package toolrun runs the two ends of a connection for the tests of
// purerdma's commands against rdma-core's tools (rping, rstream, rcopy):
// a Go command in the test process or a C tool as a process, each ending
// in a Result, and waits for a server's rdma_cm listener.
package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// Tool finds one of rdma-core's tools: rping (rdmacm-utils) or rdma
// (iproute2). Its absence fails the test where the environment promises
// the tools (the VM) and skips it elsewhere.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if testenv.RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1 but %s is missing (scripts/install-deps installs it): %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// Result is how one end of a run ended.
type Result struct {
	Code           int
	Stdout, Stderr string
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// RunFunc runs a Go command line (without the program name) in the test
// process and returns its exit status: purerdma's dispatch.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Start starts one end of an interop run under ctx: the command line
// args after goCmd, run by run in the test process, or (with c) the C
// tool at path. It returns the pid the end's rdma_cm IDs belong to and
// where its result arrives; name describes the end in a failure.
func Start(t testing.TB, ctx context.Context, run RunFunc, goCmd, path string, c bool, args []string, name fmt.Stringer) (int, <-chan Result) {
	t.Helper()
	done := make(chan Result, 1)
	if !c {
		go func() {
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{goCmd}, args...), &stdout, &stderr)
			done <- Result{code, stdout.String(), stderr.String()}
		}()
		return os.Getpid(), done
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", name, err)
	}
	go func() {
		code := ExitCode(cmd.Wait(), &stderr)
		done <- Result{code, stdout.String(), stderr.String()}
	}()
	return cmd.Process.Pid, done
}

// ExitCode is a finished tool's exit status from its Run or Wait error:
// -1 when it did not exit normally. A non-nil err is appended to stderr.
func ExitCode(err error, stderr *bytes.Buffer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "[%v]", err)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Listening reports whether process pid has an rdma_cm ID listening on
// port, from the kernel's resource tracking (the rdma tool at rdma: rdma
// res show cm_id). rdma_cm listeners are not sockets, so /proc/net/tcp
// does not show them, and a probe connection would use up a
// one-connection server. A listener bound to an address of an RDMA
// device is tracked on that device; the tests bind servers to device
// 0's. The kernel names the thread that created the ID, so any thread of
// pid counts. The output is returned for error messages.
func Listening(ctx context.Context, rdma string, port, pid int) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, rdma, "-j", "res", "show", "cm_id").Output()
	if err != nil {
		return false, string(out), fmt.Errorf("rdma res show cm_id: %w", err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return false, "", nil
	}
	var ids []struct {
		State   string `json:"state"`
		PID     int    `json:"pid"`
		SrcAddr string `json:"src-addr"`
	}
	if err := json.Unmarshal(out, &ids); err != nil {
		return false, string(out), fmt.Errorf("rdma res show cm_id: %w", err)
	}
	for _, id := range ids {
		ap, err := netip.ParseAddrPort(id.SrcAddr)
		if err != nil || id.State != "LISTEN" || int(ap.Port()) != port {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, id.PID)); err == nil {
			return true, string(out), nil
		}
	}
	return false, string(out), nil
}

// WaitListening waits until the server started as pid listens on port.
// It fails the test, after ending the server (cancel), if the server
// exits first or does not listen before ctx ends.
func WaitListening(t testing.TB, ctx context.Context, cancel func(), rdma string, port, pid int, done <-chan Result) {
	t.Helper()
	for {
		ok, out, err := Listening(ctx, rdma, port, pid)
		if err != nil && ctx.Err() == nil {
			cancel()
			t.Fatalf("%v\n%s\nserver: %v", err, out, <-done)
		}
		if ok {
			return
		}
		select {
		case r := <-done:
			t.Fatalf("the server exited before it listened on %d: %v", port, r)
		case <-ctx.Done():
			t.Fatalf("the server did not listen on %d before the run's deadline: %v\nrdma res show cm_id: %s", port, <-done, out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DecodeOneJSON decodes out, which must hold exactly one JSON document
// with no fields that v lacks, into v.
func DecodeOneJSON(out string, v any) error {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON document")
	}
	return nil
}
