//go:build purerdma_peer

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/bench"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

// peerStormConns is how many connections each storm sets up at once
// and tears down (issue 26).
const peerStormConns = 500

// peerResScript prints the rdma tool's resource summary as JSON: one
// object per device with its counts of PDs, CQs, QPs, cm_ids, MRs and
// contexts.
const peerResScript = `rdma -j res show`

// peerResCounts parses peerResScript's output into device dev's counts
// by resource name (its name and index left out).
func peerResCounts(t *testing.T, where, dev, out string) map[string]int {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%s: rdma -j res show: %v\n%s", where, err, out)
	}
	i := slices.IndexFunc(rows, func(r map[string]any) bool { return r["ifname"] == dev })
	if i < 0 {
		t.Fatalf("%s: rdma -j res show has no %s:\n%s", where, dev, out)
	}
	counts := map[string]int{}
	for k, v := range rows[i] {
		if n, ok := v.(float64); ok && k != "ifindex" {
			counts[k] = int(n)
		}
	}
	if _, ok := counts["qp"]; !ok {
		t.Fatalf("%s: rdma -j res show has no qp count:\n%s", where, out)
	}
	return counts
}

// peerRes reads the resource counts of the data link's device on this
// VM (onPeer false) or on the peer.
func peerRes(t *testing.T, p *testenv.Peer, onPeer bool) map[string]int {
	t.Helper()
	if onPeer {
		r := p.Run(t, "sh", "-c", peerResScript)
		if r.ExitCode != 0 || r.Err != nil {
			t.Fatalf("the peer: rdma res show: exit %d, %v\n%s%s", r.ExitCode, r.Err, r.Stdout, r.Stderr)
		}
		return peerResCounts(t, "the peer", p.Dev, r.Stdout)
	}
	out, err := exec.Command("sh", "-c", peerResScript).CombinedOutput()
	if err != nil {
		t.Fatalf("this VM: rdma res show: %v\n%s", err, out)
	}
	return peerResCounts(t, "this VM", p.LocalDev, string(out))
}

// peerResLimit ends the wait for resources to return to their baseline
// (a hang guard: the kernel frees a dead process's objects as it closes
// its files, and rxevm-peer's kill reaches the peer's process over the
// management link).
const peerResLimit = time.Minute

