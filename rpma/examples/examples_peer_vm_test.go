//go:build purerdma_peer

package examples_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// The cross-host examples run one side of an example on each VM of the
// two-VM bed (docs/testing.md "The two-VM bed"), over the data link's
// rxe devices: the server on the peer and then on this VM, each in the
// three pairs (Go-Go, C server and Go client, Go server and C client).
// They build only with the tag purerdma_peer (make vmtest-peer). The Go
// sides are the binaries of `make examples`, on the host's files that
// both VMs see; the C side is testdata/cexample.c, compiled on each VM
// at the start (their /tmp is their own).

// peerCBuild is the C examples' binary compiled on the peer.
var peerCBuild string

// peerCompile compiles testdata/cexample.c on the peer (in /tmp/, its
// own) while cExample compiles it on this VM, each on its VM's vCPU.
func peerCompile(t testing.TB, p *testenv.Peer) {
	t.Helper()
	bin := fmt.Sprintf("/tmp/cexample-peer-%d", os.Getpid())
	start := time.Now()
	pp := p.Start(t, "gcc", "-O2", "-Wall", "-Werror", "-o", bin, "testdata/cexample.c", "-lrpma", "-libverbs")
	cExample(t)
	r := pp.Wait()
	if r.ExitCode != 0 || r.Err != nil {
		t.Fatalf("compiling testdata/cexample.c on the peer: exit %d, %v\n%s%s", r.ExitCode, r.Err, r.Stdout, r.Stderr)
	}
	t.Logf("compiled testdata/cexample.c on both VMs in %v", time.Since(start).Round(time.Millisecond))
	peerCBuild = bin
}

// peerPMem is the peer's persistent memory (its PURERDMA_PMEM).
func peerPMem(t testing.TB, p *testenv.Peer) string {
	t.Helper()
	r := p.Run(t, "printenv", "PURERDMA_PMEM")
	path := strings.TrimSpace(r.Stdout)
	if r.ExitCode != 0 || r.Err != nil || path == "" {
		t.Fatalf("the peer has no PURERDMA_PMEM: exit %d, %v %s", r.ExitCode, r.Err, r.Stderr)
	}
	return path
}

var peerPorts struct {
	sync.Mutex
	next int
}

func peerNextPort() string {
	peerPorts.Lock()
	defer peerPorts.Unlock()
	peerPorts.next++
	return strconv.Itoa(7900 + peerPorts.next)
}

// peerExample is one cross-host run of an example.
type peerExample struct {
	name                   string
	serverArgs, clientArgs []string // after <addr> <port>
	serverOut, clientOut   []string // lines each side prints
	pair                   pair
	serverOnPeer           bool
}

// peerSide is how one side of a cross-host run ended.
type peerSide struct {
	name        string
	code        int
	out, errOut string
}

// expect checks that s printed each of lines.
func (s peerSide) expect(t testing.TB, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(s.out, l) {
			t.Errorf("%s's output lacks %q:\n%s\nstderr:\n%s", s.name, l, s.out, s.errOut)
		}
	}
}

// value is what follows prefix on the line of s's output that starts
// with it, failing the test without one.
func (s peerSide) value(t testing.TB, prefix string) string {
	t.Helper()
	for l := range strings.Lines(s.out) {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSuffix(rest, "\n")
		}
	}
	t.Fatalf("%s printed no line starting with %q:\n%s\nstderr:\n%s", s.name, prefix, s.out, s.errOut)
	return ""
}

// peerCommand is the program and leading arguments of one side of
// ex on its VM.
func peerCommand(t testing.TB, ex peerExample, side string, onPeer bool) (string, []string) {
	t.Helper()
	if c := map[string]bool{"server": ex.pair.cServer, "client": ex.pair.cClient}[side]; c {
		if onPeer {
			return peerCBuild, []string{ex.name, side}
		}
		return cExample(t), []string{ex.name, side}
	}
	return binary(t, ex.name, side), nil
}

