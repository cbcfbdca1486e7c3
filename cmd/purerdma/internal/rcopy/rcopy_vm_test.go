package rcopy

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

// The rcopy tests: the Go command against rdma-core's rcopy both ways and
// against itself. rcopy's server listens on every address and C's client
// binds none, so these connections may run over one device.

// The servers listen on every address; clients reach device 0's address
// of the fabric under test, from it or from device 1's (docs/testing.md).
var (
	rcServerAddr = testenv.Server().String()
	rcClientAddr = testenv.Client().String()
)

// rcPorts gives each run its own rdma_cm port.
var rcPorts atomic.Int32

func rcNextPort() int { return 7300 + int(rcPorts.Add(1)) }

// rcEnd is one end of an rcopy run.
type rcEnd struct {
	c    bool
	args []string
}

func (e rcEnd) String() string {
	n := "go"
	if e.c {
		n = "C"
	}
	return n + " rcopy " + strings.Join(e.args, " ")
}

// rcFile writes a file of n random bytes with mode 0640 into dir.
func rcFile(t *testing.T, dir string, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(dir, "src")
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	return p, b
}

// rcRun starts the server, waits until it listens, runs each client in
// turn (each with its own want status) and then ends the server (C's
// serves for ever; a Go server given -n ends by itself). It returns the
// server's result and the clients'. On siw, a run that siw's accept
// race stranded (toolrun.Watchdog), or in which a Go client's dial to
// C's server lost siw's connect race (toolrun.ConnectRaced), is run
// again on the next port, up to toolrun.MaxAttempts times.
func rcRun(t *testing.T, server rcEnd, clients []rcEnd) (sr toolrun.Result, crs []toolrun.Result) {
	t.Helper()
	toolrun.RunAttempts(t, server.String(), 2*time.Minute, func() (*toolrun.Watchdog, string, string) {
		var dog *toolrun.Watchdog
		sr, crs, dog = rcRunOnce(t, server, clients)
		lost := ""
		for i, c := range clients {
			if testenv.CurrentFabric().IWARP && server.c && !c.c && i < len(crs) {
				if why := toolrun.ConnectRaced(crs[i]); why != "" {
					lost = fmt.Sprintf("client %d: %s", i, why)
				}
			}
		}
		return dog, fmt.Sprintf("server %v: %v\nclients: %v", server, sr, crs), lost
	})
	return sr, crs
}

