package ping

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The ping tests run servers on device 0's address of the fabric under
// test and clients towards it from device 1's (rxe0 and rxe1, or siw0
// and siw1 with PURERDMA_FABRIC=siw; docs/testing.md): the Go command in
// the test process, or rdma-core's rping.
var (
	rpServerAddr = testenv.Server().String()
	rpClientAddr = testenv.Client().String()
)

const rpRunTimeout = 2 * time.Minute // bounds each run; a hang fails

// qOnIWARP: -q ends with rdma_establish, which iWARP's CM refuses (its QP
// is connected by the kernel); rdma-core's rping -q fails on siw the same
// way ("rdma_establish: Invalid argument").
const qOnIWARP = "-q's rdma_establish is refused by iWARP's CM (rping -q fails on siw too)"

// rpPorts gives each run its own rdma_cm port, so that no run meets
// another's listener.
var rpPorts atomic.Int32

func rpNextPort() int { return 7300 + int(rpPorts.Add(1)) }

// rpEnd is one end of a run: this command (in the test process) or,
// with c, rdma-core's rping.
type rpEnd struct {
	c    bool
	args []string
}

func (e rpEnd) String() string {
	n := "go"
	if e.c {
		n = "rping"
	}
	return n + " " + strings.Join(e.args, " ")
}

// rpStart starts one end under ctx and returns the pid its rdma_cm IDs
// belong to and where its result arrives.
func rpStart(t *testing.T, ctx context.Context, rping string, e rpEnd) (int, <-chan toolrun.Result) {
	t.Helper()
	return toolrun.Start(t, ctx, runContext, "ping", rping, e.c, e.args, e)
}

// rpPair runs a server and then, once it listens, a client, and returns
// both results. The port flag is added to both; the server is ended if
// the client fails; a run that outlives rpRunTimeout fails the test. On
// siw, a run that siw's accept race stranded (toolrun.Watchdog) is
// ended and run again on the next port, up to toolrun.MaxAttempts
// times.
func rpPair(t *testing.T, server, client rpEnd) (sr, cr toolrun.Result) {
	t.Helper()
	toolrun.RunAttempts(t, fmt.Sprintf("%v and %v", server, client), rpRunTimeout, func() (*toolrun.Watchdog, string, string) {
		var dog *toolrun.Watchdog
		sr, cr, dog = rpPairOnce(t, server, client)
		return dog, fmt.Sprintf("server %v: %v\n\nclient %v: %v", server, sr, client, cr), ""
	})
	return sr, cr
}

// rpPairOnce is one attempt of rpPair, on a port of its own.
func rpPairOnce(t *testing.T, server, client rpEnd) (sr, cr toolrun.Result, dog *toolrun.Watchdog) {
	t.Helper()
	rping := ""
	if server.c || client.c {
		rping = toolrun.Tool(t, "rping")
	}
	rdma := toolrun.Tool(t, "rdma")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	port := rpNextPort()
	dog = toolrun.Watch(rpRunTimeout, port, testenv.CurrentFabric().IWARP, cancel)
	defer dog.Stop()
	p := []string{"-p", strconv.Itoa(port)}
	server.args = append(slices.Clone(server.args), p...)
	client.args = append(slices.Clone(client.args), p...)
	pid, sdone := rpStart(t, ctx, rping, server)
	toolrun.WaitListening(t, ctx, cancel, rdma, port, pid, sdone)
	_, cdone := rpStart(t, ctx, rping, client)
	cr = <-cdone
	if cr.Code != 0 {
		cancel() // the server may wait for a client that is gone
	}
	sr = <-sdone
	return sr, cr, dog
}

// rpLines is what -v prints for pings 0 to n-1 of size bytes.
func rpLines(prefix string, n, size int) string {
	var b strings.Builder
	buf := make([]byte, size)
	for i := range n {
		rpingFill(buf, int64(i))
		fmt.Fprintf(&b, "%s%s\n", prefix, cString(buf))
	}
	return b.String()
}

