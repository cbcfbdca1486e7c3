// Package examplerun runs example programs for the tests that check
// them against their C originals (uverbs/examples, rdmacm/examples): the
// Go programs `make examples` builds, the C listings compiled once per
// test binary, and a running program whose output a test waits for and
// checks line by line.
package examplerun

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

	"github.com/purerdma/rdma/testenv"
)

// GoBinary is the path of the Go program name, built on the host by
// `make examples` into $PURERDMA_EXAMPLES_BIN-manual (bin/examples-manual
// by default, relative to a test two directories below the module's
// root): building it inside the emulated VM would take minutes.
func GoBinary(t testing.TB, name string) string {
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

// CBinary compiles the C listing src (a path from the test's directory)
// with the manual's flags for it and libs, once per test binary, into a
// temporary directory that outlives the tests (the VM is thrown away).
// Missing gcc or headers fail the test in the VM, which promises them
// (scripts/install-deps), and skip it elsewhere. The listings are the
// manual's, warnings and all, so they are built without -Werror;
// -U_FORTIFY_SOURCE keeps a fortifying compiler from stopping the
// listing's strcpy overruns, which the programs survive on glibc.
func CBinary(t testing.TB, src string, flags []string, libs ...string) string {
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

// SyncBuffer is a bytes.Buffer safe for a writer and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a running program. Its methods other than Stdout, Stderr and
// Exited are for the test's goroutine.
type Proc struct {
	Name     string // what the test's messages call it
	cmd      *exec.Cmd
	out, err SyncBuffer
	exited   chan struct{} // closed once waitErr is set
	waitErr  error
}

// Start runs path with argv0 as its argv[0], until the test ends at the
// latest. C programs (lineBuffered) run under stdbuf -oL, so that a test
// can wait for a line that C's stdio would otherwise hold in its buffer
// until exit.
func Start(t testing.TB, ctx context.Context, name, path, argv0 string, lineBuffered bool, args ...string) *Proc {
	t.Helper()
	var cmd *exec.Cmd
	if lineBuffered {
		cmd = exec.CommandContext(ctx, "stdbuf", append([]string{"-oL", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.Args[0] = argv0
	}
	p := &Proc{Name: name, cmd: cmd, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// Stdout is what the process has written to its stdout so far.
func (p *Proc) Stdout() string { return p.out.String() }

// Stderr is what the process has written to its stderr so far.
func (p *Proc) Stderr() string { return p.err.String() }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// WaitUntil waits until cond holds, checking it every 20 ms and once
// more when the process exits; it fails t if the process exits first,
// saying that it exited before what.
func (p *Proc) WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for {
		if cond() {
			return
		}
		select {
		case <-p.exited:
			if cond() {
				return
			}
			t.Fatalf("%s exited (%v) before %s:\nstdout:\n%s\nstderr:\n%s", p.Name, p.waitErr, what, p.Stdout(), p.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitFor waits until the process's stdout or stderr contains s.
func (p *Proc) WaitFor(t testing.TB, s string) {
	t.Helper()
	p.WaitUntil(t, fmt.Sprintf("printing %q", s), func() bool {
		return strings.Contains(p.Stderr(), s) || strings.Contains(p.Stdout(), s)
	})
}

// Wait waits for the process and returns its exit status.
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	<-p.exited
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	} else if p.waitErr != nil {
		t.Fatalf("%s: %v", p.Name, p.waitErr)
	}
	return 0
}

// Expect waits for the process, and checks its exit status and that its
// stdout matches want as MatchLines says.
func (p *Proc) Expect(t testing.TB, status int, want []string) {
	t.Helper()
	got := p.Wait(t)
	if err := MatchLines(p.Stdout(), want); err != nil || got != status {
		t.Errorf("%s: exit status %d (want %d); stdout: %v\nstdout:\n%s\nstderr:\n%s", p.Name, got, status, err, p.Stdout(), p.Stderr())
	}
}

// MatchLines reports how out differs from want line by line, nil if it
// does not: a want line starting with "~" is a regular expression for
// the whole line, any other is the line itself.
func MatchLines(out string, want []string) error {
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

// Field is the first submatch of re in the process's stdout, "" if none.
func (p *Proc) Field(re string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(p.Stdout())
	if m == nil {
		return ""
	}
	return m[1]
}
