// Package examples_test runs the manual's verbs example (rc-example)
// in the VM, against the C program built from the manual's listing.
package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/testenv"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// goBinary is the Go program name, built on the host by `make examples`
// into $PURERDMA_EXAMPLES_BIN-manual (bin/examples-manual by default):
// building it inside the emulated VM would take minutes.
func goBinary(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("PURERDMA_EXAMPLES_BIN")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "examples")
	}
	p, err := filepath.Abs(filepath.Join(dir+"-manual", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (run `make examples`, or make vmtest, which builds them)", p, err)
	}
	return p
}

var cBuilds struct {
	sync.Mutex
	bins map[string]string
}

// cBinary compiles the C listing src (a path from this directory) with
// the manual's flags for it and libs, once per test binary, into a temporary directory that outlives
// the tests (the VM is thrown away). Missing gcc or headers fail the
// test in the VM, which promises them (scripts/install-deps), and skip
// it elsewhere. The listings are the manual's, warnings and all, so
// they are built without -Werror; -U_FORTIFY_SOURCE keeps a fortifying
// compiler from stopping the listing's strcpy overruns, which the
// programs survive on glibc.
func cBinary(t *testing.T, src string, flags []string, libs ...string) string {
	t.Helper()
	cBuilds.Lock()
	defer cBuilds.Unlock()
	if p := cBuilds.bins[src]; p != "" {
		return p
	}
	unavailable := func(why string) {
		t.Helper()
		if testenv.RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: %s (scripts/install-deps installs it)", why)
		}
		t.Skip(why)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		unavailable("gcc is not installed")
	}
	for _, h := range []string{"/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"} {
		if _, err := os.Stat(h); err != nil {
			unavailable(h + " is missing (libibverbs-dev, librdmacm-dev)")
		}
	}
	dir, err := os.MkdirTemp("", "manual")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".c"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	args := append(append(append([]string{"-U_FORTIFY_SOURCE"}, flags...), "-o", bin, src), libs...)
	if out, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s: %v\n%s", src, err, out)
	}
	t.Logf("compiled %s in %v", src, time.Since(start).Round(time.Millisecond))
	if cBuilds.bins == nil {
		cBuilds.bins = map[string]string{}
	}
	cBuilds.bins[src] = bin
	return bin
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running program.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out, err syncBuffer
	done     chan error
}

// start runs path with argv0 as its argv[0]. C programs (lineBuffered)
// run under stdbuf -oL, so that a test can wait for a line that C's
// stdio would otherwise hold in its buffer until exit.
func start(t *testing.T, ctx context.Context, name, path, argv0 string, lineBuffered bool, args ...string) *proc {
	t.Helper()
	var cmd *exec.Cmd
	if lineBuffered {
		cmd = exec.CommandContext(ctx, "stdbuf", append([]string{"-oL", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.Args[0] = argv0
	}
	p := &proc{name: name, cmd: cmd, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitFor waits until the process's stdout or stderr contains s.
func (p *proc) waitFor(t *testing.T, s string) {
	t.Helper()
	for {
		if strings.Contains(p.err.String(), s) || strings.Contains(p.out.String(), s) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			if strings.Contains(p.err.String(), s) || strings.Contains(p.out.String(), s) {
				return
			}
			t.Fatalf("%s exited (%v) before printing %q:\nstdout:\n%s\nstderr:\n%s", p.name, err, s, p.out.String(), p.err.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wait waits for the process and returns its exit status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	err := <-p.done
	p.done <- err
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return 0
}

// expect waits for the process, and checks its exit status and that its
// stdout matches want line by line: a want line starting with "~" is a
// regular expression for the whole line, any other is the line itself.
func (p *proc) expect(t *testing.T, status int, want []string) {
	t.Helper()
	got := p.wait(t)
	if err := matchLines(p.out.String(), want); err != nil || got != status {
		t.Errorf("%s: exit status %d (want %d); stdout: %v\nstdout:\n%s\nstderr:\n%s", p.name, got, status, err, p.out.String(), p.err.String())
	}
}

func matchLines(out string, want []string) error {
	var got []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	for i, w := range want {
		if i >= len(got) {
			return fmt.Errorf("missing line %d, want %q", i+1, w)
		}
		if re, ok := strings.CutPrefix(w, "~"); ok {
			if !regexp.MustCompile("^(?:" + re + ")$").MatchString(got[i]) {
				return fmt.Errorf("line %d is %q, want one matching %q", i+1, got[i], re)
			}
		} else if got[i] != w {
			return fmt.Errorf("line %d is %q, want %q", i+1, got[i], w)
		}
	}
	if len(got) > len(want) {
		return fmt.Errorf("extra line %d: %q", len(want)+1, got[len(want)])
	}
	return nil
}

// field is the first submatch of re in the process's stdout, "" if none.
func (p *proc) field(re string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(p.out.String())
	if m == nil {
		return ""
	}
	return m[1]
}

// waitListening waits until a TCP socket listens on port (IPv4, any
// address), as /proc/net/tcp shows: the listing prints that it waits
// before it calls listen, so its line does not say the port is open.
func waitListening(t *testing.T, p *proc, port int) {
	t.Helper()
	needle := fmt.Sprintf(":%04X 00000000:0000 0A ", port)
	for {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(needle)) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before listening on %d:\nstdout:\n%s\nstderr:\n%s", p.name, err, port, p.out.String(), p.err.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
