package examples_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/examplerun"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The current fabric's two devices' addresses (testenv.CurrentFabric:
// rxe unless PURERDMA_FABRIC=siw): servers and senders on the first
// device, clients and receivers on the second, so every byte crosses the
// veth pair.
var (
	serverIP = testenv.Server().String()
	clientIP = testenv.Client().String()
	absentIP = absentAddr().String() // on no interface: binding to it fails
)

// absentAddr is .99 of the fabric's /24, which no interface has.
func absentAddr() netip.Addr {
	a := testenv.Server().As4()
	a[3] = 99
	return netip.AddrFrom4(a)
}

// The examples that use UD, multicast or InfiniBand's path migration,
// which iWARP has not: their tests skip on siw with these reasons.
const (
	udMulticast = "mckey and mc send UD datagrams to a multicast group"
	pathMig     = "apm loads an alternate path and migrates (InfiniBand path migration; iWARP has RC QPs connected by TCP only)"
)

var (
	nextPort  atomic.Int32
	nextGroup atomic.Int32
)

func init() {
	nextPort.Store(51300)
	nextGroup.Store(10)
}

func port() string  { return strconv.Itoa(int(nextPort.Add(1))) }
func group() string { return fmt.Sprintf("239.1.2.%d", nextGroup.Add(1)) }

// impl is one implementation of a side: the Go port, the C listing, or
// rdma-core's mckey (/usr/bin/mckey, Debian's rdmacm-utils).
type impl string

const (
	goImpl     impl = "Go"
	cImpl      impl = "C"
	rdmacoreMC impl = "rdma-core"
)

// program is the path of impl's example and whether it is C.
func program(t *testing.T, i impl, example string) (string, bool) {
	t.Helper()
	switch i {
	case cImpl:
		// Each listing's own build command: 7.4's has flags, chapter 8's none.
		var flags []string
		if example == "mckey" {
			flags = []string{"-g", "-Wall", "-D_GNU_SOURCE", "-O2"}
		}
		return examplerun.CBinary(t, example+"/testdata/"+example+".c", flags, "-libverbs", "-lrdmacm"), true
	case rdmacoreMC:
		return "/usr/bin/mckey", true
	}
	return examplerun.GoBinary(t, example), false
}

