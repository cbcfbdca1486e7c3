package examples_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/internal/testutils/examplerun"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// The examples run as the programs users run: binaries built on the
// host by `make examples` (make vmtest does it first) into
// $PURERDMA_EXAMPLES_BIN, named <example>-server and <example>-client.
// Building them inside the emulated VM would take minutes each.
func binary(t testing.TB, example, side string) string {
	t.Helper()
	dir := os.Getenv("PURERDMA_EXAMPLES_BIN")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "examples")
	}
	p, err := filepath.Abs(filepath.Join(dir, example+"-"+side))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (run `make examples`, or make vmtest, which builds them)", p, err)
	}
	return p
}

// serverAddr is the server's address on the fabric under test
// (testenv.CurrentFabric: rxe0's, or siw0's with PURERDMA_FABRIC=siw);
// the clients reach it through the other device.
var serverAddr = testenv.Server().String()

var nextPort atomic.Int32

func init() { nextPort.Store(7700) }

// proc is a running example side.
type proc struct {
	name     string
	cmd      *exec.Cmd
	out, err examplerun.SyncBuffer
	done     chan error
}

func start(t testing.TB, ctx context.Context, name, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.CommandContext(ctx, path, args...), done: make(chan error, 1)}
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

// end waits for the process to exit and returns how it ended; it can
// be called again.
func (p *proc) end() error {
	err := <-p.done
	p.done <- err
	return err
}

// waitFor waits until the process's stderr or stdout contains s.
func (p *proc) waitFor(t testing.TB, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(p.err.String(), s) || strings.Contains(p.out.String(), s) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before printing %q:\nstdout:\n%s\nstderr:\n%s", p.name, err, s, p.out.String(), p.err.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not print %q within %v:\nstdout:\n%s\nstderr:\n%s", p.name, s, d, p.out.String(), p.err.String())
}

// wait waits for the process and checks its exit status.
func (p *proc) wait(t testing.TB, wantStatus int) {
	t.Helper()
	err := p.end()
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	if status != wantStatus {
		t.Fatalf("%s exited with %d, want %d:\nstdout:\n%s\nstderr:\n%s", p.name, status, wantStatus, p.out.String(), p.err.String())
	}
}

// connectLost reports whether p, a client, failed because its connect
// ended in "Connection lost" (rdma_cm's CONNECT_ERROR) on iWARP. There
// rdma_cm reports CONNECT_ERROR only as the answer to a connect (a
// connection that ends after it was established is DISCONNECTED), and
// siw answers so when the server spoke before the client had read the
// MPA reply (docs/providers.md, "siw"), as the servers of librpma's
// protocols that act at once (03's RDMA READ) can. It waits for p to
// exit.
func (p *proc) connectLost() (why string, lost bool) {
	if !testenv.CurrentFabric().IWARP {
		return "", false
	}
	err := p.end()
	const line = "rpma_conn_next_event returned an unexpected event: Connection lost"
	if err == nil || !strings.Contains(p.err.String(), line) {
		return "", false
	}
	return fmt.Sprintf("%s exited (%v) after its connect ended in CONNECT_ERROR, printing %q: siw's connect race (docs/providers.md)", p.name, err, line), true
}

// ackLost reports whether p, a server whose clients have all exited 0
// with their output, has lost the acknowledgement of its last message:
// rxe gives a client a receive's completion before it acknowledges the
// message, and a client that has what it came for disconnects at once,
// so its QP can leave the connected states before the acknowledgement
// is sent (docs/reliability.md, "rxe's unacknowledged last message").
// The server's device then sends the message again to a QP that is
// gone: with the retry count of purerdma's client (6) its send
// completes with "transport retry counter exceeded", with librpma's
// (7) rxe tries for ever and the server waits for ever. So p lost it
// when it exits with that status and serverRetries has risen above
// began, its value when the run began; or when it has not exited and
// serverRetries rises above ended, its value once the last client had
// exited, and then ackLost kills p. iWARP completes a send without an
// acknowledgement from the peer. It waits for p to exit, or to be
// killed.
func (p *proc) ackLost(t testing.TB, began, ended int64) (why string, lost bool) {
	t.Helper()
	if testenv.CurrentFabric().IWARP {
		return "", false
	}
	const status = "transport retry counter exceeded"
	// exited judges p once it has exited by itself with err.
	exited := func(err error) (string, bool) {
		if err == nil || !strings.Contains(p.err.String(), status) {
			return "", false
		}
		n := serverRetries(t)
		if n <= began {
			return "", false
		}
		return fmt.Sprintf("%s exited (%v) after a send completed with %q, its device having sent requests again (%s: %d, %d when the run began), and its clients had exited 0 with their output: "+
			"rxe's unacknowledged last message (docs/reliability.md); stdout:\n%s\nstderr:\n%s",
			p.name, err, status, retryCounter, n, began, p.out.String(), p.err.String()), true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-p.done:
			p.done <- err
			return exited(err)
		case <-tick.C:
			n := serverRetries(t)
			if n <= ended {
				continue
			}
			p.cmd.Process.Kill()
			err := p.end()
			if !killed(err) { // it had exited by itself before the kill
				return exited(err)
			}
			return fmt.Sprintf("%s had not exited when its device sent a request again (%s: %d, %d when the last client exited 0 with its output); killed (%v): "+
				"rxe's unacknowledged last message (docs/reliability.md); stdout:\n%s\nstderr:\n%s",
				p.name, retryCounter, n, ended, err, p.out.String(), p.err.String()), true
		}
	}
}

