package examples_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/examplerun"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The VM's two soft-RoCE devices and their addresses: the server runs
// on rxe0, the client on rxe1, so every byte crosses the veth pair.
const (
	serverDev, serverIP = "rxe0", "198.18.0.1"
	clientDev, clientIP = "rxe1", "198.18.0.2"
)

const rcListing = "rc-example/testdata/RDMA_RC_example.c"

var nextPort atomic.Int32

func init() { nextPort.Store(19875) }

// impl is one implementation of a side: the Go port or the C listing.
type impl string

const (
	goImpl impl = "Go"
	cImpl  impl = "C"
)

// rcProgram is the path of impl's rc-example and whether it is C.
func rcProgram(t *testing.T, i impl) (string, bool) {
	if i == cImpl {
		return examplerun.CBinary(t, rcListing, []string{"-Wall", "-O2"}, "-libverbs"), true // the listing's BUILD COMMAND
	}
	return examplerun.GoBinary(t, "rc-example"), false
}

// gidIndex is the index of ip's RoCE v2 GID on dev's port 1: what the
// example's -g takes on RoCE.
func gidIndex(t *testing.T, dev, ip string) string {
	t.Helper()
	c, err := uverbs.Open(dev, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	i, err := c.RoCEv2GIDIndex(1, netip.MustParseAddr(ip))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s's RoCE v2 GID is at index %d", dev, ip, i)
	return strconv.Itoa(i)
}

// gidString is how the example prints the GID of an IPv4 address.
func gidString(ip string) string {
	g := netip.MustParseAddr("::ffff:" + ip).As16()
	s := ""
	for i, b := range g {
		if i > 0 {
			s += ":"
		}
		s += fmt.Sprintf("%02x", b)
	}
	return s
}

func rcConfigLines(dev, gid string, port int, server string) []string {
	l := []string{
		" ------------------------------------------------",
		` Device name      : "` + dev + `"`,
		" IB port          : 1",
	}
	if server != "" {
		l = append(l, " IP              : "+server)
	}
	return append(l, fmt.Sprintf(" TCP port        : %d", port), " GID index       : "+gid,
		" ------------------------------------------------")
}

func rcConnectLines(peerIP string) []string {
	return []string{
		"~MR was registered with addr=0x[0-9a-f]+, lkey=0x[0-9a-f]+, rkey=0x[0-9a-f]+, flags=0x7",
		"~QP was created, QP number=0x[0-9a-f]+",
		"",
		"Local LID      = 0x0",
		"~Remote address = 0x[0-9a-f]+",
		"~Remote rkey = 0x[0-9a-f]+",
		"~Remote QP number = 0x[0-9a-f]+",
		"Remote LID = 0x0",
		"Remote GID =" + gidString(peerIP),
	}
}

// TestRCExample runs the manual's RC example (7.2) with the server on
// rxe0 and the client on rxe1, in Go and C both ways: each side's
// output line by line, and what each printed of the other (address,
// rkey, QP number, GID) against what the other printed of itself, which
// checks the cm_con_data_t both wrote and read.
func TestRCExample(t *testing.T) {
	testenv.Devices(t, 2)
	gid0, gid1 := gidIndex(t, serverDev, serverIP), gidIndex(t, clientDev, clientIP)
	for _, p := range []struct{ server, client impl }{{goImpl, goImpl}, {cImpl, goImpl}, {goImpl, cImpl}, {cImpl, cImpl}} {
		t.Run(string(p.server)+"-"+string(p.client), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			port := int(nextPort.Add(1))
			sp, sc := rcProgram(t, p.server)
			cp, cc := rcProgram(t, p.client)
			srv := examplerun.Start(t, ctx, "server", sp, "rc-example", sc, "-d", serverDev, "-g", gid0, "-p", strconv.Itoa(port))
			waitListening(t, srv, port)
			cli := examplerun.Start(t, ctx, "client", cp, "rc-example", cc, "-d", clientDev, "-g", gid1, "-p", strconv.Itoa(port), serverIP)

			written := "Contents of server buffer: 'RDMA write opera'"
			if p.server == cImpl {
				// The listing's strcpy of RDMAMSGR overran the 16 bytes;
				// %s prints the client's 16 bytes and then that tail.
				written = "~Contents of server buffer: 'RDMA write opera[^']*'"
			}
			want := append(rcConfigLines(serverDev, gid0, port, ""),
				fmt.Sprintf("waiting on port %d for TCP connection", port),
				"TCP connection was established",
				"searching for IB devices in host",
				`~found \d+ device\(s\)`,
				`going to send the message: "SEND operation "`)
			want = append(want, rcConnectLines(clientIP)...)
			want = append(want,
				"QP state was change to RTS",
				"Send Request was posted",
				"completion was found in CQ with status 0x0",
				written,
				"",
				"test result is 0")
			srv.Expect(t, 0, want)

			read, replacing := "Contents of server's buffer: 'RDMA read operat'", "Now replacing it with: 'RDMA write opera'"
			if p.client == cImpl {
				// C prints its 16 bytes and whatever follows them, and
				// the whole 20-character string it copied.
				read, replacing = "~Contents of server's buffer: 'RDMA read operat[^']*'", "Now replacing it with: 'RDMA write operation'"
			}
			want = append(rcConfigLines(clientDev, gid1, port, serverIP),
				"TCP connection was established",
				"searching for IB devices in host",
				`~found \d+ device\(s\)`)
			want = append(want, rcConnectLines(serverIP)...)
			want = append(want,
				"Receive Request was posted",
				"QP state was change to RTS",
				"completion was found in CQ with status 0x0",
				"Message is: 'SEND operation '",
				"RDMA Read Request was posted",
				"completion was found in CQ with status 0x0",
				read,
				replacing,
				"RDMA Write Request was posted",
				"completion was found in CQ with status 0x0",
				"",
				"test result is 0")
			cli.Expect(t, 0, want)

			for _, x := range []struct{ a, b *examplerun.Proc }{{srv, cli}, {cli, srv}} {
				for _, f := range []struct{ remote, local string }{
					{`Remote address = (0x[0-9a-f]+)`, `MR was registered with addr=(0x[0-9a-f]+)`},
					{`Remote rkey = (0x[0-9a-f]+)`, `rkey=(0x[0-9a-f]+), flags`},
					{`Remote QP number = (0x[0-9a-f]+)`, `QP number=(0x[0-9a-f]+)`},
				} {
					if r, l := x.a.Field(f.remote), x.b.Field(f.local); r != l || r == "" {
						t.Errorf("%s printed %q of its peer, the %s printed %q (%s)", x.a.Name, r, x.b.Name, l, f.local)
					}
				}
			}
		})
	}
}

