// Package toolrun runs the two ends of a connection for the tests of
// purerdma's commands against rdma-core's tools (rping, rstream, rcopy):
// a Go command in the test process or a C tool as a process, each ending
// in a Result, and waits for a server's rdma_cm listener.
package toolrun

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// A tool still running when the run ends (its time ran out, or the
	// watchdog ended it) is described before it is killed: where each
	// of its threads waits in the kernel.
	var state string
	cmd.Cancel = func() error {
		state = ProcState(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", name, err)
	}
	go func() {
		err := cmd.Wait()
		if state != "" {
			fmt.Fprintf(&stderr, "[when the run ended: %s]\n", state)
		}
		code := ExitCode(err, &stderr)
		done <- Result{code, stdout.String(), stderr.String()}
	}()
	return cmd.Process.Pid, done
}

// ProcState describes where process pid's threads are: for each, its
// name, its state and the kernel function it waits in (wchan), and its
// kernel stack where /proc lets this process read it (root). It reads
// /proc only; a process that has gone is said to be gone.
func ProcState(pid int) string {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Sprintf("pid %d: %v", pid, err)
	}
	read := func(tid, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, tid, file))
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d", pid)
	for _, task := range tasks {
		tid := task.Name()
		st := read(tid, "stat")
		// stat: tid (comm) state ...; comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) {
			st = st[:i+3]
		}
		fmt.Fprintf(&b, "; thread %s, wchan %s", st, read(tid, "wchan"))
		var frames []string
		for _, f := range strings.Fields(read(tid, "stack")) {
			if f != "?" && !strings.HasPrefix(f, "[<") {
				frames = append(frames, f)
			}
		}
		if len(frames) > 0 {
			fmt.Fprintf(&b, ", stack: %s", strings.Join(frames, " "))
		}
	}
	return b.String()
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

// TCPSocket is one line of the kernel's TCP socket tables
// (/proc/net/tcp and tcp6): siw carries each iWARP connection on a
// kernel TCP socket on the rdma_cm port.
type TCPSocket struct {
	Local, Remote netip.AddrPort
	State         int // the kernel's TCP state: 1 established
	TxQueue       int // bytes sent and not acknowledged
	RxQueue       int // bytes received and not read by the socket's owner
}

func (s TCPSocket) String() string {
	return fmt.Sprintf("%v -> %v state %d unacked %d unread %d", s.Local, s.Remote, s.State, s.TxQueue, s.RxQueue)
}

