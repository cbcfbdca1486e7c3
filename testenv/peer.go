package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Peer is the other host of the two-VM bed (rxevm -peer KERNEL,
// docs/testing.md "The two-VM bed"): a second VM, possibly of another
// kernel, joined to this one by a data link with one rxe device on each
// end. Its processes run through rxevm-peer, in the same directory, with
// the same host files and the same environment but for the variables
// that describe the VM (PURERDMA_VM, PURERDMA_PMEM, RXEVM_*).
type Peer struct {
	Addr      netip.Addr // the peer's IPv4 address on the data link (RXEVM_PEER_ADDR)
	Dev       string     // the peer's rxe device on the data link (RXEVM_PEER_DEV)
	LocalAddr netip.Addr // this VM's address on the data link (RXEVM_LOCAL_ADDR)
	LocalDev  string     // this VM's rxe device on the data link (RXEVM_LOCAL_DEV)
	Kernel    string     // the peer's kernel release (RXEVM_PEER_VM)
	command   string     // rxevm-peer's path
}

// peerCommand is the bed's command that runs its arguments on the peer.
const peerCommand = "rxevm-peer"

// PeerHost returns the two-VM bed's peer host, skipping the test outside
// the bed, and failing it when PURERDMA_REQUIRE_DEVICE=1 promised
// devices but there is no peer.
func PeerHost(t testing.TB) *Peer {
	t.Helper()
	p, err := peerFromEnv()
	if err != nil {
		how := "PURERDMA_PEER_KERNEL=6.12 go test -exec scripts/vmexec " + packagePattern()
		if RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: the test needs the two-VM bed's peer host, but %v; run it in the bed: %s", err, how)
			return nil
		}
		t.Skipf("the test needs the two-VM bed's peer host: %v; run it in the bed: %s", err, how)
		return nil
	}
	return p
}

func peerFromEnv() (*Peer, error) {
	p := &Peer{Dev: os.Getenv("RXEVM_PEER_DEV"), LocalDev: os.Getenv("RXEVM_LOCAL_DEV"), Kernel: os.Getenv("RXEVM_PEER_VM")}
	var err error
	if p.Addr, err = netip.ParseAddr(os.Getenv("RXEVM_PEER_ADDR")); err != nil {
		return nil, fmt.Errorf("RXEVM_PEER_ADDR: %w", err)
	}
	if p.LocalAddr, err = netip.ParseAddr(os.Getenv("RXEVM_LOCAL_ADDR")); err != nil {
		return nil, fmt.Errorf("RXEVM_LOCAL_ADDR: %w", err)
	}
	if p.Dev == "" || p.LocalDev == "" {
		return nil, errors.New("RXEVM_PEER_DEV or RXEVM_LOCAL_DEV is not set")
	}
	if p.command, err = exec.LookPath(peerCommand); err != nil {
		return nil, err
	}
	return p, nil
}

// Command is an exec.Cmd that runs name with args on the peer host
// through rxevm-peer: its stdout and stderr are the remote command's and
// its exit status is the remote command's, or 125 with a message
// starting "rxevm-peer:" on stderr when the peer VM stopped, hung or
// could not be reached. Stdin is not forwarded. Killing the process ends
// the remote command.
func (p *Peer) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, p.command, append([]string{name}, args...)...)
}

// A PeerProcess is a process started on the peer host by Start.
type PeerProcess struct {
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	result PeerResult
}

// PeerResult is how a peer process ended.
type PeerResult struct {
	// ExitCode is the remote command's exit status (128+N for signal N);
	// 125 with an "rxevm-peer:" message in Stderr when the bed failed.
	ExitCode int
	Stdout   string
	Stderr   string
	// Err is set when rxevm-peer itself could not run or was killed.
	Err error
}

// Start starts name with args on the peer host; the test's cleanup
// kills it if it still runs.
func (p *Peer) Start(t testing.TB, name string, args ...string) *PeerProcess {
	t.Helper()
	return p.StartEnv(t, nil, name, args...)
}

// StartEnv is Start with env ("NAME=value") added to the environment the
// command gets on the peer.
func (p *Peer) StartEnv(t testing.TB, env []string, name string, args ...string) *PeerProcess {
	t.Helper()
	pp := &PeerProcess{cmd: p.Command(context.Background(), name, args...), done: make(chan struct{})}
	if len(env) > 0 {
		pp.cmd.Env = append(os.Environ(), env...)
	}
	pp.cmd.Stdout = &pp.stdout
	pp.cmd.Stderr = &pp.stderr
	if err := pp.cmd.Start(); err != nil {
		t.Fatalf("%s %s: %v", peerCommand, name, err)
	}
	go func() {
		err := pp.cmd.Wait()
		pp.result = PeerResult{ExitCode: pp.cmd.ProcessState.ExitCode(), Stdout: pp.stdout.String(), Stderr: pp.stderr.String()}
		var exitErr *exec.ExitError
		if (err != nil && !errors.As(err, &exitErr)) || pp.result.ExitCode < 0 {
			pp.result.Err = fmt.Errorf("%s %s: %v", peerCommand, name, err)
		}
		close(pp.done)
	}()
	t.Cleanup(func() {
		select {
		case <-pp.done:
		default:
			pp.cmd.Process.Kill()
			<-pp.done
		}
	})
	return pp
}

// Run runs name with args on the peer host and returns how it ended.
func (p *Peer) Run(t testing.TB, name string, args ...string) PeerResult {
	t.Helper()
	return p.Start(t, name, args...).Wait()
}

// Wait waits for the process to end.
func (pp *PeerProcess) Wait() PeerResult {
	<-pp.done
	return pp.result
}

// Kill kills rxevm-peer, which ends the remote command (and its process
// group) once the peer sees the connection close.
func (pp *PeerProcess) Kill() { pp.cmd.Process.Kill() }

// Done is closed when the process has ended.
func (pp *PeerProcess) Done() <-chan struct{} { return pp.done }

// Output is the process's stdout and stderr so far.
func (pp *PeerProcess) Output() (stdout, stderr string) {
	return pp.stdout.String(), pp.stderr.String()
}

// peerWaitLimit ends a wait for a peer process's output that would hang.
const peerWaitLimit = 2 * time.Minute

// WaitOutput waits until the process's stdout contains s, failing the test
// when the process ends first or nothing comes for two minutes (a hang
// guard).
func (pp *PeerProcess) WaitOutput(t testing.TB, s string) {
	t.Helper()
	limit := time.After(peerWaitLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if strings.Contains(pp.stdout.String(), s) {
			return
		}
		select {
		case <-pp.done:
			if strings.Contains(pp.stdout.String(), s) {
				return
			}
			r := pp.result
			t.Fatalf("peer process %q ended (exit %d, %v) before printing %q:\nstdout:\n%s\nstderr:\n%s", pp.cmd.Args[1:], r.ExitCode, r.Err, s, r.Stdout, r.Stderr)
		case <-limit:
			out, errOut := pp.Output()
			t.Fatalf("peer process %q did not print %q in %v:\nstdout:\n%s\nstderr:\n%s", pp.cmd.Args[1:], s, peerWaitLimit, out, errOut)
		case <-tick.C:
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