// TestRCExampleErrors: bad command lines and a server that is not there
// give the C program's messages (stdout and stderr, the same bytes) and
// exit status.
func TestRCExampleErrors(t *testing.T) {
	testenv.Devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(int(nextPort.Add(1))) // nothing listens there
	for _, args := range [][]string{
		{"-x"},
		{"-p"},
		{"--ib", "rxe0"},
		{"--bogus"},
		{"-i", "-1"},
		{"-g", "-1"},
		{"host1", "host2"},
		{"-d", clientDev, "-p", port, serverIP}, // nothing listens: connection refused
		{"-d", "nosuchdev", "--port=" + port, serverIP}, // the TCP failure comes first
	} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			var outs [2]*examplerun.Proc
			for i, im := range []impl{cImpl, goImpl} {
				path, _ := rcProgram(t, im)
				outs[i] = examplerun.Start(t, ctx, string(im), path, "rc-example", false, args...)
			}
			cs, gs := outs[0].Wait(t), outs[1].Wait(t)
			if cs != 1 || gs != cs {
				t.Errorf("exit status: C %d, Go %d; want 1", cs, gs)
			}
			for _, s := range []struct {
				name   string
				c, gos string
			}{{"stdout", outs[0].Stdout(), outs[1].Stdout()}, {"stderr", outs[0].Stderr(), outs[1].Stderr()}} {
				if s.c != s.gos {
					t.Errorf("%s differs:\nC:\n%s\nGo:\n%s", s.name, s.c, s.gos)
				}
			}
			if regexp.MustCompile(`test result|Usage`).FindString(outs[1].Stdout()) == "" {
				t.Errorf("Go printed neither its usage nor a result:\n%s", outs[1].Stdout())
			}
		})
	}
}