// TCPSockets returns the TCP sockets whose local or remote port is port.
func TCPSockets(port int) ([]TCPSocket, error) {
	var out []TCPSocket
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		socks, err := ParseProcNetTCP(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range socks {
			if int(s.Local.Port()) == port || int(s.Remote.Port()) == port {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// ParseProcNetTCP parses the text of /proc/net/tcp or /proc/net/tcp6.
func ParseProcNetTCP(b []byte) ([]TCPSocket, error) {
	var out []TCPSocket
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("short line %q", line)
		}
		local, err1 := parseHexAddrPort(f[1])
		remote, err2 := parseHexAddrPort(f[2])
		st, err3 := strconv.ParseUint(f[3], 16, 8)
		tx, rx, ok := strings.Cut(f[4], ":")
		txq, err4 := strconv.ParseUint(tx, 16, 32)
		rxq, err5 := strconv.ParseUint(rx, 16, 32)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil || !ok {
			return nil, fmt.Errorf("line %q: %v", line, err)
		}
		out = append(out, TCPSocket{local, remote, int(st), int(txq), int(rxq)})
	}
	return out, nil
}

// parseHexAddrPort parses the kernel's ADDR:PORT in hex, the address as
// 32-bit words in host byte order (little-endian here).
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each word is in host order
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// Watchdog ends a run that outlives its time, after it has recorded the
// TCP sockets of the run's port while both ends still hold them. With
// Strands it also ends, at once, a run over siw one of whose sockets
// holds bytes siw does not read: soft-iWARP's accept race
// (docs/providers.md, "siw has two races at connection set-up") leaves
// a message that arrives while siw_accept is handing the socket to the
// QP unread until more data comes, and when the connecting side waits
// for an answer, none comes. (The race strands bytes at the accepting
// side; the watchdog takes any socket of the port, because a client
// may bind the server's port number too, and bytes siw leaves unread
// at either end stall a run the same way.)
type Watchdog struct {
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	timedOut bool
	stranded []TCPSocket
	socks    []TCPSocket
	err      error
}

// Watchdog settings: how often it looks at the sockets, and how many
// looks in a row must find the same bytes unread. siw reads a socket's
// data in the softirq that queued it, so on a working connection the
// count is 0 at almost every look and never the same for seconds.
const (
	strandPoll  = time.Second
	strandLooks = 4
)

// Watch calls cancel after timeout, or (strands) once an established
// socket of port has held the same unread bytes strandLooks looks in a
// row, first recording the sockets.
func Watch(timeout time.Duration, port int, strands bool, cancel func()) *Watchdog {
	w := &Watchdog{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(timeout, port, strands, cancel)
	return w
}

func (w *Watchdog) run(timeout time.Duration, port int, strands bool, cancel func()) {
	defer close(w.done)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(strandPoll)
	defer tick.Stop()
	type key struct{ l, r netip.AddrPort }
	unread, looks := map[key]int{}, map[key]int{}
	for {
		select {
		case <-w.stop:
			return
		case <-deadline.C:
			socks, err := TCPSockets(port)
			w.mu.Lock()
			w.timedOut, w.socks, w.err = true, socks, err
			w.mu.Unlock()
			cancel()
			return
		case <-tick.C:
			if !strands {
				continue
			}
			socks, err := TCPSockets(port)
			if err != nil {
				continue // the deadline's look reports it
			}
			var stuck []TCPSocket
			seen := map[key]bool{}
			for _, s := range socks {
				k := key{s.Local, s.Remote}
				if s.State != 1 || s.RxQueue == 0 {
					continue
				}
				seen[k] = true
				if unread[k] != s.RxQueue {
					unread[k], looks[k] = s.RxQueue, 0
				}
				if looks[k]++; looks[k] >= strandLooks {
					stuck = append(stuck, s)
				}
			}
			for k := range unread {
				if !seen[k] {
					delete(unread, k)
					delete(looks, k)
				}
			}
			if stuck != nil {
				w.mu.Lock()
				w.stranded, w.socks = stuck, socks
				w.mu.Unlock()
				cancel()
				return
			}
		}
	}
}

// MaxAttempts is how many times a test runs a pair that a race not
// of purerdma's making spoiled before it fails: siw stranded it with its
// accept race, failed it with its connect race (Attempt.Raced), or hung
// it by a fault rdma-core's tools have there against themselves too
// (RunAttempts' lost); or the body recognised another race the test
// documents (Attempt.Lost: rxe's lost acknowledgement in librpma's
// examples). rdma-core's tools and C librpma meet these as often as
// purerdma does; a run they did not spoil shows what the test is for.
const MaxAttempts = 3

// RunAttempts runs a pair through attempt, which runs it once under a
// Watchdog and returns the watchdog, the ends' results for a failure
// message, and why siw lost the run ("" when it did not): one of its
// races, or a fault rdma-core's tool has there against itself too (the
// caller's documentation names it). It runs the pair again after a
// stranded run or one lost so (logging why), up to MaxAttempts
// times, and fails the test when every attempt was lost or a run
// outlived its time (limit). what names the pair.
func RunAttempts(t testing.TB, what string, limit time.Duration, attempt func() (dog *Watchdog, results, lost string)) {
	t.Helper()
	for n := 1; ; n++ {
		dog, results, lost := attempt()
		if again(t, n, what, lost, dog, results) {
			continue
		}
		if dog.TimedOut() {
			t.Fatalf("the run of %s did not end within %v\n%s\n%s", what, limit, results, dog.Report())
		}
		return
	}
}

// again decides on attempt n of what, which was lost if lost is set or
// dog (nil for none) ended it stranded: it logs why and reports true
// to run it again, or, at the last attempt, fails t with why and
// details (what the attempt reported). It reports false for a run that
// was not lost.
func again(t testing.TB, n int, what, lost string, dog *Watchdog, details string) bool {
	t.Helper()
	why, report := lost, ""
	if dog != nil {
		if st := dog.Stranded(); st != nil {
			why, report = StrandedWhy(st), "\n"+dog.Report()
		}
	}
	if why == "" {
		return false
	}
	if n < MaxAttempts {
		if details != "" {
			details = " (it reported: " + strings.ReplaceAll(details, "\n", "; ") + ")"
		}
		t.Logf("attempt %d of %s: %s; running it again%s", n, what, why, details)
		return true
	}
	t.Fatalf("%d attempts of %s, each lost; the last: %s\n%s%s", n, what, why, details, report)
	return false
}

// ConnectRaced says why r, a Go end that dialed over siw, lost siw's
// connect race, or "" if it did not: its dial ended in CONNECT_ERROR,
// which on iWARP rdma_cm reports only as the answer to a connect, and
// which siw gives when the accepting side spoke before the dialing side
// had read the MPA reply (docs/providers.md, "siw"). rdma-core's
// rsocket acceptor speaks at once (docs/rsocket.md), so a Go dialer
// loses the race against rdma-core's servers now and then.
func ConnectRaced(r Result) string {
	const sign = "CONNECT_ERROR instead of ESTABLISHED"
	if r.Code == 0 || !strings.Contains(r.Stderr, sign) {
		return ""
	}
	return "the Go end's dial ended in " + sign + " against rdma-core's acceptor: siw's connect race (docs/providers.md)"
}

// StrandedWhy describes stranded sockets for a test's log.
func StrandedWhy(st []TCPSocket) string {
	var b strings.Builder
	for i, s := range st {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "siw left %d bytes unread in socket %v (peer %v) for %d looks %v apart (its accept race, docs/providers.md)",
			s.RxQueue, s.Local, s.Remote, strandLooks, strandPoll)
	}
	return b.String()
}

// Stop ends the watch; it returns once the watchdog has.
func (w *Watchdog) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// TimedOut reports whether the run outlived its time.
func (w *Watchdog) TimedOut() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.timedOut
}

// Stranded returns the sockets that held the same
// unread bytes for strandLooks looks, if that ended the run.
func (w *Watchdog) Stranded() []TCPSocket {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stranded
}

// Report describes the sockets the watchdog recorded.
func (w *Watchdog) Report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return "TCP sockets: " + w.err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "TCP sockets of the run's port when it was ended (%d):", len(w.socks))
	for _, s := range w.socks {
		fmt.Fprintf(&b, "\n  %v", s)
	}
	return b.String()
}
