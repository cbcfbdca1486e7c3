//go:build purerdma_peer

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

// The cross-host tests run the purerdma command and rdma-core's tools on
// the two-VM bed (docs/testing.md "The two-VM bed"), one end on each VM
// over the data link's rxe devices. The Go end is this test binary run
// as the command (mainEnv): the peer VM sees the host's files at the same
// paths, so os.Args[0] runs there too. They build only with the tag
// purerdma_peer (make vmtest-peer): testenv.PeerHost fails them under
// PURERDMA_REQUIRE_DEVICE=1 without a bed, which is how make vmtest runs
// this package.

// peerRunTimeout bounds each end of a cross-host run; a hang fails the
// test.
const peerRunTimeout = 2 * time.Minute

// peerPorts hands each run its own TCP port.
var peerPorts atomic.Int32

func peerNextPort() int { return 18900 + int(peerPorts.Add(1)) }

// peerGIDScript prints port 1's GIDs and GID types of the device in $1
// from sysfs as "gids/INDEX:GID" and "gid_attrs/types/INDEX:TYPE" lines,
// with one process (an entry without a type cannot be read: grep -s
// passes over it).
const peerGIDScript = `cd /sys/class/infiniband/"$1"/ports/1 && grep -s -H . gids/* gid_attrs/types/*; exit 0`

// peerGIDIndex parses peerGIDScript's output for the index of the RoCE
// v2 GID ::ffff:ip.
func peerGIDIndex(t *testing.T, host, dev, out string, ip net.IP) int {
	t.Helper()
	gids, types := map[string]string{}, map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		path, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		if i, ok := strings.CutPrefix(path, "gids/"); ok {
			gids[i] = v
		} else if i, ok := strings.CutPrefix(path, "gid_attrs/types/"); ok {
			types[i] = v
		}
	}
	for i, g := range gids {
		if types[i] != "RoCE v2" {
			continue
		}
		if gip := net.ParseIP(g); gip != nil && gip.Equal(ip) {
			if n, err := strconv.Atoi(i); err == nil {
				return n
			}
		}
	}
	t.Fatalf("%s %s: no RoCE v2 GID for %s on port 1; its GIDs:\n%s", host, dev, ip, out)
	return -1
}

// peerGIDs finds the GID index of the data link's address on each VM.
func peerGIDs(t *testing.T, p *testenv.Peer) (local, peer int) {
	t.Helper()
	out, err := exec.Command("sh", "-c", peerGIDScript, "sh", p.LocalDev).CombinedOutput()
	if err != nil {
		t.Fatalf("reading %s's GIDs: %v\n%s", p.LocalDev, err, out)
	}
	local = peerGIDIndex(t, "this VM", p.LocalDev, string(out), net.IP(p.LocalAddr.AsSlice()))
	r := p.Run(t, "sh", "-c", peerGIDScript, "sh", p.Dev)
	if r.ExitCode != 0 || r.Err != nil {
		t.Fatalf("reading the peer's %s GIDs: exit %d, %v\n%s%s", p.Dev, r.ExitCode, r.Err, r.Stdout, r.Stderr)
	}
	return local, peerGIDIndex(t, "the peer", p.Dev, r.Stdout, net.IP(p.Addr.AsSlice()))
}

// peerWaitListening waits until the server pp listens on port on the
// peer, without connecting to it (the servers accept one connection):
// a TCP socket in state 0A in /proc/net/tcp or tcp6, or an rdma_cm ID in
// state LISTEN on the peer's address and port. The peer's loop gives up
// after about 60 s, a hang guard.
func peerWaitListening(t *testing.T, p *testenv.Peer, how listenCheck, port int, server *testenv.PeerProcess) {
	t.Helper()
	check := fmt.Sprintf(`awk '$2 ~ /:%04X$/ && $4 == "0A" { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6`, port)
	if how == listenCM {
		check = fmt.Sprintf(`rdma -j res show cm_id | tr '{' '\n' | grep '"state":"LISTEN"' | grep -q '"src-addr":"%s:%d"'`, p.Addr, port)
	}
	r := p.Run(t, "sh", "-c", "n=0; until "+check+"; do n=$((n+1)); [ $n -gt 1200 ] && exit 1; sleep 0.05; done")
	if r.ExitCode != 0 || r.Err != nil {
		server.Kill()
		sr := server.Wait()
		t.Fatalf("no server listening on the peer's port %d (exit %d, %v %s); the server: exit %d\nstdout:\n%s\nstderr:\n%s",
			port, r.ExitCode, r.Err, r.Stderr, sr.ExitCode, sr.Stdout, sr.Stderr)
	}
}

