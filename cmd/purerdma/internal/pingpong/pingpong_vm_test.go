package pingpong

import (
	"bytes"
	"context"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/internal/testutils/pingpongrun"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

// The VM's two soft-RoCE devices and their addresses (docs/testing.md).
const (
	ppServerDev  = "rxe0"
	ppServerAddr = "198.18.0.1"
	ppClientDev  = "rxe1"
	ppClientAddr = "198.18.0.2"
)

// ppRunTimeout bounds each run of a pair; a hang fails the test.
const ppRunTimeout = 2 * time.Minute

// ppPorts hands each pair its own TCP port, so no run meets another's
// listener or TIME_WAIT.
var ppPorts atomic.Int32

func ppNextPort() int { return 18600 + int(ppPorts.Add(1)) }

// ppSide is one end of a run: the Go command or the C tool.
type ppSide struct {
	goSide bool
	events bool
	flags  []string // flags for this side only
}

func (s ppSide) String() string {
	n := "c"
	if s.goSide {
		n = "go"
	}
	if s.events {
		n += "-e"
	}
	return n
}

type ppResult struct {
	code           int
	stdout, stderr string
}

// ppRun runs one end to completion under ctx: the Go command in this
// process, or the C tool at cTool. It may run on any goroutine.
func ppRun(ctx context.Context, kind string, side ppSide, cTool string, args []string) ppResult {
	if side.events {
		args = append(args, "-e")
	}
	args = append(args, side.flags...)
	if side.goSide {
		var stdout, stderr bytes.Buffer
		code := clitest.Set(Command).Run(ctx, append([]string{"pingpong", kind}, args...), &stdout, &stderr)
		return ppResult{code, stdout.String(), stderr.String()}
	}
	cmd := exec.CommandContext(ctx, cTool, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := toolrun.ExitCode(cmd.Run(), &stderr)
	return ppResult{code, stdout.String(), stderr.String()}
}

// ppPair runs a server on rxe0 and a client on rxe1 towards 198.18.0.1
// with the same shared flags and returns both results, failing the test
// unless both exit 0.
func ppPair(t *testing.T, kind string, server, client ppSide, shared []string) (ppResult, ppResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ppRunTimeout)
	defer cancel()
	port := ppNextPort()
	common := append([]string{"-p", strconv.Itoa(port)}, shared...)
	sargs := append([]string{"-d", ppServerDev, "-g", strconv.Itoa(pingpongrun.GIDIndex(t, ppServerDev, ppServerAddr))}, common...)
	cargs := append([]string{"-d", ppClientDev, "-g", strconv.Itoa(pingpongrun.GIDIndex(t, ppClientDev, ppClientAddr))}, common...)
	cargs = append(cargs, ppServerAddr)
	cTool := ""
	if !server.goSide || !client.goSide {
		cTool = pingpongrun.CTool(t, kind)
	}

	serverDone := make(chan ppResult, 1)
	go func() { serverDone <- ppRun(ctx, kind, server, cTool, sargs) }()
	for !pingpongrun.Listening(port) {
		select {
		case r := <-serverDone:
			t.Fatalf("%v server exited before listening: %d\nstdout:\n%s\nstderr:\n%s", server, r.code, r.stdout, r.stderr)
		case <-ctx.Done():
			cancel()
			r := <-serverDone
			t.Fatalf("%v server not listening on %d after %v; stdout:\n%s\nstderr:\n%s", server, port, ppRunTimeout, r.stdout, r.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cr := ppRun(ctx, kind, client, cTool, cargs)
	if cr.code != 0 {
		cancel() // the server may wait for a client that is gone
	}
	sr := <-serverDone
	if sr.code != 0 || cr.code != 0 {
		t.Fatalf("%s %v server -> %v client: exit %d and %d\nserver stdout:\n%s\nserver stderr:\n%s\nclient stdout:\n%s\nclient stderr:\n%s",
			kind, server, client, sr.code, cr.code, sr.stdout, sr.stderr, cr.stdout, cr.stderr)
	}
	return sr, cr
}

// ppCheck checks one end's output: each side printed the other's
// addresses as its remote ones, its own GID, the UD quirk, and the
// summary lines for size and iters.
func ppCheck(t *testing.T, kind string, sr, cr ppResult, nqp, size, iters int) {
	t.Helper()
	for _, x := range []struct {
		name     string
		r, other ppResult
		ip       string
	}{{"server", sr, cr, ppServerAddr}, {"client", cr, sr, ppClientAddr}} {
		local := pingpongrun.Addresses(x.r.stdout, pingpongrun.LocalRE)
		if len(local) != nqp {
			t.Errorf("%s printed %d local addresses, want %d:\n%s", x.name, len(local), nqp, x.r.stdout)
		}
		if diff := cmp.Diff(local, pingpongrun.Addresses(x.other.stdout, pingpongrun.RemoteRE)); diff != "" {
			t.Errorf("%s's local addresses vs the peer's remote ones (-%s +peer):\n%s", x.name, x.name, diff)
		}
		for _, l := range local {
			if !strings.HasSuffix(l, " ::ffff:"+x.ip) {
				t.Errorf("%s's local address %q: want GID ::ffff:%s", x.name, l, x.ip)
			}
		}
		if (kind == "ud") != pingpongrun.UDLocalRE.MatchString(x.r.stdout) {
			t.Errorf("%s %s: the local address line's \": GID\" (only ibv_ud_pingpong has it):\n%s", kind, x.name, x.r.stdout)
		}
		b := pingpongrun.BytesRE.FindStringSubmatch(x.r.stdout)
		it := pingpongrun.ItersRE.FindStringSubmatch(x.r.stdout)
		if b == nil || it == nil {
			t.Errorf("%s printed no summary:\n%s", x.name, x.r.stdout)
			continue
		}
		if got, want := b[1], strconv.Itoa(size*iters*2); got != want {
			t.Errorf("%s: %s bytes, want %s", x.name, got, want)
		}
		if got, want := it[1], strconv.Itoa(iters); got != want {
			t.Errorf("%s: %s iters, want %s", x.name, got, want)
		}
		if b[2] != it[2] {
			t.Errorf("%s: the two summary lines give %s and %s seconds", x.name, b[2], it[2])
		}
		if strings.Contains(x.r.stdout, "invalid data") {
			t.Errorf("%s found invalid data:\n%s", x.name, x.r.stdout)
		}
	}
}

// TestPingpongInterop runs the Go command against rdma-core's C tools
// and against itself, for each transport, in both roles, busy polling
// and with -e on one side.
func TestPingpongInterop(t *testing.T) {
	testenv.Devices(t, 2)
	const iters = 20
	goS, goC := ppSide{goSide: true}, ppSide{goSide: true}
	goSE := ppSide{goSide: true, events: true, flags: []string{"-r", "4"}}
	goCE := ppSide{goSide: true, events: true, flags: []string{"-r", "5"}}
	c := ppSide{}
	for _, kind := range []string{"rc", "uc", "ud", "srq"} {
		size := 4096
		if kind == "ud" {
			size = 1024
		}
		// A path MTU under the port's (1024 on a 1500-byte veth): rxe
		// drops packets over the netdev's MTU, so -m 2048 hangs C with C.
		mtu := []string{"-m", "512"}
		if kind == "ud" {
			mtu = nil // ibv_ud_pingpong has no -m
		}
		nqp, srqFlags := 1, []string(nil)
		if kind == "srq" {
			nqp, srqFlags = 4, []string{"-q", "4"}
		}
		tests := []struct {
			name           string
			server, client ppSide
			shared         []string
			size, nqp      int
		}{
			{"go-server+c-client", goS, c, []string{"-l", "1"}, size, 1},
			{"c-server+go-client", c, goC, mtu, size, 1},
			{"go-server-e+c-client", goSE, c, append([]string{"-s", "64", "-c"}, srqFlags...), 64, nqp},
			{"c-server+go-client-e", c, goCE, append([]string{"-s", "1000", "-c"}, srqFlags...), 1000, nqp},
			{"go-server+go-client-e", goS, ppSide{goSide: true, events: true}, nil, size, 1},
			{"go-server-e+go-client", ppSide{goSide: true, events: true}, goC, srqFlags, size, nqp},
		}
		for _, tt := range tests {
			if kind == "srq" && tt.nqp == 1 {
				tt.nqp = 16 // ibv_srq_pingpong's default -q
			}
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				shared := append([]string{"-n", strconv.Itoa(iters)}, tt.shared...)
				start := time.Now()
				sr, cr := ppPair(t, kind, tt.server, tt.client, shared)
				ppCheck(t, kind, sr, cr, tt.nqp, tt.size, iters)
				t.Logf("%v: server: %s client: %s", time.Since(start).Round(time.Millisecond),
					pingpongrun.ItersRE.FindString(sr.stdout), pingpongrun.ItersRE.FindString(cr.stdout))
			})
		}
	}
}

// TestPingpongErrors: what fails does so with a clear message and exit
// status 1, without hanging.
func TestPingpongErrors(t *testing.T) {
	testenv.Devices(t, 2)
	gidx := strconv.Itoa(pingpongrun.GIDIndex(t, ppClientDev, ppClientAddr))
	port := strconv.Itoa(ppNextPort()) // nobody listens there
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"RoCE without -g", []string{"rc", "-d", ppServerDev}, "needs a GID: give its index with -g"},
		{"no such device", []string{"rc", "-d", "nosuchdev0", "-g", "1"}, "IB device nosuchdev0 not found"},
		{"no such GID", []string{"rc", "-d", ppServerDev, "-g", "200"}, "can't read sgid of index 200"},
		{"no such IB port", []string{"srq", "-d", ppServerDev, "-g", "1", "-i", "2"}, "rxe0 has no port 2 (-i)"},
		{"UD size over the MTU", []string{"ud", "-d", ppServerDev, "-g", "1", "-s", "4096"}, "requested size larger than port MTU"},
		{"no server", []string{"uc", "-d", ppClientDev, "-g", gidx, "-p", port, ppServerAddr}, "couldn't connect to " + ppServerAddr + ":" + port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), ppRunTimeout)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := clitest.Set(Command).Run(ctx, append([]string{"pingpong"}, tt.args...), &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("pingpong %q = %d, stderr %q; want 1 and %q", tt.args, code, stderr.String(), tt.wantErr)
			}
		})
	}
}