// peerRun runs ex's server on its VM and, once it listens, the client
// on the other, and checks both exit 0 with their lines.
func peerRun(t testing.TB, p *testenv.Peer, ex peerExample) (server, client peerSide) {
	t.Helper()
	port := peerNextPort()
	addr := p.LocalAddr.String()
	if ex.serverOnPeer {
		addr = p.Addr.String()
	}
	spath, slead := peerCommand(t, ex, "server", ex.serverOnPeer)
	cpath, clead := peerCommand(t, ex, "client", !ex.serverOnPeer)
	sargs := append(append(slead, addr, port), ex.serverArgs...)
	cargs := append(append(clead, addr, port), ex.clientArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ex.serverOnPeer {
		pp := p.Start(t, spath, sargs...)
		peerWaitFor(t, pp, listening)
		c := start(t, ctx, "client", cpath, cargs...)
		err := <-c.done
		c.done <- err
		client = peerSide{"client on this VM", exitCode(err), c.out.String(), c.err.String()}
		if client.code != 0 {
			pp.Kill()
		}
		r := pp.Wait()
		server = peerSide{"server on the peer", r.ExitCode, r.Stdout, r.Stderr}
		if r.Err != nil {
			server.errOut += "\n" + r.Err.Error()
		}
	} else {
		s := start(t, ctx, "server", spath, sargs...)
		s.waitFor(t, listening, 30*time.Second)
		r := p.Start(t, cpath, cargs...).Wait()
		client = peerSide{"client on the peer", r.ExitCode, r.Stdout, r.Stderr}
		if r.Err != nil {
			client.errOut += "\n" + r.Err.Error()
		}
		if client.code != 0 {
			s.cmd.Process.Kill()
		}
		err := <-s.done
		s.done <- err
		server = peerSide{"server on this VM", exitCode(err), s.out.String(), s.err.String()}
	}
	if server.code != 0 || client.code != 0 {
		t.Fatalf("%s (%s): exit %d\nstdout:\n%s\nstderr:\n%s\n%s (%s): exit %d\nstdout:\n%s\nstderr:\n%s",
			server.name, spath, server.code, server.out, server.errOut, client.name, cpath, client.code, client.out, client.errOut)
	}
	server.expect(t, ex.serverOut...)
	client.expect(t, ex.clientOut...)
	return server, client
}

// exitCode is a process's exit status from Wait's error (-1 when it
// did not exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		return ee.ExitCode()
	}
	return -1
}