// waitListening waits until the server pid listens on port on this VM.
func waitListening(t *testing.T, ctx context.Context, how listenCheck, port, pid int, done <-chan ppResult) {
	t.Helper()
	for {
		var ok bool
		if how == listenCM {
			var out string
			var err error
			if ok, out, err = toolrun.Listening(ctx, "rdma", port, pid); err != nil && ctx.Err() == nil {
				t.Fatalf("%v\n%s", err, out)
			}
		} else {
			ok = ppListening(port)
		}
		if ok {
			return
		}
		select {
		case r := <-done:
			t.Fatalf("the server exited before it listened on %d: exit %d\nstdout:\n%s\nstderr:\n%s", port, r.code, r.stdout, r.stderr)
		case <-ctx.Done():
			t.Fatalf("the server did not listen on %d within %v", port, peerRunTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// peerEnd is one end of a cross-host run.
type peerEnd struct {
	onPeer bool   // on the peer VM, else on this one
	tool   string // "" for the purerdma command, else rdma-core's tool's path
}

func (e peerEnd) String() string {
	s := "go"
	if e.tool != "" {
		s = "c"
	}
	if e.onPeer {
		return s + "@peer"
	}
	return s + "@local"
}

// peerStart starts args on e's VM: the purerdma command (args after the
// program name) or the C tool.
func peerStart(t *testing.T, p *testenv.Peer, e peerEnd, args []string) *testenv.PeerProcess {
	t.Helper()
	name, env := e.tool, []string(nil)
	if name == "" {
		name, env = os.Args[0], []string{mainEnv + "=1"}
	}
	return p.StartEnv(t, env, name, args...)
}

// startLocal starts args on this VM as peerStart does on the peer and
// returns its pid and where its result arrives.
func startLocal(t *testing.T, ctx context.Context, e peerEnd, args []string) (int, <-chan ppResult) {
	t.Helper()
	name := e.tool
	if name == "" {
		name = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if e.tool == "" {
		cmd.Env = append(os.Environ(), mainEnv+"=1")
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan ppResult, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", e, err)
	}
	go func() {
		code := toolrun.ExitCode(cmd.Wait(), &stderr)
		done <- ppResult{code, stdout.String(), stderr.String()}
	}()
	return cmd.Process.Pid, done
}

// A listenCheck waits until the server listens on its port: over TCP
// for pingpong, over the rdma_cm for ping.
type listenCheck int

const (
	listenTCP listenCheck = iota
	listenCM
)

// peerPair runs a server and a client, one on each VM, and returns both
// results, failing the test unless both exit 0. The client starts once
// the server listens on port (how says how to tell).
func peerPair(t *testing.T, p *testenv.Peer, how listenCheck, server, client peerEnd, sargs, cargs []string, port int) (ppResult, ppResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), peerRunTimeout)
	defer cancel()
	var sr, cr ppResult
	if server.onPeer {
		pp := peerStart(t, p, server, sargs)
		peerWaitListening(t, p, how, port, pp)
		_, cdone := startLocal(t, ctx, client, cargs)
		cr = <-cdone
		if cr.code != 0 {
			pp.Kill()
		}
		r := pp.Wait()
		sr = ppResult{r.ExitCode, r.Stdout, r.Stderr}
		if r.Err != nil {
			sr.stderr += "\n" + r.Err.Error()
		}
	} else {
		pid, sdone := startLocal(t, ctx, server, sargs)
		waitListening(t, ctx, how, port, pid, sdone)
		r := peerStart(t, p, client, cargs).Wait()
		cr = ppResult{r.ExitCode, r.Stdout, r.Stderr}
		if r.Err != nil {
			cr.stderr += "\n" + r.Err.Error()
		}
		if cr.code != 0 {
			cancel() // the server may wait for a client that is gone
		}
		sr = <-sdone
	}
	if sr.code != 0 || cr.code != 0 {
		t.Fatalf("%v server -> %v client: exit %d and %d\nserver stdout:\n%s\nserver stderr:\n%s\nclient stdout:\n%s\nclient stderr:\n%s",
			server, client, sr.code, cr.code, sr.stdout, sr.stderr, cr.stdout, cr.stderr)
	}
	return sr, cr
}

// TestPeerPingpong runs pingpong rc, ud and srq across the two-VM bed:
// the purerdma command against itself and against rdma-core's
// ibv_KIND_pingpong, with the server on either VM, data checked with -c.
func TestPeerPingpong(t *testing.T) {
	p := testenv.PeerHost(t)
	localGID, peerGID := peerGIDs(t, p)
	const iters = 20
	for _, kind := range []string{"rc", "ud", "srq"} {
		cTool := ppCTool(t, kind)
		size, nqp, extra := 4096, 1, []string{"-m", "1024"}
		switch kind {
		case "ud":
			size, extra = 1024, nil // ibv_ud_pingpong has no -m
		case "srq":
			nqp, extra = 4, append(extra, "-q", "4")
		}
		for _, serverOnPeer := range []bool{true, false} {
			for _, impl := range []struct{ server, client string }{{"", ""}, {"", cTool}, {cTool, ""}} {
				server := peerEnd{onPeer: serverOnPeer, tool: impl.server}
				client := peerEnd{onPeer: !serverOnPeer, tool: impl.client}
				t.Run(fmt.Sprintf("%s/%v-server+%v-client", kind, server, client), func(t *testing.T) {
					port := peerNextPort()
					common := append([]string{"-p", strconv.Itoa(port), "-n", strconv.Itoa(iters), "-s", strconv.Itoa(size), "-c"}, extra...)
					args := func(e peerEnd) []string {
						dev, gid := p.LocalDev, localGID
						if e.onPeer {
							dev, gid = p.Dev, peerGID
						}
						a := []string{"-d", dev, "-g", strconv.Itoa(gid)}
						if e.tool == "" {
							a = append([]string{"pingpong", kind}, a...)
						}
						return append(a, common...)
					}
					serverAddr, clientAddr := p.LocalAddr.String(), p.Addr.String()
					if serverOnPeer {
						serverAddr, clientAddr = clientAddr, serverAddr
					}
					sr, cr := peerPair(t, p, listenTCP, server, client, args(server), append(args(client), serverAddr), port)
					peerCheckPingpong(t, kind, sr, cr, serverAddr, clientAddr, nqp, size, iters)
				})
			}
		}
	}
}

// peerCheckPingpong checks both ends' output as ppCheck does for one VM:
// each printed the other's addresses as its remote ones, its own GID,
// and the summary for size and iters, and no invalid data.
func peerCheckPingpong(t *testing.T, kind string, sr, cr ppResult, serverAddr, clientAddr string, nqp, size, iters int) {
	t.Helper()
	for _, x := range []struct {
		name     string
		r, other ppResult
		ip       string
	}{{"server", sr, cr, serverAddr}, {"client", cr, sr, clientAddr}} {
		local := ppAddresses(x.r.stdout, ppLocalRE)
		if len(local) != nqp {
			t.Errorf("%s printed %d local addresses, want %d:\n%s", x.name, len(local), nqp, x.r.stdout)
		}
		remote := ppAddresses(x.other.stdout, ppRemoteRE)
		if strings.Join(local, "\n") != strings.Join(remote, "\n") {
			t.Errorf("%s's local addresses %q, but the other end's remote ones are %q", x.name, local, remote)
		}
		for _, l := range local {
			if !strings.HasSuffix(l, " ::ffff:"+x.ip) {
				t.Errorf("%s's local address %q: want GID ::ffff:%s", x.name, l, x.ip)
			}
		}
		b := ppBytesRE.FindStringSubmatch(x.r.stdout)
		it := ppItersRE.FindStringSubmatch(x.r.stdout)
		if b == nil || it == nil {
			t.Errorf("%s printed no summary:\n%s", x.name, x.r.stdout)
			continue
		}
		if got, want := b[1], strconv.Itoa(size*iters*2); got != want {
			t.Errorf("%s %s: %s bytes, want %s", kind, x.name, got, want)
		}
		if got, want := it[1], strconv.Itoa(iters); got != want {
			t.Errorf("%s %s: %s iters, want %s", kind, x.name, got, want)
		}
		if regexp.MustCompile(`(?i)invalid data`).MatchString(x.r.stdout + x.r.stderr) {
			t.Errorf("%s found invalid data:\n%s%s", x.name, x.r.stdout, x.r.stderr)
		}
	}
}

// peerPingLines is what ping -v (and rping -v) prints for pings 0 to n-1
// of size bytes: rping's text, "rdma-ping-N: " and then letters from
// 'A'+N%58 on, cycling through 'A'..'z', to size-1 bytes.
func peerPingLines(prefix string, n, size int) string {
	var b strings.Builder
	for i := range n {
		line := []byte(fmt.Sprintf("rdma-ping-%d: ", i))
		c := byte(65 + i%58)
		for len(line) < size-1 {
			line = append(line, c)
			if c++; c > 122 {
				c = 65
			}
		}
		fmt.Fprintf(&b, "%s%s\n", prefix, line[:size-1])
	}
	return b.String()
}

// TestPeerPing runs `purerdma ping` across the two-VM bed, against
// itself and against rdma-core's rping, with the server on either VM,
// and checks every ping's data both ends print (-v).
func TestPeerPing(t *testing.T) {
	p := testenv.PeerHost(t)
	rping := toolrun.Tool(t, "rping")
	toolrun.Tool(t, "rdma")
	const n, size = 10, 100
	for _, serverOnPeer := range []bool{true, false} {
		for _, impl := range []struct{ server, client string }{{"", ""}, {"", rping}, {rping, ""}} {
			server := peerEnd{onPeer: serverOnPeer, tool: impl.server}
			client := peerEnd{onPeer: !serverOnPeer, tool: impl.client}
			t.Run(fmt.Sprintf("%v-server+%v-client", server, client), func(t *testing.T) {
				port := peerNextPort()
				addr := p.LocalAddr.String()
				if serverOnPeer {
					addr = p.Addr.String()
				}
				common := []string{"-a", addr, "-C", strconv.Itoa(n), "-S", strconv.Itoa(size), "-v", "-p", strconv.Itoa(port)}
				args := func(e peerEnd, role ...string) []string {
					a := append(role, common...)
					if e.tool == "" {
						a = append([]string{"ping"}, a...)
					}
					return a
				}
				sr, cr := peerPair(t, p, listenCM, server, client, args(server, "-s"), args(client, "-c", "-V"), port)
				if got, want := sr.stdout, peerPingLines("server ping data: ", n, size); got != want {
					t.Errorf("%v server printed:\n%s\nwant:\n%s", server, got, want)
				}
				if got, want := cr.stdout, peerPingLines("ping data: ", n, size); got != want {
					t.Errorf("%v client printed:\n%s\nwant:\n%s", client, got, want)
				}
				if server.tool == "" && sr.stderr != "server DISCONNECT EVENT...\n" {
					t.Errorf("%v server stderr %q, want only the disconnect line", server, sr.stderr)
				}
				if client.tool == "" && cr.stderr != "" {
					t.Errorf("%v client stderr %q, want nothing", client, cr.stderr)
				}
			})
		}
	}
}