// TestPingpongCancel: a server that no client reaches, and a client
// whose server never answers, both end when the context does.
func TestPingpongCancel(t *testing.T) {
	testenv.Devices(t, 2)
	t.Run("server", func(t *testing.T) {
		port := ppNextPort()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		args := []string{"-d", ppServerDev, "-g", strconv.Itoa(pingpongrun.GIDIndex(t, ppServerDev, ppServerAddr)), "-p", strconv.Itoa(port)}
		done := make(chan ppResult, 1)
		go func() { done <- ppRun(ctx, "rc", ppSide{goSide: true}, "", args) }()
		ppWaitCancel(t, port, cancel, done, "accept() failed: context canceled")
	})
	t.Run("client", func(t *testing.T) {
		// A TCP server that accepts and says nothing.
		ln, err := net.Listen("tcp", ppServerAddr+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				accepted <- c
			}
			close(accepted)
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		args := []string{"-d", ppClientDev, "-g", strconv.Itoa(pingpongrun.GIDIndex(t, ppClientDev, ppClientAddr)), "-p", strconv.Itoa(port), ppServerAddr}
		done := make(chan ppResult, 1)
		go func() { done <- ppRun(ctx, "rc", ppSide{goSide: true}, "", args) }()
		var conn net.Conn
		select {
		case conn = <-accepted:
		case r := <-done:
			t.Fatalf("the client ended before connecting: %d, %q", r.code, r.stderr)
		case <-time.After(time.Minute):
			t.Fatal("the client did not connect within a minute")
		}
		if conn == nil {
			t.Fatal("accept failed")
		}
		defer conn.Close()
		ppWaitCancel(t, port, cancel, done, "context canceled")
	})
}