// peerWaitFor waits until the peer process printed s on stdout or
// stderr (the rpma log goes to stderr), failing the test when it ends
// first or nothing comes within 60 s (a hang guard).
func peerWaitFor(t testing.TB, pp *testenv.PeerProcess, s string) {
	t.Helper()
	limit := time.After(time.Minute)
	for {
		out, errOut := pp.Output()
		if strings.Contains(out, s) || strings.Contains(errOut, s) {
			return
		}
		select {
		case <-pp.Done():
			r := pp.Wait()
			t.Fatalf("the server on the peer ended (exit %d, %v) before printing %q:\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Err, s, r.Stdout, r.Stderr)
		case <-limit:
			t.Fatalf("the server on the peer did not print %q:\nstdout:\n%s\nstderr:\n%s", s, out, errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// forPeerPairs runs f once per server VM and pair, as subtests.
func forPeerPairs(t *testing.T, f func(t *testing.T, serverOnPeer bool, p pair)) {
	t.Helper()
	for _, onPeer := range []bool{true, false} {
		where := "server@local"
		if onPeer {
			where = "server@peer"
		}
		for _, p := range pairs {
			t.Run(where+"/"+p.String(), func(t *testing.T) { f(t, onPeer, p) })
		}
	}
}

// TestPeerExamples runs a representative set of the rpma examples
// across the two-VM bed, each with the server on the peer and then on
// this VM, Go-Go and against C librpma both ways, with the one-VM
// tests' checks: 01 (connection and private data both ways), 02 (RDMA
// READ), 04 (RDMA WRITE), 05 (write and flush, on PMem with the server
// saying it takes writes directly: the flush to persistence; a 6.12
// side registers the FLUSH rights there while a 6.1 side emulates),
// 07 (atomic write: native ATOMIC_WRITE from a 6.12 Go client, the
// fenced inline write from 6.1 and from C) and 08 (SEND and RECV).
// The others repeat these operations (03, 06, 09-13) or wait for
// clients that do not come (06, 13).
func TestPeerExamples(t *testing.T) {
	p := testenv.PeerHost(t)
	peerCompile(t, p)
	t.Run("01-connection", func(t *testing.T) {
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			peerRun(t, p, peerExample{name: "01-connection", pair: pr, serverOnPeer: onPeer,
				serverOut: []string{"Received a message: Hello server!"},
				clientOut: []string{"Received a message: Hello client!"}})
		})
	})
	t.Run("02-read-to-volatile", func(t *testing.T) {
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			peerRun(t, p, peerExample{name: "02-read-to-volatile", pair: pr, serverOnPeer: onPeer,
				clientOut: []string{"Read a message: Hello client!\n"}})
		})
	})
	t.Run("04-write-to-persistent", func(t *testing.T) {
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			s, c := peerRun(t, p, peerExample{name: "04-write-to-persistent", pair: pr, serverOnPeer: onPeer,
				clientOut: []string{"translating...\n"}})
			peerCheckHello(t, s, c)
		})
	})
	t.Run("05-flush-to-persistent", func(t *testing.T) {
		local := pmemPath(t)
		remote := peerPMem(t, p)
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			spmem, cpmem := local, remote
			if onPeer {
				spmem, cpmem = remote, local
			}
			s, c := peerRun(t, p, peerExample{name: "05-flush-to-persistent", pair: pr, serverOnPeer: onPeer,
				serverArgs: []string{spmem, "on"}, clientArgs: []string{cpmem, "24576"},
				clientOut: []string{"translating...\n", flushPersistent}})
			peerCheckHello(t, s, c)
		})
	})
	t.Run("07-atomic-write", func(t *testing.T) {
		words := []string{"1st_word", "2nd_word", "3rd_word"}
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			s, c := peerRun(t, p, peerExample{name: "07-atomic-write", pair: pr, serverOnPeer: onPeer, clientArgs: words})
			if used, want := c.value(t, "used value: "), "16"; used != want {
				t.Errorf("on DRAM the client found the log's end at %s, want %s", used, want)
			}
			if want := strings.Join(words, "\n") + "\n"; s.out != want {
				t.Errorf("the server printed the log %q, want %q", s.out, want)
			}
		})
	})
	t.Run("08-messages-ping-pong", func(t *testing.T) {
		// C's client loops while (--rounds): 3 rounds are 2 exchanges.
		forPeerPairs(t, func(t *testing.T, onPeer bool, pr pair) {
			s, _ := peerRun(t, p, peerExample{name: "08-messages-ping-pong", pair: pr, serverOnPeer: onPeer,
				clientArgs: []string{"7", "3"},
				serverOut:  []string{"Value received: 7\n", "Value sent: 8\n", "Value received: 8\n", "Value sent: 9\n"},
				clientOut:  []string{"Value sent: 7\n", "Value received: 8\n", "Value sent: 8\n", "Value received: 9\n"}})
			if strings.Contains(s.out, "Value received: 9\n") {
				t.Errorf("the server received a third value:\n%s", s.out)
			}
		})
	})
}

// peerCheckHello checks a run of 04 or 05: the client sent a greeting
// and printed its translation, and the server got what it sent.
func peerCheckHello(t testing.TB, s, c peerSide) {
	t.Helper()
	sent := c.value(t, "Next value: ")
	if got, want := c.value(t, "Translation: "), other(t, sent); got != want {
		t.Errorf("the client translated %q to %q, want %q", sent, got, want)
	}
	if got := s.value(t, "New value: "); got != sent {
		t.Errorf("the server got %q, the client sent %q", got, sent)
	}
}