// rpCheck checks a run both ends of which succeeded and printed their
// ping data (-v): the server what it read, the client what came back.
func rpCheck(t *testing.T, server, client rpEnd, sr, cr toolrun.Result, n, size int) {
	t.Helper()
	if sr.Code != 0 || cr.Code != 0 {
		t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
	}
	if diff := cmp.Diff(rpLines("server ping data: ", n, size), sr.Stdout); diff != "" {
		t.Errorf("server %v stdout (-want +got):\n%s", server, diff)
	}
	if diff := cmp.Diff(rpLines("ping data: ", n, size), cr.Stdout); diff != "" {
		t.Errorf("client %v stdout (-want +got):\n%s", client, diff)
	}
	// What the Go command prints on stderr on the way: rping's line
	// for the client's disconnect at the server, nothing at the client.
	if !server.c && sr.Stderr != "server DISCONNECT EVENT...\n" {
		t.Errorf("server %v stderr %q, want only the disconnect line", server, sr.Stderr)
	}
	if !client.c && cr.Stderr != "" {
		t.Errorf("client %v stderr %q, want nothing", client, cr.Stderr)
	}
}

// TestPingInterop runs the Go command against rdma-core's rping both
// ways, with the QP the rdma_cm creates and with -q (a QP the program
// creates and moves itself). A server takes RDMA reads of the client's
// size only into a buffer at least as big, rping's own too (with its
// default -S 64 a -S 100 client fails with a local protection error),
// so both ends get -S 100.
func TestPingInterop(t *testing.T) {
	testenv.NeedFabric(t)
	const n, size = 10, 100
	srv := []string{"-s", "-a", rpServerAddr, "-C", strconv.Itoa(n), "-S", strconv.Itoa(size), "-v"}
	cli := []string{"-c", "-a", rpServerAddr, "-C", strconv.Itoa(n), "-S", strconv.Itoa(size), "-v", "-V"}
	tests := []struct {
		name           string
		server, client rpEnd
	}{
		{"rping-server+go-client", rpEnd{c: true, args: srv}, rpEnd{args: append(slices.Clone(cli), "-I", rpClientAddr)}},
		{"go-server+rping-client", rpEnd{args: srv}, rpEnd{c: true, args: cli}},
		{"rping-server-q+go-client-q", rpEnd{c: true, args: append(slices.Clone(srv), "-q")}, rpEnd{args: append(slices.Clone(cli), "-q", "-I", rpClientAddr)}},
		{"go-server-q+rping-client-q", rpEnd{args: append(slices.Clone(srv), "-q")}, rpEnd{c: true, args: append(slices.Clone(cli), "-q", "-I", rpClientAddr)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "-q") {
				testenv.NotIWARP(t, qOnIWARP)
			}
			start := time.Now()
			sr, cr := rpPair(t, tt.server, tt.client)
			rpCheck(t, tt.server, tt.client, sr, cr, n, size)
			t.Logf("%d pings in %v", n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestPingGo runs the Go command against itself with -V for rping's
// smallest, default and largest sizes and a page, and with -q.
func TestPingGo(t *testing.T) {
	testenv.NeedFabric(t)
	const n = 10
	for _, tt := range []struct {
		size int
		q    bool
	}{{rpingMinSize, false}, {64, false}, {4096, false}, {rpingMaxSize, false}, {64, true}} {
		name := strconv.Itoa(tt.size)
		var q []string
		if tt.q {
			name, q = name+"-q", []string{"-q"}
		}
		t.Run(name, func(t *testing.T) {
			if tt.q {
				testenv.NotIWARP(t, qOnIWARP)
			}
			s := strconv.Itoa(tt.size)
			server := rpEnd{args: append([]string{"-s", "-a", rpServerAddr, "-S", s, "-v"}, q...)}
			client := rpEnd{args: append([]string{"-c", "-a", rpServerAddr, "-I", rpClientAddr, "-C", strconv.Itoa(n), "-S", s, "-v", "-V"}, q...)}
			sr, cr := rpPair(t, server, client)
			rpCheck(t, server, client, sr, cr, n, tt.size)
		})
	}
}

// TestPingPersistent serves three clients at once, two Go and one rping,
// of different sizes, from one -P server, which then ends with its
// context.
func TestPingPersistent(t *testing.T) {
	testenv.Devices(t, 2)
	rping, rdma := toolrun.Tool(t, "rping"), toolrun.Tool(t, "rdma")
	ctx, cancel := context.WithTimeout(context.Background(), rpRunTimeout)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	port := strconv.Itoa(rpNextPort())
	pid, sdone := rpStart(t, sctx, "", rpEnd{args: []string{"-s", "-P", "-a", rpServerAddr, "-p", port, "-S", "4096", "-v"}})
	toolrun.WaitListening(t, ctx, stop, rdma, mustAtoi(t, port), pid, sdone)

	const n = 5
	clients := []struct {
		end  rpEnd
		size int
	}{
		{rpEnd{args: []string{"-S", "64", "-I", rpClientAddr}}, 64},
		{rpEnd{args: []string{"-S", "4096", "-I", rpClientAddr}}, 4096},
		{rpEnd{c: true, args: []string{"-S", "100"}}, 100},
	}
	results := make([]toolrun.Result, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		c.end.args = append(c.end.args, "-c", "-a", rpServerAddr, "-p", port, "-C", strconv.Itoa(n), "-v", "-V")
		_, done := rpStart(t, ctx, rping, c.end)
		wg.Go(func() { results[i] = <-done })
	}
	wg.Wait()
	var want []string
	for i, c := range clients {
		if results[i].Code != 0 {
			t.Errorf("client %v: %v", c.end, results[i])
		}
		if diff := cmp.Diff(rpLines("ping data: ", n, c.size), results[i].Stdout); diff != "" {
			t.Errorf("client %v stdout (-want +got):\n%s", c.end, diff)
		}
		want = append(want, strings.Split(strings.TrimSuffix(rpLines("server ping data: ", n, c.size), "\n"), "\n")...)
	}
	select {
	case r := <-sdone:
		t.Fatalf("the persistent server ended with its clients: %v", r)
	default:
	}
	stop()
	var sr toolrun.Result
	select {
	case sr = <-sdone:
	case <-time.After(30 * time.Second):
		t.Fatal("the persistent server did not end within 30s of its context")
	}
	// The connections print concurrently: compare the lines, sorted.
	got := strings.Split(strings.TrimSuffix(sr.Stdout, "\n"), "\n")
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("server stdout, lines sorted (-want +got):\n%s", diff)
	}
	wantErr := strings.Repeat("server DISCONNECT EVENT...\n", len(clients)) +
		"purerdma: ping: wait for a connection on " + rpServerAddr + ":" + port + ": context canceled\n"
	if sr.Code != 1 || sr.Stderr != wantErr {
		t.Errorf("server after its context ended: exit %d, stderr %q; want 1 and %q", sr.Code, sr.Stderr, wantErr)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPingErrors: what fails does so with status 1 and a message that
// says what happened, in bounded time. (Bad command lines, the size
// below rping's minimum among them, are TestPingBadCommandLines: they
// fail with 2 before any kernel call, in the VM as on the host.)
func TestPingErrors(t *testing.T) {
	testenv.Devices(t, 2)
	t.Run("no server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpRunTimeout)
		defer cancel()
		port := strconv.Itoa(rpNextPort()) // nobody listens there
		var stdout, stderr bytes.Buffer
		// The context only ends a hang: a refusal that waited for it
		// would end with the context's error, not this message.
		code := runContext(ctx, []string{"ping", "-c", "-a", rpServerAddr, "-I", rpClientAddr, "-p", port, "-C", "1"}, &stdout, &stderr)
		dst := rpServerAddr + ":" + port
		// The kernel's words for it: a REJECTED event on RoCE; on iWARP
		// the TCP connect refused inside the CONNECT command.
		want := "^" + regexp.QuoteMeta("purerdma: ping: connect to "+dst+": connection refused, no server listens there: "+
			"rdmacm ConnectContext: connection refused: nothing listens on "+dst+" (REJECTED, reason INVALID_SERVICE_ID)\n") + "$"
		if testenv.CurrentFabric().IWARP {
			want = "^" + regexp.QuoteMeta("purerdma: ping: connect to "+dst+": connection refused, no server listens there: rdmacm Connect (id ") +
				`\d+` + regexp.QuoteMeta("): connection refused: nothing listens on "+dst+" (the TCP connect was refused: iWARP)\n") + "$"
		}
		if code != 1 || stdout.Len() != 0 || !regexp.MustCompile(want).MatchString(stderr.String()) {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing and %s", code, stdout.String(), stderr.String(), want)
		}
	})
	t.Run("server buffer too small", func(t *testing.T) {
		server := rpEnd{args: []string{"-s", "-a", rpServerAddr, "-S", "64"}}
		client := rpEnd{args: []string{"-c", "-a", rpServerAddr, "-I", rpClientAddr, "-C", "3", "-S", "100"}}
		sr, cr := rpPair(t, server, client)
		wantS := "purerdma: ping: the client's buffer has 100 bytes, this server's (-S) 64\n"
		wantC := "client DISCONNECT EVENT...\npurerdma: ping: the server disconnected after 0 of 3 pings\n"
		if sr.Code != 1 || sr.Stderr != wantS {
			t.Errorf("server: %v\nwant exit 1 and stderr %q", sr, wantS)
		}
		if cr.Code != 1 || cr.Stderr != wantC {
			t.Errorf("client: %v\nwant exit 1 and stderr %q", cr, wantC)
		}
	})
	t.Run("data mismatch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpRunTimeout)
		defer cancel()
		port := rpNextPort()
		_, wait := rpFakeServer(t, ctx, port, rpFakeCorrupt)
		var stdout, stderr bytes.Buffer
		code := runContext(ctx, []string{"ping", "-c", "-a", rpServerAddr, "-I", rpClientAddr, "-p", strconv.Itoa(port), "-C", "3", "-V", "-v"}, &stdout, &stderr)
		if err := wait(); err != nil {
			t.Errorf("fake server: %v", err)
		}
		want := "data mismatch!\npurerdma: ping: ping 0: data mismatch: sent \"rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqr\", " +
			"got back \"rdma-Ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqr\"\n"
		if code != 1 || stdout.Len() != 0 || stderr.String() != want {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing and %q", code, stdout.String(), stderr.String(), want)
		}
	})
}

// TestPingCancel: a server waiting for its first client, a persistent
// one, and a client waiting for its server's answer all end when their
// context does.
func TestPingCancel(t *testing.T) {
	testenv.Devices(t, 2)
	rdma := toolrun.Tool(t, "rdma")
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"server", []string{"-s", "-a", rpServerAddr}},
		{"persistent server", []string{"-s", "-P", "-a", rpServerAddr}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), rpRunTimeout)
			defer cancel()
			port := strconv.Itoa(rpNextPort())
			pid, done := rpStart(t, ctx, "", rpEnd{args: append(tt.args, "-p", port)})
			toolrun.WaitListening(t, ctx, cancel, rdma, mustAtoi(t, port), pid, done)
			time.Sleep(200 * time.Millisecond) // into GetRequest's wait
			cancel()
			rpWaitCancelled(t, done, "purerdma: ping: wait for a connection on "+rpServerAddr+":"+port+": context canceled\n")
		})
	}
	t.Run("client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpRunTimeout)
		defer cancel()
		port := rpNextPort()
		sctx, stopServer := context.WithCancel(ctx)
		defer stopServer()
		got, wait := rpFakeServer(t, sctx, port, rpFakeSilent)
		cctx, cancelClient := context.WithCancel(ctx)
		defer cancelClient()
		_, done := rpStart(t, cctx, "", rpEnd{args: []string{"-c", "-a", rpServerAddr, "-I", rpClientAddr, "-p", strconv.Itoa(port)}})
		select {
		case <-got:
		case r := <-done:
			stopServer()
			wait()
			t.Fatalf("the client ended before its first advertisement arrived: %v", r)
		}
		time.Sleep(200 * time.Millisecond) // into the wait for the go-ahead
		cancelClient()
		rpWaitCancelled(t, done, "purerdma: ping: ping 0: context canceled\n")
		if err := wait(); err != nil { // it saw the client's disconnect
			t.Errorf("fake server: %v", err)
		}
	})
}