// rcRunOnce is one attempt of rcRun, on a port of its own.
func rcRunOnce(t *testing.T, server rcEnd, clients []rcEnd) (toolrun.Result, []toolrun.Result, *toolrun.Watchdog) {
	t.Helper()
	testenv.Devices(t, 2)
	tool := ""
	if server.c || slicesAny(clients) {
		tool = toolrun.Tool(t, "rcopy")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port := rcNextPort()
	dog := toolrun.Watch(2*time.Minute, port, testenv.CurrentFabric().IWARP, cancel)
	defer dog.Stop()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	p := []string{"-p", strconv.Itoa(port)}
	server.args = append(slices.Clone(server.args), p...)
	pid, sdone := toolrun.Start(t, sctx, runContext, "rcopy", tool, server.c, server.args, server)
	toolrun.WaitListening(t, ctx, cancel, toolrun.Tool(t, "rdma"), port, pid, sdone)
	var crs []toolrun.Result
	for _, c := range clients {
		c.args = append(slices.Clone(c.args), p...)
		_, cdone := toolrun.Start(t, ctx, runContext, "rcopy", tool, c.c, c.args, c)
		crs = append(crs, <-cdone)
	}
	if server.c {
		scancel() // C's server serves for ever
	}
	sr := <-sdone
	return sr, crs, dog
}

func slicesAny(cs []rcEnd) bool {
	for _, c := range cs {
		if c.c {
			return true
		}
	}
	return false
}

// rcClientOut is what a client that copied n bytes prints.
func rcClientOut(n int) *regexp.Regexp {
	return regexp.MustCompile(`^opening\.\.\.transferring\.\.\.closing\.\.\.done\n` +
		strconv.Itoa(n) + ` bytes in \d+\.\d\d seconds = (\d+\.\d\d|inf) Gb/sec\n$`)
}

// rcCheckCopy checks dst against want, with mode 0640.
func rcCheckCopy(t *testing.T, dst string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatalf("the copy: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the copy has %d bytes that differ from the source's %d", len(got), len(want))
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	// The server's umask may take bits away, never add them.
	if m := fi.Mode().Perm(); m&^0o640 != 0 || m&0o600 != 0o600 {
		t.Errorf("the copy's mode %v, want 0640 less the umask", fi.Mode())
	}
}

// TestRcopyInterop copies a file of 3 MiB and some bytes with each pair
// of ends, and checks the copy, its mode and both ends' output.
func TestRcopyInterop(t *testing.T) {
	for _, tt := range []struct {
		name             string
		cServer, cClient bool
	}{
		{"go-server+C-client", false, true},
		{"C-server+go-client", true, false},
		{"go-server+go-client", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			n := 3<<20 + 123
			src, data := rcFile(t, dir, n)
			dst := filepath.Join(dir, "dst")
			server := rcEnd{c: tt.cServer}
			if !tt.cServer {
				server.args = []string{"-n", "1"}
			}
			client := rcEnd{c: tt.cClient, args: []string{src, rcServerAddr + ":" + dst}}
			sr, crs := rcRun(t, server, []rcEnd{client})
			cr := crs[0]
			if cr.Code != 0 || (!tt.cServer && sr.Code != 0) {
				t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
			}
			rcCheckCopy(t, dst, data)
			if !rcClientOut(n).MatchString(cr.Stdout) {
				t.Errorf("client stdout %q", cr.Stdout)
			}
			// The client's address is either of the fabric's (the
			// kernel picks the source).
			wantS := regexp.MustCompile(`^waiting for connection\.\.\.client: (` + regexp.QuoteMeta(rcServerAddr) + `|` + regexp.QuoteMeta(rcClientAddr) + `)\nopening: ` +
				regexp.QuoteMeta(dst) + `, transferring\.\.\.` + strconv.Itoa(n) + ` bytes\.\.\.closing\.\.\.`)
			if !tt.cServer {
				// -n 1: it ends after the first connection.
				if !wantS.MatchString(sr.Stdout) || !strings.HasSuffix(sr.Stdout, "closing...done\n") {
					t.Errorf("server stdout %q", sr.Stdout)
				}
			} else if !wantS.MatchString(sr.Stdout) { // killed: its last line, unflushed, is lost
				t.Errorf("C server stdout %q", sr.Stdout)
			}
			for _, e := range []struct {
				end rcEnd
				r   toolrun.Result
			}{{server, sr}, {client, cr}} {
				if !e.end.c && e.r.Stderr != "" {
					t.Errorf("%v stderr %q, want nothing", e.end, e.r.Stderr)
				}
			}
		})
	}
}

// TestRcopyRefused: a destination the server cannot create fails the
// client with the server's errno (ENOENT) and the server goes on to the
// next client, with a Go server and with C's.
func TestRcopyRefused(t *testing.T) {
	for _, cServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("server-C=%v", cServer), func(t *testing.T) {
			dir := t.TempDir()
			src, data := rcFile(t, dir, 5000)
			dst := filepath.Join(dir, "dst")
			server := rcEnd{c: cServer}
			if !cServer {
				server.args = []string{"-n", "2"}
			}
			bad := rcEnd{args: []string{src, rcServerAddr + ":" + filepath.Join(dir, "no", "such", "dir")}}
			good := rcEnd{args: []string{src, rcServerAddr + ":" + dst}}
			sr, crs := rcRun(t, server, []rcEnd{bad, good})
			if crs[0].Code != 1 || !strings.Contains(crs[0].Stderr, "no such file or directory") {
				t.Errorf("client to a missing directory: %v; want status 1 and ENOENT", crs[0])
			}
			if crs[1].Code != 0 {
				t.Fatalf("the next client: %v\nserver: %v", crs[1], sr)
			}
			rcCheckCopy(t, dst, data)
			if !cServer && sr.Code != 0 {
				t.Errorf("server: %v", sr)
			}
			if !strings.Contains(sr.Stdout, "unable to open destination file\n") {
				t.Errorf("server stdout %q, want the refusal", sr.Stdout)
			}
		})
	}
}