func run(t *testing.T, ctx context.Context, name string, i impl, example string, args ...string) *examplerun.Proc {
	t.Helper()
	path, c := program(t, i, example)
	return examplerun.Start(t, ctx, name+" ("+string(i)+")", path, example, c, args...)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sendUntil runs the sender once, or, for a C sender, again every 2 s
// until the receiver is done: the listing's sender and rdma-core's post
// their datagrams unsignaled and destroy the QP at once, which can drop
// datagrams the device has not sent yet (the Go port waits for its last
// one). How many runs it takes does not matter; a receiver that is not
// done when the test's context ends fails the test. Each run's output
// is checked with want.
func sendUntil(t *testing.T, ctx context.Context, recv *examplerun.Proc, i impl, example string, want []string, args ...string) {
	t.Helper()
	for n := 1; ; n++ {
		s := run(t, ctx, fmt.Sprintf("sender #%d", n), i, example, args...)
		s.Expect(t, 0, want)
		if i == goImpl || t.Failed() {
			return
		}
		select {
		case <-recv.Exited():
			return
		case <-ctx.Done():
			t.Errorf("the receiver did not get its datagrams from %d runs of the %s sender: %v", n, i, ctx.Err())
			return
		case <-time.After(2 * time.Second):
		}
		t.Logf("%s sender run %d: the receiver waits for more datagrams; sending again", i, n)
	}
}

func mckeyLines(sender bool, grp string, i impl) []string {
	joined := "mckey: joined dgid: ::ffff:" + grp
	if i == rdmacoreMC {
		joined = `~mckey: joined dgid: ::ffff:` + strings.ReplaceAll(grp, ".", `\.`) + ` mlid 0x[0-9a-f]+ sl \d+`
	}
	who, what := "server", "receiving data transfers"
	if sender {
		who, what = "client", "initiating data transfers"
	}
	return []string{"mckey: starting " + who, "mckey: joining", joined, what, "data transfers complete",
		"test complete", "return status 0"}
}

type pairing struct{ receiver, sender impl }

func (p pairing) String() string { return "recv=" + string(p.receiver) + ",send=" + string(p.sender) }

// TestMckey runs the manual's mckey (7.4): a receiver on rxe1 joins a
// group and waits for 10 datagrams of 100 bytes, which a sender on rxe0
// sends; Go and C, and rdma-core's mckey, each way. rxe only.
func TestMckey(t *testing.T) {
	testenv.NotIWARP(t, udMulticast)
	testenv.NeedFabric(t)
	for _, p := range []pairing{{goImpl, goImpl}, {cImpl, goImpl}, {goImpl, cImpl}, {rdmacoreMC, goImpl}, {goImpl, rdmacoreMC}} {
		t.Run(p.String(), func(t *testing.T) {
			ctx := testContext(t)
			grp := group()
			recv := run(t, ctx, "receiver", p.receiver, "mckey", "-m", grp, "-b", clientIP)
			recv.WaitFor(t, "mckey: joined dgid")
			sendUntil(t, ctx, recv, p.sender, "mckey", mckeyLines(true, grp, p.sender), "-s", "-m", grp, "-b", serverIP)
			recv.Expect(t, 0, mckeyLines(false, grp, p.receiver))
		})
	}
}

// TestMC runs the manual's mc (8.2): a receiver on rxe1 waits for 4
// datagrams of 64 bytes that a sender on rxe0 sends to the group, in Go
// and C each way, and with rdma-core's mckey (-S 64 -C 4) each way.
// rxe only.
func TestMC(t *testing.T) {
	testenv.NotIWARP(t, udMulticast)
	testenv.NeedFabric(t)
	for _, p := range []pairing{{goImpl, goImpl}, {cImpl, goImpl}, {goImpl, cImpl}, {rdmacoreMC, goImpl}, {goImpl, rdmacoreMC}} {
		t.Run(p.String(), func(t *testing.T) {
			ctx := testContext(t)
			grp := group()
			joined := `~joined dgid: ::ffff:` + strings.ReplaceAll(grp, ".", `\.`) + `, mlid 0x[0-9a-f]+, sl \d+`
			// The listing's receiver has a CQ of 2 for its 4 receives, and
			// loses a datagram when 3 arrive before it polls (seen on
			// Linux 6.1): with it, each side sends and receives 2.
			var count []string
			n := 4
			if p.receiver == cImpl {
				count, n = []string{"-c", "2"}, 2
			}
			var sent, received []string
			for i := 1; i <= n; i++ {
				sent = append(sent, fmt.Sprintf("sent message %d", i))
				received = append(received, fmt.Sprintf("received message %d", i))
			}
			var recv *examplerun.Proc
			if p.receiver == rdmacoreMC {
				recv = run(t, ctx, "receiver", p.receiver, "mckey", "-m", grp, "-b", clientIP, "-S", "64", "-C", "4")
				recv.WaitFor(t, "mckey: joined dgid")
			} else {
				recv = run(t, ctx, "receiver", p.receiver, "mc", append([]string{"-m", grp, "-b", clientIP}, count...)...)
				recv.WaitFor(t, "waiting for messages...")
			}
			if p.sender == rdmacoreMC {
				sendUntil(t, ctx, recv, p.sender, "mckey", mckeyLines(true, grp, p.sender), "-s", "-m", grp, "-b", serverIP, "-S", "64", "-C", "4")
			} else {
				sendUntil(t, ctx, recv, p.sender, "mc", append([]string{joined}, sent...),
					append([]string{"-s", "-m", grp, "-b", serverIP}, count...)...)
			}
			if p.receiver == rdmacoreMC {
				recv.Expect(t, 0, mckeyLines(false, grp, p.receiver))
			} else {
				recv.Expect(t, 0, append([]string{joined, "waiting for messages..."}, received...))
			}
		})
	}
}

type serverClient struct{ server, client impl }

func (p serverClient) String() string { return string(p.server) + "-" + string(p.client) }

var crossPairs = []serverClient{{goImpl, goImpl}, {cImpl, goImpl}, {goImpl, cImpl}}

// TestSRQ runs the manual's srq (8.3) with its defaults: the client
// sends 100 messages of 100000 bytes over 4 connections, 64 at a time,
// to the server's SRQ on the fabric's first device, which answers each
// batch; in Go and C each way, on rxe and siw.
//
// The sides are not ordered beyond the server listening first: on siw
// the client's first message on a connection can be sent before the
// server's accept of it has returned, and then stays unread until more
// data comes on that connection (docs/providers.md, siw). The client
// sends its messages round the 4 connections without waiting for the
// server, 64 before it waits for the first answer, so each connection's
// second message frees its first; the server sends only after 64
// messages have arrived, after every connect has returned.
func TestSRQ(t *testing.T) {
	testenv.NeedFabric(t)
	for _, p := range crossPairs {
		t.Run(p.String(), func(t *testing.T) {
			ctx := testContext(t)
			pt := port()
			srv := run(t, ctx, "server", p.server, "srq", "-s", "-a", serverIP, "-p", pt)
			srv.WaitFor(t, "waiting for connection from client...")
			cli := run(t, ctx, "client", p.client, "srq", "-a", serverIP, "-p", pt)
			var want []string
			for i := 1; i <= 100; i++ {
				want = append(want, fmt.Sprintf(`~send count: %d, qp_num: \d+`, i))
				if i == 64 || i == 100 {
					want = append(want, fmt.Sprintf("recv count: %d", (i+63)/64))
				}
			}
			cli.Expect(t, 0, want)
			want = []string{"waiting for connection from client..."}
			for i := 1; i <= 100; i++ {
				want = append(want, fmt.Sprintf(`~recv count: %d, qp_num: \d+`, i))
				if i == 64 || i == 100 {
					want = append(want, fmt.Sprintf("send count: %d", (i+63)/64))
				}
			}
			srv.Expect(t, 0, want)
			// Each side's sends went round its 4 QPs, and the server saw
			// them arrive on 4 QPs.
			for _, x := range []struct {
				p    *examplerun.Proc
				line string
			}{{cli, "send count"}, {srv, "recv count"}} {
				qps := map[string]int{}
				for _, l := range strings.Split(x.p.Stdout(), "\n") {
					if _, q, ok := strings.Cut(l, "qp_num: "); ok && strings.HasPrefix(l, x.line) {
						qps[q]++
					}
				}
				if len(qps) != 4 {
					t.Errorf("%s: %s lines name %d QPs, want 4: %v", x.p.Name, x.line, len(qps), qps)
				}
			}
		})
	}
}

func apmConfig(server bool, port string) []string {
	mode, addr := "client", serverIP
	if server {
		mode, addr = "server", "NULL"
	}
	return []string{"mode:      " + mode, "address:   " + addr, "port:      " + port, "count:     100",
		"length:    1000000", "alt_dlid:  0", "alt_port:  0", "mig_after: -1", "msec_wait: 500", ""}
}

// TestAPM runs the manual's apm (8.1) as far as soft-RoCE goes: both
// sides connect and load the alternate path, which the kernel refuses on
// RoCE (EINVAL), and both stop there with the C program's messages and
// exit status 22; the Go port also says what was refused. In Go and C
// each way. rxe only.
func TestAPM(t *testing.T) {
	testenv.NotIWARP(t, pathMig)
	testenv.NeedFabric(t)
	for _, p := range crossPairs {
		t.Run(p.String(), func(t *testing.T) {
			ctx := testContext(t)
			pt := port()
			srv := run(t, ctx, "server", p.server, "apm", "-s", "-p", pt)
			srv.WaitFor(t, "rdma_get_request")
			cli := run(t, ctx, "client", p.client, "apm", "-a", serverIP, "-p", pt)
			loading := "loading alt path - local port: 1, dlid: 0"
			cli.Expect(t, 22, append(apmConfig(false, pt), "rdma_getaddrinfo", "rdma_create_ep", "rdma_connect", loading))
			srv.Expect(t, 22, append(apmConfig(true, pt), "rdma_getaddrinfo", "rdma_create_ep", "rdma_listen", "rdma_get_request", "rdma_accept", loading))
			for _, x := range []struct {
				p *examplerun.Proc
				i impl
			}{{cli, p.client}, {srv, p.server}} {
				want := []string{"ibv_modify_qp returned 22 errno 22"}
				if x.i == goImpl {
					want = append(want, `~apm: rxe\d port 1 refused the alternate path \(IBV_QP_ALT_PATH \| IBV_QP_PATH_MIG_STATE: .*\): `+
						`Linux loads alternate paths \(and migrates\) on InfiniBand ports only, not on RoCE, soft-RoCE included`)
				}
				if err := examplerun.MatchLines(x.p.Stderr(), want); err != nil {
					t.Errorf("%s: stderr: %v\n%s", x.p.Name, err, x.p.Stderr())
				}
			}
		})
	}
}

// TestErrors: bad command lines and peers that are not there give the
// C program's messages (the same bytes on stdout and stderr; the Go apm
// may add a line on stderr after C's, saying what the device refused)
// and exit status. On siw all but apm's connect to a port nobody
// listens on run: the others end at the command line, at binding to an
// absent address or at srq's refused connect.
func TestErrors(t *testing.T) {
	testenv.NeedFabric(t)
	free := port() // nothing listens there
	for _, c := range []struct {
		example string
		args    []string
		status  int
	}{
		{"mckey", []string{"-x"}, 1},
		{"mckey", []string{"-s", "-m"}, 1},
		{"mckey", []string{"-m", "239.1.2.200", "-b", absentIP}, 255},
		{"mc", []string{"-x"}, 1},
		{"mc", []string{"-h"}, 1},
		{"mc", []string{"-s"}, 1},
		{"mc", []string{"-m", "239.1.2.201", "-b", absentIP}, 255},
		{"srq", []string{"-q"}, 1},
		{"srq", []string{"-s"}, 1},
		{"srq", []string{"-a", serverIP, "-p", free}, 255},
		{"apm", []string{"-x"}, 1},
		{"apm", nil, 1},
		{"apm", []string{"-s", "-d", "3"}, 1},
		{"apm", []string{"-s", "-c", "5", "-m", "9"}, 1},
		{"apm", []string{"-a", serverIP, "-p", free}, 22},
	} {
		t.Run(c.example+fmt.Sprint(c.args), func(t *testing.T) {
			if c.example == "apm" && c.status == 22 {
				testenv.NotIWARP(t, pathMig)
			}
			ctx := testContext(t)
			var outs [2]*examplerun.Proc
			for i, im := range []impl{cImpl, goImpl} {
				path, _ := program(t, im, c.example)
				outs[i] = examplerun.Start(t, ctx, string(im), path, c.example, false, c.args...)
			}
			cs, gs := outs[0].Wait(t), outs[1].Wait(t)
			if cs != c.status || gs != cs {
				t.Errorf("exit status: C %d, Go %d; want %d", cs, gs, c.status)
			}
			if co, gout := outs[0].Stdout(), outs[1].Stdout(); co != gout {
				t.Errorf("stdout differs:\nC:\n%s\nGo:\n%s", co, gout)
			}
			if ce, ge := outs[0].Stderr(), outs[1].Stderr(); ce != ge && !(c.example == "apm" && strings.HasPrefix(ge, ce) && strings.HasPrefix(ge[len(ce):], "apm: ")) {
				t.Errorf("stderr differs:\nC:\n%s\nGo:\n%s", ce, ge)
			}
			if outs[1].Stdout()+outs[1].Stderr() == "" {
				t.Error("Go printed nothing")
			}
		})
	}
}

// TestAPMWait: -w, which the listing's usage offers and its getopt
// string lacks, is taken by the Go port (see its package doc).
func TestAPMWait(t *testing.T) {
	testenv.NotIWARP(t, pathMig)
	testenv.NeedFabric(t)
	ctx := testContext(t)
	p := run(t, ctx, "apm", goImpl, "apm", "-w", "7")
	want := apmConfig(false, "51216")
	want[1], want[8] = "address:   NULL", "msec_wait: 7"
	p.Expect(t, 1, append(want, "server address must be specified for client mode"))
}

// TestAPMLibrary checks, as far as soft-RoCE goes, the library calls apm
// makes on a connected RC QP: the path migration state reads back
// (MIGRATED, the state of a QP that never had an alternate path), the
// manual migration of apm's -m (PATH_MIG_STATE = MIGRATED alone, legal
// in RTS) is accepted, and loading an alternate path is refused with
// EINVAL, leaving the state as it was. Migration itself, and the
// PATH_MIG and PATH_MIG_ERR events, need InfiniBand with two paths.
// rxe only.
func TestAPMLibrary(t *testing.T) {
	testenv.NotIWARP(t, pathMig)
	testenv.NeedFabric(t)
	ctx := testContext(t)
	cfg := uverbs.QPConfig{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	pt, _ := strconv.Atoi(port())
	ln, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := ln.Bind(netip.AddrPortFrom(netip.MustParseAddr(serverIP), uint16(pt))); err != nil {
		t.Fatal(err)
	}
	if err := ln.Listen(1); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		ev, err := ln.GetRequest(ctx)
		if err == nil {
			t.Cleanup(func() { ev.ID.Close() })
			if _, err = ev.ID.CreateQP(nil, cfg); err == nil {
				_, err = ev.ID.AcceptContext(ctx, nil)
			}
		}
		accepted <- err
	}()
	c, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Resolve(ctx, netip.AddrPortFrom(netip.MustParseAddr(clientIP), 0), netip.AddrPortFrom(netip.MustParseAddr(serverIP), uint16(pt))); err != nil {
		t.Fatal(err)
	}
	qp, err := c.CreateQP(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}

	const mask = uverbs.QPAttrState | uverbs.QPAttrPathMigState | uverbs.QPAttrAV | uverbs.QPAttrPort |
		uverbs.QPAttrTimeout | uverbs.QPAttrPKeyIndex | uverbs.QPAttrAltPath
	attr, err := qp.Query(mask)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != uverbs.QPStateRTS || attr.PathMigState != uverbs.MigMigrated {
		t.Errorf("connected QP: state %v, path migration state %v; want RTS, MIGRATED", attr.State, attr.PathMigState)
	}
	if err := qp.Modify(&uverbs.QPAttr{PathMigState: uverbs.MigMigrated}, uverbs.QPAttrPathMigState); err != nil {
		t.Errorf("PATH_MIG_STATE = MIGRATED in RTS (apm -m): %v", err)
	}
	alt := attr
	alt.AltAHAttr, alt.AltPortNum, alt.AltPKeyIndex, alt.AltTimeout = attr.AHAttr, attr.PortNum, attr.PKeyIndex, attr.Timeout
	alt.PathMigState = uverbs.MigRearm
	if err := qp.Modify(&alt, uverbs.QPAttrAltPath|uverbs.QPAttrPathMigState); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("loading an alternate path on RoCE: %v, want EINVAL", err)
	}
	if after, err := qp.Query(mask); err != nil || after.PathMigState != uverbs.MigMigrated || after.State != uverbs.QPStateRTS {
		t.Errorf("after the refused alternate path: state %v, path migration state %v, %v; want RTS, MIGRATED", after.State, after.PathMigState, err)
	}
}