// rpWaitCancelled checks that a run whose context was just cancelled
// ends at once with status 1 and stderr want.
func rpWaitCancelled(t *testing.T, done <-chan toolrun.Result, want string) {
	t.Helper()
	select {
	case r := <-done:
		if r.Code != 1 || r.Stderr != want {
			t.Errorf("after the cancel: %v\nwant exit 1 and stderr %q", r, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end within 30s of the cancel")
	}
}

type rpFakeMode int

const (
	rpFakeSilent  rpFakeMode = iota // never answers the first advertisement
	rpFakeCorrupt                   // echoes the ping with "ping" changed to "Ping"
)

// rpFakeServer plays rping's server for one connection on rxe0's
// address, with the rdmacm and uverbs API directly, and misbehaves as
// mode says. got is closed when the client's first advertisement has
// arrived; wait returns the server's error once the client
// disconnected.
func rpFakeServer(t *testing.T, ctx context.Context, port int, mode rpFakeMode) (got <-chan struct{}, wait func() error) {
	t.Helper()
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(netip.AddrPortFrom(netip.MustParseAddr(rpServerAddr), uint16(port))); err != nil {
		l.Close()
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		l.Close()
		t.Fatal(err)
	}
	gotc := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer l.Close()
		done <- rpFake(ctx, l, mode, gotc)
	}()
	var once sync.Once
	var werr error
	return gotc, func() error {
		once.Do(func() { werr = <-done })
		return werr
	}
}

func rpFake(ctx context.Context, l *rdmacm.ID, mode rpFakeMode, got chan<- struct{}) (err error) {
	req, err := l.GetRequest(ctx)
	if err != nil {
		return err
	}
	s := req.ID
	defer cli.CloseErr(&err, s.Close)
	cfg := uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: rpingSQDepth, MaxRecvWR: rpingRQDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if _, err := s.CreateQP(nil, cfg); err != nil {
		return err
	}
	const data = 2 * rpingInfoLen // recv, send, then the RDMA buffer
	buf := make([]byte, data+rpingMaxSize)
	mr, err := s.PD().RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	defer cli.CloseErr(&err, mr.Close) // before the ID: on its shared Context
	recv := func() (rpingInfo, error) {
		wc, err := s.GetRecvComp(ctx)
		if err != nil {
			return rpingInfo{}, err
		}
		info, err := parseRPingInfo(buf[:wc.ByteLen])
		if err == nil {
			err = s.PostRecv(1, mr, 0, rpingInfoLen)
		}
		return info, err
	}
	sendWait := func(post func() error) error {
		if err := post(); err != nil {
			return err
		}
		_, err := s.GetSendComp(ctx)
		return err
	}
	goAhead := func() error { return s.PostSend(2, mr, rpingInfoLen, rpingInfoLen, uverbs.SendSignaled) }
	if err := s.PostRecv(1, mr, 0, rpingInfoLen); err != nil {
		return err
	}
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		return err
	}
	src, err := recv()
	if err != nil {
		return err
	}
	close(got)
	if mode == rpFakeCorrupt {
		n := int(src.Size)
		if err := sendWait(func() error {
			return s.PostRead(3, mr, data, n, uverbs.SendSignaled, rdmacm.Remote{Addr: src.Addr, RKey: src.RKey})
		}); err != nil {
			return err
		}
		if err := sendWait(goAhead); err != nil {
			return err
		}
		sink, err := recv()
		if err != nil {
			return err
		}
		buf[data+5] = 'P' // rdma-ping-0 -> rdma-Ping-0
		if err := sendWait(func() error {
			return s.PostWrite(4, mr, data, n, uverbs.SendSignaled, rdmacm.Remote{Addr: sink.Addr, RKey: sink.RKey})
		}); err != nil {
			return err
		}
		if err := sendWait(goAhead); err != nil {
			return err
		}
	}
	ev, err := s.Channel().Next(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the client's disconnect: %w", err)
	}
	if ev.Type != rdmacm.EventDisconnected {
		return fmt.Errorf("%v, want DISCONNECTED", ev)
	}
	return s.Disconnect()
}

