//go:build purerdma_peer

package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/rstream"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/testenv"
)

// peerRstreamRuns are the cross-host rstream runs (-S size, -C
// transfers, -I iterations): below and above rsocket's 2 KiB first
// transfer, its 64 KiB largest one, and past its 1 MiB buffers.
var peerRstreamRuns = [][3]int{{64, 100, 10}, {65536, 16, 2}, {1 << 20, 4, 2}}

// peerRstreamRow returns the time-independent columns (name, bytes,
// transfers, iterations, total) of the one result row in an rstream
// output, or an error naming what is wrong.
func peerRstreamRow(out string) ([]string, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "name ") {
		return nil, fmt.Errorf("want rstream's header and one row, got %d lines", len(lines))
	}
	f := strings.Fields(lines[1])
	if len(f) != 8 {
		return nil, fmt.Errorf("row %q: want 8 columns", lines[1])
	}
	return f[:5], nil
}

// TestPeerRstream runs `purerdma rstream` over rsocket across the two-VM
// bed, against itself and against rdma-core's rstream, with the server
// on the peer and then on this VM, every byte verified (-T v). Both ends
// exit 0 and print the same custom row: the size, transfers, iterations
// and total bytes asked for.
func TestPeerRstream(t *testing.T) {
	p := testenv.PeerHost(t)
	cRstream := toolrun.Tool(t, "rstream")
	toolrun.Tool(t, "rdma")
	for _, serverOnPeer := range []bool{true, false} {
		for _, impl := range []struct{ server, client string }{{"", ""}, {"", cRstream}, {cRstream, ""}} {
			server := peerEnd{onPeer: serverOnPeer, tool: impl.server}
			client := peerEnd{onPeer: !serverOnPeer, tool: impl.client}
			for _, run := range peerRstreamRuns {
				size, count, iters := run[0], run[1], run[2]
				t.Run(fmt.Sprintf("%v-server+%v-client/S%d", server, client, size), func(t *testing.T) {
					port := peerNextPort()
					serverAddr, clientAddr := p.LocalAddr.String(), p.Addr.String()
					if serverOnPeer {
						serverAddr, clientAddr = clientAddr, serverAddr
					}
					common := []string{"-T", "v", "-S", strconv.Itoa(size), "-C", strconv.Itoa(count), "-I", strconv.Itoa(iters), "-p", strconv.Itoa(port)}
					args := func(e peerEnd, a ...string) []string {
						a = append(a, common...)
						if e.tool == "" {
							a = append([]string{"rstream"}, a...)
						}
						return a
					}
					sr, cr := peerPair(t, p, listenCM, server, client, args(server, "-b", serverAddr), args(client, "-s", serverAddr, "-b", clientAddr), port)
					want := []string{"custom", rstream.SizeStr(int64(size)), rstream.CntStr(int64(count)), rstream.CntStr(int64(iters)),
						rstream.SizeStr(int64(size) * int64(count) * int64(iters) * 2)}
					for _, e := range []struct {
						name string
						end  peerEnd
						r    ppResult
					}{{"server", server, sr}, {"client", client, cr}} {
						row, err := peerRstreamRow(e.r.stdout)
						if err != nil {
							t.Errorf("%v %s: %v\n%s", e.end, e.name, err, e.r.stdout)
							continue
						}
						if strings.Join(row, " ") != strings.Join(want, " ") {
							t.Errorf("%v %s row %q, want %q", e.end, e.name, row, want)
						}
						if e.end.tool == "" && e.r.stderr != "" {
							t.Errorf("%v %s stderr %q, want nothing", e.end, e.name, e.r.stderr)
						}
					}
				})
			}
		}
	}
}