// killed reports whether err, a process's end, was SIGKILL's doing.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// retryCounter is the rxe counter of requests sent again for want of an
// acknowledgement (rxe_hw_counters.c).
const retryCounter = "completer_retry_err"

// serverRetries is the server's rxe device's retryCounter, or 0 on
// iWARP (rxeRetries; host tests put a fake in its place). The examples'
// runs use the device one at a time.
var serverRetries = rxeRetries

func rxeRetries(t testing.TB) int64 {
	t.Helper()
	f := testenv.CurrentFabric()
	if f.IWARP {
		return 0
	}
	path := filepath.Join("/sys/class/infiniband", f.Devs[0], "ports/1/hw_counters", retryCounter)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the server device's retries: %v", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

func (p *proc) expect(t testing.TB, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(p.out.String(), l) {
			t.Errorf("%s's output lacks %q:\n%s\nstderr:\n%s", p.name, l, p.out.String(), p.err.String())
		}
	}
}

// listening is what the rpma log prints, at the examples' INFO
// threshold, once the server listens.
const listening = "Waiting for incoming connection"

// example is a run of an example: its arguments, the output lines
// each side must print, and which implementation runs each side.
type example struct {
	name       string
	serverArgs []string // after <addr> <port>
	clientArgs []string
	serverOut  []string
	clientOut  []string
	clients    int  // how many clients to run one after another; 0 means 1
	pair       pair // which implementation runs each side: Go-Go if zero
	// ackLost, if set, gets the runs lost to rxe's unacknowledged last
	// message (proc.ackLost), in order, for a test whose clients leave
	// state the next run reads (09's chain on PMem): their clients did
	// all their work.
	ackLost *[]exampleRun
}

// exampleRun is one run of an example: its server and its clients.
type exampleRun struct {
	server  *proc
	clients []*proc
}

// runExample runs ex's server, then its clients one after another, and
// checks each exits 0 with the output lines given. A run lost to a race
// that is not the examples' is run again on a new port
// (toolrun.Attempts): on siw, its accept race (docs/testing.md) can
// strand a client's first message at the server, and its connect race
// fail a client's connect (proc.connectLost); on rxe, a server's last
// send can go unacknowledged (proc.ackLost).
func runExample(t testing.TB, ex example) (server *proc, clients []*proc) {
	t.Helper()
	testenv.NeedFabric(t)
	what := ex.name + " (" + ex.pair.String() + ")"
	toolrun.Attempts(t, what, 2*time.Minute, testenv.CurrentFabric().IWARP, func(a *toolrun.Attempt) {
		server, clients = runExampleOnce(a, ex)
	})
	return server, clients
}

func runExampleOnce(t *toolrun.Attempt, ex example) (server *proc, clients []*proc) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	n := int(nextPort.Add(1))
	port := fmt.Sprint(n)
	server = ex.pair.start(t, ctx, "server", ex.name, "server", append([]string{serverAddr, port}, ex.serverArgs...)...)
	server.waitFor(t, listening, 30*time.Second)
	began := serverRetries(t)
	t.Watch(n)
	for i := range max(ex.clients, 1) {
		c := ex.pair.start(t, ctx, fmt.Sprintf("client %d", i), ex.name, "client", append([]string{serverAddr, port}, ex.clientArgs...)...)
		if why, lost := c.connectLost(); lost {
			t.Raced(why)
		}
		c.wait(t, 0)
		c.expect(t, ex.clientOut...)
		clients = append(clients, c)
	}
	if !t.Failed() {
		if why, lost := server.ackLost(t, began, serverRetries(t)); lost {
			if ex.ackLost != nil {
				*ex.ackLost = append(*ex.ackLost, exampleRun{server, clients})
			}
			t.Lost(why)
		}
	}
	server.wait(t, 0)
	server.expect(t, ex.serverOut...)
	return server, clients
}

func TestExample01Connection(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) {
		runExample(t, example{name: "01-connection", pair: p,
			serverOut: []string{"Received a message: Hello server!"},
			clientOut: []string{"Received a message: Hello client!"}})
	})
}

// TestExampleUsage: without arguments every example prints its usage
// and exits 255, as C's exit(-1).
func TestExampleUsage(t *testing.T) {
	dir := os.Getenv("PURERDMA_EXAMPLES_BIN")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "examples")
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("no example binaries in %s (%v): run `make examples`", dir, err)
	}
	for _, e := range ents {
		out, err := exec.Command(filepath.Join(dir, e.Name())).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 255 || !strings.Contains(string(out), "usage:") {
			t.Errorf("%s without arguments: %v, output %q; want usage and status 255", e.Name(), err, out)
		}
	}
}