// TestPingJSON runs a Go server and client with -json and checks that
// each prints one JSON summary with the run's values (and the Go client
// against rping's server, where the Go end is the only one with -json).
func TestPingJSON(t *testing.T) {
	testenv.Devices(t, 2)
	const n, size = 20, 100
	checkSummary := func(t *testing.T, who string, r toolrun.Result, role string, validated bool) rpSummaryJSON {
		t.Helper()
		var s rpSummaryJSON
		if err := toolrun.DecodeOneJSON(r.Stdout, &s); err != nil {
			t.Fatalf("%s stdout is not one JSON summary: %v\n%s", who, err, r.Stdout)
		}
		ap, err := netip.ParseAddrPort(s.Server)
		if err != nil || ap.Addr().String() != rpServerAddr || ap.Port() == 0 {
			t.Errorf("%s: server %q, want %s:PORT", who, s.Server, rpServerAddr)
		}
		want := rpSummaryJSON{Role: role, Server: s.Server, Size: size, Pings: n, Validated: validated,
			Seconds: s.Seconds, USecPing: s.USecPing}
		if diff := cmp.Diff(want, s); diff != "" {
			t.Errorf("%s summary (-want +got):\n%s", who, diff)
		}
		if s.Seconds <= 0 {
			t.Errorf("%s: seconds %v, want > 0", who, s.Seconds)
		}
		// usec_per_ping is seconds over pings, up to rounding.
		if per := s.Seconds * 1e6 / n; s.USecPing <= 0 || math.Abs(per-s.USecPing) > 1e-6*per+1e-3 {
			t.Errorf("%s: usec_per_ping %v, want seconds*1e6/pings = %v", who, s.USecPing, per)
		}
		return s
	}
	t.Run("go-server+go-client", func(t *testing.T) {
		server := rpEnd{args: []string{"-s", "-a", rpServerAddr, "-S", strconv.Itoa(size), "-json"}}
		client := rpEnd{args: []string{"-c", "-a", rpServerAddr, "-I", rpClientAddr, "-C", strconv.Itoa(n), "-S", strconv.Itoa(size), "-V", "-json"}}
		sr, cr := rpPair(t, server, client)
		if sr.Code != 0 || cr.Code != 0 {
			t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
		}
		ss := checkSummary(t, "server", sr, "server", false)
		cs := checkSummary(t, "client", cr, "client", true)
		if ss.Server != cs.Server {
			t.Errorf("the server's summary names %s, the client's %s", ss.Server, cs.Server)
		}
		if sr.Stderr != "server DISCONNECT EVENT...\n" || cr.Stderr != "" {
			t.Errorf("stderr: server %q, client %q; want the disconnect line and nothing", sr.Stderr, cr.Stderr)
		}
	})
	t.Run("rping-server+go-client", func(t *testing.T) {
		server := rpEnd{c: true, args: []string{"-s", "-a", rpServerAddr, "-S", strconv.Itoa(size)}}
		client := rpEnd{args: []string{"-c", "-a", rpServerAddr, "-I", rpClientAddr, "-C", strconv.Itoa(n), "-S", strconv.Itoa(size), "-V", "--json"}}
		sr, cr := rpPair(t, server, client)
		if sr.Code != 0 || cr.Code != 0 {
			t.Fatalf("server %v: %v\n\nclient %v: %v", server, sr, client, cr)
		}
		checkSummary(t, "client", cr, "client", true)
	})
}
