package toolrun

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// strandedDog is a watchdog that has already ended its run as stranded.
func strandedDog() *Watchdog {
	w := &Watchdog{stop: make(chan struct{}), done: make(chan struct{}),
		stranded: []TCPSocket{{Local: netip.MustParseAddrPort("198.18.0.1:7471"), Remote: netip.MustParseAddrPort("198.18.0.2:40000"), State: 1, RxQueue: 40}}}
	close(w.done)
	return w
}

// TestAttemptsRunsStrandedAgain: a stranded attempt's failure is logged,
// not passed on, its cleanups run (last first) before the next attempt
// starts, and its context ends with it; the next attempt counts.
func TestAttemptsRunsStrandedAgain(t *testing.T) {
	var order []string
	var ctxs []context.Context
	n := 0
	Attempts(t, "the pair", time.Hour, true, func(a *Attempt) {
		n++
		ctxs = append(ctxs, a.Context())
		a.Cleanup(func() { order = append(order, "first cleanup") })
		stranded := n == 1
		a.Cleanup(func() {
			order = append(order, "second cleanup")
			if stranded {
				a.Fatal("a cleanup's Fatal ends only that cleanup")
			}
		})
		if n == 1 {
			a.dog = strandedDog()
			a.Fatalf("stranded attempt fails")
		}
		if a.Failed() {
			t.Errorf("attempt %d starts failed", n)
		}
	})
	if n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	want := []string{"second cleanup", "first cleanup", "second cleanup", "first cleanup"}
	if !slices.Equal(order, want) {
		t.Errorf("cleanups ran %q, want %q", order, want)
	}
	for i, ctx := range ctxs {
		if ctx.Err() == nil {
			t.Errorf("attempt %d's context outlived it", i+1)
		}
	}
}

// TestAttemptsVerdict runs helper bodies in a child process and checks
// what Attempts and RunAttempts passed on to the test: a failure of the
// counting attempt, a skip, an attempt raced or lost once, every
// attempt stranded, raced or lost, Raced off iWARP, a run that timed
// out.
func TestAttemptsVerdict(t *testing.T) {
	if h := os.Getenv("TOOLRUN_ATTEMPT_HELPER"); h != "" {
		attemptHelper(t, h)
		return
	}
	for _, c := range []struct {
		helper string
		fail   bool
		want   []string
	}{
		{"error", true, []string{"counted: 7", "--- FAIL"}},
		{"fatal", true, []string{"fatal: the body ends here", "--- FAIL"}},
		{"cleanup", true, []string{"cleanup failed", "--- FAIL"}},
		{"skip", false, []string{"--- SKIP", "no device"}},
		{"stranded", true, []string{"3 attempts of the pair, each lost", "siw left 40 bytes unread", "--- FAIL"}},
		{"raced", true, []string{"3 attempts of the pair, each lost; the last: the connect failed 3", "--- FAIL"}},
		{"raced once", false, []string{"attempt 1 of the pair: the connect failed 1; running it again", "--- PASS"}},
		{"lost", true, []string{"3 attempts of the pair, each lost; the last: no ACK 3", "--- FAIL"}},
		{"lost once", false, []string{"attempt 1 of the pair: no ACK 1; running it again", "--- PASS"}},
		{"raced off iWARP", true, []string{"not iWARP, so not siw's connect race: the connect failed 1", "--- FAIL"}},
		{"pass", false, []string{"--- PASS", "logged"}},
		{"run lost once", false, []string{"attempt 1 of the pair: lost 1; running it again", "--- PASS"}},
		{"run lost", true, []string{"3 attempts of the pair, each lost; the last: lost 3", "results 3", "--- FAIL"}},
		{"run stranded", true, []string{"3 attempts of the pair, each lost; the last: siw left 40 bytes unread", "--- FAIL"}},
		{"run timed out", true, []string{"the run of the pair did not end within 1h0m0s", "results 1", "--- FAIL"}},
	} {
		t.Run(c.helper, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestAttemptsVerdict$", "-test.v")
			cmd.Env = append(os.Environ(), "TOOLRUN_ATTEMPT_HELPER="+c.helper)
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fail {
				t.Errorf("child exited with %v, want failure %v\n%s", err, c.fail, out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("child's output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "must not run") {
				t.Errorf("a Fatal did not end the body:\n%s", out)
			}
		})
	}
}

func attemptHelper(t *testing.T, h string) {
	n := 0
	if strings.HasPrefix(h, "run ") {
		RunAttempts(t, "the pair", time.Hour, func() (*Watchdog, string, string) {
			n++
			dog := &Watchdog{stop: make(chan struct{}), done: make(chan struct{})}
			close(dog.done)
			lost := ""
			switch {
			case h == "run lost" || h == "run lost once" && n == 1:
				lost = fmt.Sprintf("lost %d", n)
			case h == "run stranded":
				dog = strandedDog()
			case h == "run timed out":
				dog.timedOut = true
			}
			return dog, fmt.Sprintf("results %d", n), lost
		})
		return
	}
	// Lost is a race of any fabric: "lost" runs as off iWARP.
	Attempts(t, "the pair", time.Hour, h != "raced off iWARP" && h != "lost", func(a *Attempt) {
		n++
		switch h {
		case "error":
			a.Errorf("counted: %d", 7)
		case "fatal":
			a.Fatal("fatal: the body ends here")
			a.Log("must not run")
		case "cleanup":
			a.Cleanup(func() { a.Error("cleanup failed") })
		case "skip":
			a.Skipf("no device")
			a.Log("must not run")
		case "stranded":
			a.dog = strandedDog()
			a.FailNow()
		case "raced", "raced off iWARP":
			a.Raced(fmt.Sprintf("the connect failed %d", n))
			a.Log("must not run")
		case "raced once":
			if n == 1 {
				a.Raced("the connect failed 1")
			}
		case "lost":
			a.Lost(fmt.Sprintf("no ACK %d", n))
			a.Log("must not run")
		case "lost once":
			if n == 1 {
				a.Lost("no ACK 1")
			}
		case "pass":
			a.Log("logged")
		}
	})
}