// peerWaitBaseline waits until the data device's resource counts on one
// VM equal base, failing the test with both when they do not within
// peerResLimit.
func peerWaitBaseline(t *testing.T, p *testenv.Peer, onPeer bool, base map[string]int, when string) {
	t.Helper()
	where := "this VM"
	if onPeer {
		where = "the peer"
	}
	deadline := time.Now().Add(peerResLimit)
	for {
		now := peerRes(t, p, onPeer)
		if fmt.Sprint(now) == fmt.Sprint(base) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: resources %v, want the baseline %v (leaked objects)", where, when, now, base)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// peerServer is a server that runs until stopped.
type peerServer struct {
	stop func() ppResult // ends the server and returns how it ended
}

// peerStartServer starts e as a server with args, waits until it
// listens on port over the rdma_cm, and returns how to stop it.
func peerStartServer(t *testing.T, p *testenv.Peer, e peerEnd, args []string, port int) peerServer {
	t.Helper()
	if e.onPeer {
		pp := peerStart(t, p, e, args)
		peerWaitListening(t, p, listenCM, port, pp)
		return peerServer{stop: func() ppResult {
			pp.Kill()
			r := pp.Wait()
			return ppResult{r.ExitCode, r.Stdout, r.Stderr}
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*peerRunTimeout)
	name := e.tool
	if name == "" {
		name = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, name, args...)
	if e.tool == "" {
		cmd.Env = append(os.Environ(), mainEnv+"=1")
	}
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%v: %v", e, err)
	}
	done := make(chan ppResult, 1)
	go func() {
		code := toolrun.ExitCode(cmd.Wait(), &stderr)
		done <- ppResult{code, stdout.String(), stderr.String()}
	}()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, peerRunTimeout)
	defer wcancel()
	waitListening(t, wctx, listenCM, port, cmd.Process.Pid, done)
	var r ppResult
	return peerServer{stop: func() ppResult {
		cancel()
		r = <-done
		done <- r // for the cleanup
		return r
	}}
}

// TestPeerConnectStorm sets up 500 rdma_cm RC connections at once across
// the two-VM bed and tears them down, cmtime's storm: `purerdma bench
// connect` against itself and against librdmacm's cmtime, with the
// server on the peer and then on this VM. The client reports every
// step for every connection (cmtime's table, bench connect's JSON,
// whose steps each wait for all 500 events and fail on an error event);
// then the client's VM and, once the server is stopped, the server's
// are back to the data device's resource counts (PDs, CQs, QPs, cm_ids,
// MRs, contexts) from before the storm.
func TestPeerConnectStorm(t *testing.T) {
	p := testenv.PeerHost(t)
	cmtime := toolrun.Tool(t, "cmtime")
	toolrun.Tool(t, "rdma")
	for _, serverOnPeer := range []bool{true, false} {
		for _, impl := range []struct{ server, client string }{{"", ""}, {"", cmtime}, {cmtime, ""}} {
			server := peerEnd{onPeer: serverOnPeer, tool: impl.server}
			client := peerEnd{onPeer: !serverOnPeer, tool: impl.client}
			t.Run(fmt.Sprintf("%v-server+%v-client", server, client), func(t *testing.T) {
				port := peerNextPort()
				serverAddr, clientAddr := p.LocalAddr.String(), p.Addr.String()
				if serverOnPeer {
					serverAddr, clientAddr = clientAddr, serverAddr
				}
				baseServer := peerRes(t, p, server.onPeer)
				baseClient := peerRes(t, p, client.onPeer)
				sargs := []string{"-b", serverAddr, "-p", strconv.Itoa(port)}
				cargs := []string{"-s", serverAddr, "-b", clientAddr, "-p", strconv.Itoa(port), "-c", strconv.Itoa(peerStormConns)}
				if server.tool == "" {
					sargs = append([]string{"bench", "connect"}, sargs...)
				}
				if client.tool == "" {
					cargs = append([]string{"bench", "connect"}, append(cargs, "-json", "-t", "30s")...)
				}
				srv := peerStartServer(t, p, server, sargs, port)
				start := time.Now()
				var cr ppResult
				if client.onPeer {
					r := peerStart(t, p, client, cargs).Wait()
					cr = ppResult{r.ExitCode, r.Stdout, r.Stderr}
					if r.Err != nil {
						cr.stderr += "\n" + r.Err.Error()
					}
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), peerRunTimeout)
					_, done := startLocal(t, ctx, client, cargs)
					cr = <-done
					cancel()
				}
				elapsed := time.Since(start)
				if cr.code != 0 {
					sr := srv.stop()
					t.Fatalf("%v client: exit %d\nstdout:\n%s\nstderr:\n%s\n%v server: exit %d\nstdout:\n%s\nstderr:\n%s",
						client, cr.code, cr.stdout, cr.stderr, server, sr.code, sr.stdout, sr.stderr)
				}
				peerCheckStorm(t, client, cr)
				peerWaitBaseline(t, p, client.onPeer, baseClient, "after the client")
				sr := srv.stop()
				if server.tool == "" && strings.Contains(sr.stdout, "connect request:") {
					t.Errorf("%v server failed requests:\n%s", server, sr.stdout)
				}
				peerWaitBaseline(t, p, server.onPeer, baseServer, "after the server")
				t.Logf("%d connections set up and torn down in %v (client process included)", peerStormConns, elapsed.Round(time.Millisecond))
			})
		}
	}
}

// peerCheckStorm checks a storm client's report: bench connect's JSON
// for all connections and every step, cmtime's table with every step
// and nothing on stderr.
func peerCheckStorm(t *testing.T, client peerEnd, cr ppResult) {
	t.Helper()
	if client.tool == "" {
		var res bench.ConnectResult
		if err := json.Unmarshal([]byte(cr.stdout), &res); err != nil {
			t.Fatalf("%v client: stdout is not bench connect's JSON: %v\n%s", client, err, cr.stdout)
		}
		if res.Connections != peerStormConns {
			t.Errorf("%v client: %d connections, want %d", client, res.Connections, peerStormConns)
		}
		var steps []string
		for _, s := range res.Steps {
			steps = append(steps, s.Step)
		}
		if strings.Join(steps, ",") != strings.Join(bench.ConnectSteps(), ",") {
			t.Errorf("%v client: steps %q, want %q", client, steps, bench.ConnectSteps())
		}
		if cr.stderr != "" {
			t.Errorf("%v client stderr %q, want nothing", client, cr.stderr)
		}
		return
	}
	for _, s := range bench.ConnectSteps() {
		if s == "bind addr" {
			continue // cmtime prints it only with -b on the server
		}
		if !strings.Contains(cr.stdout, "\n"+s) {
			t.Errorf("%v client printed no %q row:\n%s", client, s, cr.stdout)
		}
	}
	if cr.stderr != "" || strings.Contains(strings.ToLower(cr.stdout), "error") {
		t.Errorf("%v client reported errors:\nstdout:\n%s\nstderr:\n%s", client, cr.stdout, cr.stderr)
	}
}
