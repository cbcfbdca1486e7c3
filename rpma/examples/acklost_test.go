package examples_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAckLost: a server lost the acknowledgement of its last message
// only off iWARP, and only when it failed with "transport retry counter
// exceeded" after its device sent again in the run, or is still waiting
// when its device sends again after its clients exited (then it is
// killed).
func TestAckLost(t *testing.T) {
	const (
		exceeded = `printf 'Flush request received\n'; printf 'completion failed: transport retry counter exceeded\n' >&2; exit 255`
		waits    = `printf 'Flush request received\n'; exec sleep 60`
	)
	// The device's counter was began when the run began, 10 when the
	// clients exited, now after that.
	for _, c := range []struct {
		name, fabric, script string
		began, now           int64
		lost                 bool
	}{
		{"retry exceeded", "rxe", exceeded, 9, 11, true},
		{"retry exceeded, retries before the clients exited", "rxe", exceeded, 9, 10, true},
		{"retry exceeded, no retries in the run", "rxe", exceeded, 10, 10, false},
		{"retry exceeded on siw", "siw", exceeded, 9, 11, false},
		{"waits", "rxe", waits, 9, 11, true},
		{"exit 0", "rxe", `printf 'transport retry counter exceeded\n' >&2; exit 0`, 9, 11, false},
		{"another failure", "rxe", `printf 'completion failed: remote access error\n' >&2; exit 255`, 9, 11, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PURERDMA_FABRIC", c.fabric)
			real := serverRetries
			serverRetries = func(testing.TB) int64 { return c.now }
			t.Cleanup(func() { serverRetries = real })
			p := start(t, context.Background(), "server", "/bin/sh", "-c", c.script)
			// The server has printed its lines, and one that ends has
			// ended, before ackLost looks: an end that races ackLost's
			// look is TestAckLostExitedBeforeTheKill's.
			if c.script == waits {
				p.waitFor(t, "Flush request received", time.Minute)
			} else {
				p.end()
			}
			why, lost := p.ackLost(t, c.began, 10)
			if lost != c.lost {
				t.Fatalf("ackLost() = %q, %v; want lost %v", why, lost, c.lost)
			}
			if lost && !strings.Contains(why, "Flush request received") {
				t.Errorf("ackLost's reason does not show what the server printed: %q", why)
			}
			if c.script == waits && !strings.Contains(why, "killed") {
				t.Errorf("ackLost did not say it killed the waiting server: %q", why)
			}
		})
	}
}

// TestAckLostExitedBeforeTheKill: a server that failed by itself before
// its device's retry was seen, but whose end was not yet collected, is
// judged by how it ended, not as one ackLost killed.
func TestAckLostExitedBeforeTheKill(t *testing.T) {
	t.Setenv("PURERDMA_FABRIC", "rxe")
	real := serverRetries
	serverRetries = func(testing.TB) int64 { return 11 }
	t.Cleanup(func() { serverRetries = real })
	p := &proc{name: "server", done: make(chan error, 1),
		cmd: exec.Command("/bin/sh", "-c", `printf 'completion failed: remote access error\n' >&2; exit 255`)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// It has exited (WNOWAIT leaves it to be collected); its end is
	// collected only after ackLost's first look at the counter (100 ms),
	// which finds it risen, so ackLost kills a process that has already
	// exited. (If the look comes later, ackLost finds the end first:
	// the verdict is the same.)
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waitid: %v", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		p.done <- p.cmd.Wait()
	}()
	if why, lost := p.ackLost(t, 10, 10); lost {
		t.Fatalf("ackLost() = %q, true; want the server's own failure, not lost", why)
	}
}