// ppWaitCancel waits until the run is blocked on port (listening, or
// connected to the listener), cancels it, and checks it returns at once.
func ppWaitCancel(t *testing.T, port int, cancel func(), done chan ppResult, wantErr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !pingpongrun.Listening(port) {
		if time.Now().After(deadline) {
			t.Fatal("nothing listening after a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // let it block
	cancel()
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, wantErr) {
			t.Errorf("after cancel: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, wantErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end within 30s of the cancel")
	}
}

// TestPingpongJSON runs the Go command with -json against itself and,
// as the client, against the C tool, and checks that each Go end prints
// one JSON summary, and nothing else, with the run's values.
func TestPingpongJSON(t *testing.T) {
	testenv.Devices(t, 2)
	const iters = 50
	goJ := ppSide{goSide: true, flags: []string{"-json"}}
	for _, tt := range []struct {
		kind           string
		server, client ppSide
		size           int
	}{
		{"rc", goJ, goJ, 4096},
		{"ud", goJ, ppSide{goSide: true, events: true, flags: []string{"--json"}}, 1024},
		{"srq", goJ, goJ, 64},
		{"rc", ppSide{}, goJ, 100},
	} {
		t.Run(tt.kind+"/"+tt.server.String()+"-server+"+tt.client.String()+"-client", func(t *testing.T) {
			sr, cr := ppPair(t, tt.kind, tt.server, tt.client, []string{"-n", strconv.Itoa(iters), "-s", strconv.Itoa(tt.size), "-c"})
			for _, x := range []struct {
				role string
				side ppSide
				r    ppResult
			}{{"server", tt.server, sr}, {"client", tt.client, cr}} {
				if !x.side.goSide {
					continue
				}
				var s ppSummaryJSON
				if err := toolrun.DecodeOneJSON(x.r.stdout, &s); err != nil {
					t.Fatalf("%s stdout is not one JSON summary: %v\n%s", x.role, err, x.r.stdout)
				}
				bytes := int64(tt.size) * iters * 2
				want := ppSummaryJSON{Test: tt.kind, Role: x.role, Size: tt.size, Iters: iters, Bytes: bytes,
					Seconds: s.Seconds, MbitPerSec: s.MbitPerSec, USecPerIter: s.USecPerIter}
				if diff := cmp.Diff(want, s); diff != "" {
					t.Errorf("%s summary (-want +got):\n%s", x.role, diff)
				}
				us := s.Seconds * 1e6
				near := func(got, want float64) bool { return got > 0 && math.Abs(got-want) <= 1e-6*want+1e-3 }
				if s.Seconds <= 0 || !near(s.USecPerIter, us/iters) || !near(s.MbitPerSec, float64(bytes)*8/us) {
					t.Errorf("%s: seconds %v, usec_per_iter %v, mbit_per_sec %v: want seconds > 0, usec_per_iter %v, mbit_per_sec %v",
						x.role, s.Seconds, s.USecPerIter, s.MbitPerSec, us/iters, float64(bytes)*8/us)
				}
			}
		})
	}
}
