package pingpong

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/uverbs"
)

func mustGID(t testing.TB, s string) uverbs.GID {
	t.Helper()
	g, err := uverbs.ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The bytes ibv_rc_pingpong sends for an address, with its NUL: what
// sprintf("%04x:%06x:%06x:%s") and gid_to_wire_gid produce.
const ppWireRxe0 = "0000:000011:2aa1cd:00000000000000000000ffffc6120001\x00"

func TestPPDestMarshal(t *testing.T) {
	tests := []struct {
		d    ppDest
		want string
	}{
		{ppDest{QPN: 0x11, PSN: 0x2aa1cd, GID: mustGID(t, "::ffff:198.18.0.1")}, ppWireRxe0},
		{ppDest{}, "0000:000000:000000:00000000000000000000000000000000\x00"},
		{ppDest{LID: 0xffff, QPN: 0xffffff, PSN: 0xffffff, GID: mustGID(t, "fe80::5054:ff:fe12:3456")},
			"ffff:ffffff:ffffff:fe80000000000000505400fffe123456\x00"},
	}
	for _, tt := range tests {
		got, err := tt.d.marshal()
		if err != nil {
			t.Errorf("%+v: %v", tt.d, err)
			continue
		}
		if diff := cmp.Diff(tt.want, string(got[:])); diff != "" {
			t.Errorf("marshal(%+v) (-want +got):\n%s", tt.d, diff)
		}
	}
	for _, d := range []ppDest{{QPN: 1 << 24}, {PSN: 1 << 24}} {
		if _, err := d.marshal(); err == nil {
			t.Errorf("marshal(%+v) = nil error, want one for a field wider than 24 bits", d)
		}
	}
}

func TestParsePPDest(t *testing.T) {
	rxe0 := ppDest{QPN: 0x11, PSN: 0x2aa1cd, GID: mustGID(t, "::ffff:198.18.0.1")}
	tests := []struct {
		name    string
		msg     string
		want    ppDest
		wantErr string
	}{
		{"C message", ppWireRxe0, rxe0, ""},
		{"no NUL", strings.TrimSuffix(ppWireRxe0, "\x00"), rxe0, ""},
		{"garbage after NUL", strings.TrimSuffix(ppWireRxe0, "\x00") + "\x00zz:zz", rxe0, ""},
		{"upper case", "0000:000011:2AA1CD:00000000000000000000FFFFC6120001\x00", rxe0, ""},
		{"short hex fields", "0:11:2aa1cd:00000000000000000000ffffc6120001", rxe0, ""},
		{"all zero (srq padding)", "0000:000000:000000:00000000000000000000000000000000\x00", ppDest{}, ""},
		{"LID", "beef:000001:000002:fe80000000000000505400fffe123456",
			ppDest{LID: 0xbeef, QPN: 1, PSN: 2, GID: mustGID(t, "fe80::5054:ff:fe12:3456")}, ""},
		{"empty", "", ppDest{}, "1 fields"},
		{"three fields", "0000:000011:2aa1cd", ppDest{}, "3 fields"},
		{"five fields", ppWireRxe0[:51] + ":00", ppDest{}, "more than 4"},
		{"empty LID", ":000011:2aa1cd:00000000000000000000ffffc6120001", ppDest{}, "LID"},
		{"LID too wide", "10000:000011:2aa1cd:00000000000000000000ffffc6120001", ppDest{}, "LID 0x10000: wider than 16 bits"},
		{"QPN too wide", "0000:1000000:2aa1cd:00000000000000000000ffffc6120001", ppDest{}, "QPN 0x1000000"},
		{"PSN too long", "0000:11:000000002aa1cd:00000000000000000000ffffc6120001", ppDest{}, "PSN"},
		{"PSN not hex", "0000:000011:2aa1cx:00000000000000000000ffffc6120001", ppDest{}, "PSN \"2aa1cx\": not hex"},
		{"0x prefix", "0x00:000011:2aa1cd:00000000000000000000ffffc6120001", ppDest{}, "LID \"0x00\": not hex"},
		{"GID short", "0000:000011:2aa1cd:00000000000000000000ffffc612000", ppDest{}, "want 32 hex digits"},
		{"GID long", "0000:000011:2aa1cd:00000000000000000000ffffc61200010", ppDest{}, "want 32 hex digits"},
		{"GID not hex", "0000:000011:2aa1cd:0000000000000000000-ffffc6120001", ppDest{}, "not hex"},
		{"GID with space", "0000:000011:2aa1cd:00000000000000000000ffffc612000 ", ppDest{}, "not hex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePPDest([]byte(tt.msg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parsePPDest(%q) = %+v, %v; want an error containing %q", tt.msg, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePPDest(%q): %v", tt.msg, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePPDest(%q) (-want +got):\n%s", tt.msg, diff)
			}
		})
	}
}

// FuzzParsePPDest: the decoder of what a peer sends never panics, and
// what it accepts survives a round trip through the encoder.
func FuzzParsePPDest(f *testing.F) {
	f.Add([]byte(ppWireRxe0))
	f.Add([]byte("0000:000000:000000:00000000000000000000000000000000\x00"))
	f.Add([]byte("ffff:ffffff:ffffff:fe80000000000000505400fffe123456"))
	f.Add([]byte(":::"))
	f.Add([]byte("1:2:3:4\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := parsePPDest(msg)
		if err != nil {
			return
		}
		if d.QPN > 0xffffff || d.PSN > 0xffffff {
			t.Fatalf("parsePPDest(%q) = %+v: a field wider than 24 bits", msg, d)
		}
		wire, err := d.marshal()
		if err != nil {
			t.Fatalf("marshal(%+v): %v", d, err)
		}
		if wire[ppMsgLen-1] != 0 {
			t.Fatalf("marshal(%+v) = %q: no NUL at the end", d, wire)
		}
		back, err := parsePPDest(wire[:])
		if err != nil {
			t.Fatalf("parsePPDest(marshal(%+v)) = %v", d, err)
		}
		if back != d {
			t.Fatalf("round trip of %q: %+v became %+v", msg, d, back)
		}
	})
}

// ppRecorder is one end of a TCP stream that records what was written.
type ppRecorder struct {
	io.Reader
	wrote bytes.Buffer
}

func (r *ppRecorder) Write(p []byte) (int, error) { return r.wrote.Write(p) }

// TestPPClientExchangeBytes checks the client's byte stream against what
// ibv_rc_pingpong's client sends, given what its server answers.
func TestPPClientExchangeBytes(t *testing.T) {
	mine := ppDest{QPN: 0x12, PSN: 0x43a1eb, GID: mustGID(t, "::ffff:198.18.0.2")}
	rw := &ppRecorder{Reader: strings.NewReader(ppWireRxe0)}
	got, err := ppClientExchange(rw, []ppDest{mine})
	if err != nil {
		t.Fatal(err)
	}
	want := "0000:000012:43a1eb:00000000000000000000ffffc6120002\x00" + "done\x00"
	if diff := cmp.Diff(want, rw.wrote.String()); diff != "" {
		t.Errorf("client sent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ppDest{{QPN: 0x11, PSN: 0x2aa1cd, GID: mustGID(t, "::ffff:198.18.0.1")}}, got); diff != "" {
		t.Errorf("client read (-want +got):\n%s", diff)
	}
}

func TestPPServerExchangeBytes(t *testing.T) {
	mine := ppDest{QPN: 0x11, PSN: 0x2aa1cd, GID: mustGID(t, "::ffff:198.18.0.1")}
	clientMsg := "0000:000012:43a1eb:00000000000000000000ffffc6120002\x00"
	rw := &ppRecorder{Reader: strings.NewReader(clientMsg + "done\x00")}
	var connectedTo []ppDest
	got, err := ppServerExchange(rw, []ppDest{mine}, func(d []ppDest) error {
		if rw.wrote.Len() != 0 {
			t.Errorf("the server wrote %q before connecting its QP", rw.wrote.String())
		}
		connectedTo = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []ppDest{{QPN: 0x12, PSN: 0x43a1eb, GID: mustGID(t, "::ffff:198.18.0.2")}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("server read (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, connectedTo); diff != "" {
		t.Errorf("server connected to (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ppWireRxe0, rw.wrote.String()); diff != "" {
		t.Errorf("server sent (-want +got):\n%s", diff)
	}
}

func TestPPServerExchangeErrors(t *testing.T) {
	mine := []ppDest{{QPN: 1}}
	connectErr := errors.New("RTR refused")
	tests := []struct {
		name    string
		in      string
		connect error
		wantErr string
		is      error
	}{
		{"short address", ppWireRxe0[:20], nil, "reading remote address 1 of 1", io.ErrUnexpectedEOF},
		{"bad address", strings.Repeat("x", ppMsgLen), nil, "fields", nil},
		{"connect fails", ppWireRxe0, connectErr, "couldn't connect to remote QP", connectErr},
		{"no done", ppWireRxe0 + "do", nil, "waiting for done", io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw := &ppRecorder{Reader: strings.NewReader(tt.in)}
			_, err := ppServerExchange(rw, mine, func([]ppDest) error { return tt.connect })
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ppServerExchange = %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("ppServerExchange = %v, want it to match %v", err, tt.is)
			}
		})
	}
}

// TestPPExchangeSRQ runs both sides over a real TCP connection with
// ibv_srq_pingpong's 256 addresses each way.
func TestPPExchangeSRQ(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	server := make([]ppDest, ppSRQMsgs)
	client := make([]ppDest, ppSRQMsgs)
	for i := range 16 {
		server[i] = ppDest{QPN: uint32(0x100 + i), PSN: uint32(i * 7), GID: mustGID(t, "::ffff:198.18.0.1")}
		client[i] = ppDest{QPN: uint32(0x200 + i), PSN: uint32(i * 11), GID: mustGID(t, "::ffff:198.18.0.2")}
	}
	type result struct {
		got []ppDest
		err error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		got, err := ppServerExchange(conn, server, func([]ppDest) error { return nil })
		done <- result{got, err}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	gotClient, err := ppClientExchange(conn, client)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if diff := cmp.Diff(server, gotClient); diff != "" {
		t.Errorf("the client got (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(client, r.got); diff != "" {
		t.Errorf("the server got (-want +got):\n%s", diff)
	}
}

func TestPPNtop(t *testing.T) {
	// The expectations are glibc's inet_ntop(AF_INET6) output.
	tests := []struct {
		gid  [16]byte
		want string
	}{
		{[16]byte{}, "::"},
		{[16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 1}, "::ffff:198.18.0.1"},
		{[16]byte{12: 1, 13: 2, 14: 3, 15: 4}, "::1.2.3.4"},
		{[16]byte{15: 1}, "::1"},
		{[16]byte{14: 1, 15: 2}, "::102"},
		{[16]byte{0xfe, 0x80, 8: 0x50, 9: 0x54, 11: 0xff, 12: 0xfe, 13: 0x12, 14: 0x34, 15: 0x56}, "fe80::5054:ff:fe12:3456"},
		{[16]byte{0x20, 0x01, 0x0d, 0xb8, 7: 1, 15: 1}, "2001:db8:0:1::1"},
		{[16]byte{0x20, 0x01, 0x0d, 0xb8, 7: 1, 9: 1, 15: 1}, "2001:db8:0:1:1::1"},
		{[16]byte{0x20, 0x01, 7: 1, 13: 1, 15: 1}, "2001::1:0:0:1:1"},
	}
	for _, tt := range tests {
		if got := ppNtop(tt.gid); got != tt.want {
			t.Errorf("ppNtop(%x) = %q, want %q", tt.gid, got, tt.want)
		}
	}
}

func TestPPAddressLine(t *testing.T) {
	d := ppDest{QPN: 0x11, PSN: 0x2aa1cd, GID: mustGID(t, "::ffff:198.18.0.1")}
	tests := []struct {
		which, sep, want string
	}{
		{"local", ", ", "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2aa1cd, GID ::ffff:198.18.0.1\n"},
		{"local", ": ", "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2aa1cd: GID ::ffff:198.18.0.1\n"},
		{"remote", ", ", "  remote address: LID 0x0000, QPN 0x000011, PSN 0x2aa1cd, GID ::ffff:198.18.0.1\n"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ppAddressLine(tt.which, d, tt.sep)); diff != "" {
			t.Errorf("ppAddressLine(%q, %q) (-want +got):\n%s", tt.which, tt.sep, diff)
		}
	}
}

func TestPPSummary(t *testing.T) {
	// The expectations are the examples' printf output for the same
	// numbers, from a C program built with gcc on glibc.
	tests := []struct {
		size, iters int
		usec        int64
		want        string
	}{
		{4096, 20, 126192, "163840 bytes in 0.13 seconds = 10.39 Mbit/sec\n20 iters in 0.13 seconds = 6309.60 usec/iter\n"},
		{1024, 20, 3292, "40960 bytes in 0.00 seconds = 99.54 Mbit/sec\n20 iters in 0.00 seconds = 164.60 usec/iter\n"},
		{4096, 1000, 16777217, "8192000 bytes in 16.78 seconds = 3.91 Mbit/sec\n1000 iters in 16.78 seconds = 16777.22 usec/iter\n"},
		{4096, 20, 0, "163840 bytes in 0.00 seconds = inf Mbit/sec\n20 iters in 0.00 seconds = 0.00 usec/iter\n"},
		{64, 3, 7, "384 bytes in 0.00 seconds = 438.86 Mbit/sec\n3 iters in 0.00 seconds = 2.33 usec/iter\n"},
		{4096, 1000, 123456789, "8192000 bytes in 123.46 seconds = 0.53 Mbit/sec\n1000 iters in 123.46 seconds = 123456.79 usec/iter\n"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ppSummary(tt.size, tt.iters, tt.usec)); diff != "" {
			t.Errorf("ppSummary(%d, %d, %d) (-want +got):\n%s", tt.size, tt.iters, tt.usec, diff)
		}
	}
}

func TestParsePingpongArgs(t *testing.T) {
	def := ppOptions{tcpPort: 18515, ibPort: 1, size: 4096, mtu: uverbs.MTU1024, rxDepth: 500, iters: 1000, gidx: -1, numQP: 16}
	with := func(f func(*ppOptions)) ppOptions {
		o := def
		f(&o)
		return o
	}
	tests := []struct {
		args []string
		want ppOptions
	}{
		{[]string{"rc"}, def},
		{[]string{"uc"}, with(func(o *ppOptions) { o.kind = ppUC })},
		{[]string{"ud"}, with(func(o *ppOptions) { o.kind, o.size = ppUD, 1024 })},
		{[]string{"srq", "-q", "4", "-r", "8"}, with(func(o *ppOptions) { o.kind, o.numQP, o.rxDepth = ppSRQ, 4, 8 })},
		{[]string{"rc", "-d", "rxe1", "-g", "1", "-n", "20", "198.18.0.1"},
			with(func(o *ppOptions) { o.dev, o.gidx, o.iters, o.host = "rxe1", 1, 20, "198.18.0.1" })},
		{[]string{"rc", "198.18.0.1", "-drxe1", "-g1", "-ec"},
			with(func(o *ppOptions) { o.dev, o.gidx, o.events, o.check, o.host = "rxe1", 1, true, true, "198.18.0.1" })},
		{[]string{"rc", "--ib-dev=rxe0", "--gid-idx", "0x1", "--size=64", "--mtu", "2048", "--rx-depth=010", "--iters=5", "--sl", "3", "--events", "--port", "18600", "--ib-port=1"},
			with(func(o *ppOptions) {
				o.dev, o.gidx, o.size, o.mtu, o.rxDepth, o.iters, o.sl, o.events, o.tcpPort = "rxe0", 1, 64, uverbs.MTU2048, 8, 5, 3, true, 18600
			})},
		{[]string{"rc", "--ib-d", "rxe0", "--ev", "--gid=2"}, with(func(o *ppOptions) { o.dev, o.events, o.gidx = "rxe0", true, 2 })},
		{[]string{"rc", "-m", "256", "--", "-host"}, with(func(o *ppOptions) { o.mtu, o.host = uverbs.MTU256, "-host" })},
		{[]string{"ud", "-s", "2048", "-l", "15"}, with(func(o *ppOptions) { o.kind, o.size, o.sl = ppUD, 2048, 15 })},
	}
	for _, tt := range tests {
		got, err := parsePingpongArgs(tt.args)
		if err != nil {
			t.Errorf("parsePingpongArgs(%q): %v", tt.args, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(ppOptions{})); diff != "" {
			t.Errorf("parsePingpongArgs(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestParsePingpongArgsErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, "needs rc, uc, ud or srq"},
		{[]string{"xrc"}, `unknown transport "xrc"`},
		{[]string{"rc", "-x"}, "unknown flag -x"},
		{[]string{"rc", "--bogus"}, "unknown flag --bogus"},
		{[]string{"rc", "--i", "1"}, "--i is ambiguous"}, // ib-dev, ib-port, iters
		{[]string{"rc", "-s"}, "-s needs a value"},
		{[]string{"rc", "--size"}, "--size needs a value"},
		{[]string{"rc", "--events=1"}, "--events takes no value"},
		{[]string{"rc", "-s", "0"}, "-s \"0\": want a number from 1"},
		{[]string{"rc", "-s", "big"}, "-s \"big\""},
		{[]string{"rc", "-p", "65536"}, "-p \"65536\""},
		{[]string{"rc", "-i", "0"}, "-i \"0\""},
		{[]string{"rc", "-m", "1000"}, "the MTU is 256, 512, 1024, 2048 or 4096"},
		{[]string{"rc", "-m", "8192"}, "-m \"8192\""},
		{[]string{"rc", "-l", "16"}, "-l \"16\""},
		{[]string{"rc", "-g", "-2"}, "-g \"-2\""},
		{[]string{"rc", "-n", "0"}, "-n \"0\""},
		{[]string{"rc", "-q", "4"}, "unknown flag -q"},
		{[]string{"ud", "-m", "1024"}, "unknown flag -m"},
		{[]string{"uc", "-t"}, "unknown flag -t"},
		{[]string{"rc", "-t"}, "-t (completion timestamps) is not supported"},
		{[]string{"srq", "--odp"}, "-o (on-demand paging) is not supported"},
		{[]string{"srq", "-q", "256"}, "-q \"256\""},
		{[]string{"srq", "-q", "20", "-r", "10"}, "rx_depth 10 is too small for 20 QPs"},
		{[]string{"rc", "a", "b"}, "at most one host"},
	}
	for _, tt := range tests {
		_, err := parsePingpongArgs(tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parsePingpongArgs(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			continue
		}
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("parsePingpongArgs(%q) = %v, want a usage error", tt.args, err)
		}
	}
}

// TestPingpongCommandLine runs the command's argument handling through
// run: help goes to stdout, a bad line exits 2 with the usage.
func TestPingpongCommandLine(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{[]string{"pingpong", "rc", "-h"}, 0, "-g, --gid-idx=<gid index>", ""},
		{[]string{"pingpong", "srq", "--help"}, 0, "-q, --num-qp=<num>", ""},
		{[]string{"pingpong", "--help"}, 0, "start a server", ""},
		{[]string{"pingpong", "rc", "-s", "0"}, 2, "", "pingpong rc: -s \"0\""},
		{[]string{"pingpong"}, 2, "", "pingpong rc|uc|ud|srq [flags] [HOST]"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
				tt.args, code, stdout.String(), stderr.String(), tt.code, tt.wantStdout, tt.wantStderr)
		}
	}
	var stdout, stderr bytes.Buffer
	run([]string{"pingpong", "ud", "-h"}, &stdout, &stderr)
	if strings.Contains(stdout.String(), "--mtu") || !strings.Contains(stdout.String(), "default 1024") {
		t.Errorf("pingpong ud -h has -m or lacks the UD default size:\n%s", stdout.String())
	}
}

// ppSim connects two ppLoops through an in-memory transport that
// delivers messages in a random order (QPs interleaved), to check that
// the examples' bookkeeping ends on both sides without a message finding
// an empty receive queue. With reliable, a send completes when its
// message is delivered (an RC acknowledgement); otherwise at once (UC,
// UD).
type ppSim struct {
	rng      *rand.Rand
	reliable bool
	sides    [2]*ppSimSide
	wire     map[[2]int]int // messages in flight per sending side and QP
	// late counts messages that reached a side after its loop ended,
	// needed those whose send completion the sender still counted on.
	late, needed int
}

type ppSimSide struct {
	loop   *ppLoop
	posted int          // receives on the receive queue (or SRQ)
	cq     []ppSimEvent // completions not yet polled
	sent   int
}

type ppSimEvent struct {
	qp   int
	wrid uint64
}

func newPPSim(seed uint64, reliable bool, nqp, iters, rxDepth int) *ppSim {
	s := &ppSim{rng: rand.New(rand.NewPCG(seed, 1)), reliable: reliable, wire: map[[2]int]int{}}
	refill := 1
	if nqp > 1 {
		refill = nqp // as ibv_srq_pingpong
	}
	for i := range s.sides {
		side := &ppSimSide{}
		side.loop = &ppLoop{iters: iters, rxDepth: rxDepth, refillAt: refill, pending: make([]int, nqp),
			postRecv: func(n int) (int, error) {
				side.posted += n
				return n, nil
			},
			postSend: func(qp int) error {
				side.sent++
				s.wire[[2]int{i, qp}]++
				if !s.reliable {
					side.cq = append(side.cq, ppSimEvent{qp, ppSendWRID})
				}
				return nil
			}}
		s.sides[i] = side
	}
	return s
}

// run moves the simulation until both loops are done; it fails on a
// deadlock or a message that found no receive posted.
func (s *ppSim) run(t *testing.T) {
	t.Helper()
	for _, side := range s.sides {
		if err := side.loop.start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, side := range s.sides {
		if err := side.loop.begin(i == 1); err != nil { // side 1 is the client
			t.Fatal(err)
		}
	}
	for steps := 0; !s.sides[0].loop.done() || !s.sides[1].loop.done(); steps++ {
		if steps > 1e6 {
			t.Fatal("no end after a million steps")
		}
		// The possible moves: deliver a message, or let a side that
		// is still running poll a completion.
		var moves []func()
		for k, n := range s.wire {
			if n > 0 {
				moves = append(moves, func() { s.deliver(t, k[0], k[1]) })
			}
		}
		for _, side := range s.sides {
			if len(side.cq) > 0 && !side.loop.done() {
				moves = append(moves, func() {
					ev := side.cq[0]
					side.cq = side.cq[1:]
					if err := side.loop.complete(ev.qp, &uverbs.WorkCompletion{WRID: ev.wrid}); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
		if len(moves) == 0 {
			t.Fatalf("deadlock: side 0 has %d sends and %d receives, side 1 %d and %d, of %d",
				s.sides[0].loop.scnt, s.sides[0].loop.rcnt, s.sides[1].loop.scnt, s.sides[1].loop.rcnt, s.sides[0].loop.iters)
		}
		moves[s.rng.IntN(len(moves))]()
	}
}

func (s *ppSim) deliver(t *testing.T, from, qp int) {
	s.wire[[2]int{from, qp}]--
	to, sender := s.sides[1-from], s.sides[from]
	if to.loop.done() {
		s.late++
		if s.reliable && sender.loop.scnt < sender.loop.iters {
			s.needed++
		}
	}
	if to.posted == 0 {
		t.Fatalf("side %d QP %d: a message arrived with no receive posted", 1-from, qp)
	}
	to.posted--
	to.cq = append(to.cq, ppSimEvent{qp, ppRecvWRID})
	if s.reliable {
		sender.cq = append(sender.cq, ppSimEvent{qp, ppSendWRID})
	}
}

// TestPPLoop runs the bookkeeping of both ends against each other over
// many interleavings. With one QP it is a strict ping-pong. With several
// (ibv_srq_pingpong) one end may finish while the other still has a
// message in flight to it, at most one per QP, whose acknowledgement
// the sender may still need: why runPingpong keeps SRQ QPs open a
// moment after the loop.
func TestPPLoop(t *testing.T) {
	tests := []struct {
		nqp, iters, rxDepth int
	}{
		{1, 1, 1}, {1, 20, 500}, {1, 20, 2}, {1, 1000, 3},
		{16, 20, 500}, {16, 20, 16}, {4, 20, 8}, {2, 7, 2}, {16, 1000, 20},
	}
	for _, tt := range tests {
		for _, reliable := range []bool{true, false} {
			t.Run(fmt.Sprintf("qps=%d,iters=%d,rx=%d,reliable=%v", tt.nqp, tt.iters, tt.rxDepth, reliable), func(t *testing.T) {
				late, needed := 0, 0
				for seed := range uint64(50) {
					s := newPPSim(seed, reliable, tt.nqp, tt.iters, tt.rxDepth)
					s.run(t)
					for i, side := range s.sides {
						l := side.loop
						if l.scnt < tt.iters || l.rcnt < tt.iters {
							t.Fatalf("seed %d side %d ended with %d sends and %d receives of %d", seed, i, l.scnt, l.rcnt, tt.iters)
						}
						// A finished side leaves completions unpolled.
						unpolled := 0
						for _, ev := range side.cq {
							if ev.wrid == ppRecvWRID {
								unpolled++
							}
						}
						if l.routs != side.posted+unpolled {
							t.Fatalf("seed %d side %d counts %d receives posted; the queue has %d, and %d completed unpolled",
								seed, i, l.routs, side.posted, unpolled)
						}
						if tt.nqp == 1 && side.sent != tt.iters {
							t.Errorf("seed %d side %d sent %d messages, want exactly %d", seed, i, side.sent, tt.iters)
						}
					}
					if s.late > tt.nqp {
						t.Errorf("seed %d: %d messages reached a side after it finished, more than one per QP", seed, s.late)
					}
					late += s.late
					needed += s.needed
				}
				if tt.nqp == 1 && late != 0 {
					t.Errorf("%d messages reached a side after it finished", late)
				}
				t.Logf("50 runs: %d messages reached a finished side, %d of them needed by the sender", late, needed)
			})
		}
	}
}

func TestPPLoopErrors(t *testing.T) {
	postErr := errors.New("queue full")
	tests := []struct {
		name    string
		loop    func() *ppLoop
		run     func(*ppLoop) error
		wantErr string
		is      error
	}{
		{"initial receives short",
			func() *ppLoop {
				return &ppLoop{rxDepth: 4, postRecv: func(n int) (int, error) { return 2, postErr }}
			},
			func(l *ppLoop) error { return l.start() }, "couldn't post receive (2)", postErr},
		{"failed completion",
			func() *ppLoop { return &ppLoop{iters: 1, pending: make([]int, 1)} },
			func(l *ppLoop) error {
				return l.complete(0, &uverbs.WorkCompletion{WRID: ppSendWRID, Status: uverbs.WCRetryExcErr})
			}, "failed status transport retry counter exceeded (12) for wr_id 2", uverbs.WCRetryExcErr},
		{"unknown wr_id",
			func() *ppLoop { return &ppLoop{iters: 1, pending: make([]int, 1)} },
			func(l *ppLoop) error { return l.complete(0, &uverbs.WorkCompletion{WRID: 7}) },
			"completion for unknown wr_id 7", nil},
		{"refill short",
			func() *ppLoop {
				return &ppLoop{iters: 5, rxDepth: 4, refillAt: 1, routs: 2, pending: make([]int, 1),
					postRecv: func(n int) (int, error) { return 0, postErr }}
			},
			func(l *ppLoop) error { return l.complete(0, &uverbs.WorkCompletion{WRID: ppRecvWRID}) },
			"couldn't post receive (1)", postErr},
		{"send fails",
			func() *ppLoop {
				return &ppLoop{iters: 5, rxDepth: 4, refillAt: 1, routs: 4, pending: []int{ppRecvWRID},
					postSend: func(int) error { return postErr }}
			},
			func(l *ppLoop) error { return l.complete(0, &uverbs.WorkCompletion{WRID: ppRecvWRID}) },
			"couldn't post send", postErr},
		{"first send fails",
			func() *ppLoop {
				return &ppLoop{pending: make([]int, 2), postSend: func(int) error { return postErr }}
			},
			func(l *ppLoop) error { return l.begin(true) }, "couldn't post send", postErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(tt.loop())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("got %v, want it to match %v", err, tt.is)
			}
		})
	}
}

func TestPPMTU(t *testing.T) {
	got := map[int]uverbs.MTU{}
	for _, n := range []int{0, 128, 256, 512, 1000, 1024, 2048, 4096, 8192} {
		got[n] = ppMTU(n)
	}
	want := map[int]uverbs.MTU{0: 0, 128: 0, 256: uverbs.MTU256, 512: uverbs.MTU512, 1000: 0,
		1024: uverbs.MTU1024, 2048: uverbs.MTU2048, 4096: uverbs.MTU4096, 8192: 0}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ppMTU (-want +got):\n%s", diff)
	}
}

func TestPingpongJSONFlag(t *testing.T) {
	for _, args := range [][]string{{"rc", "-json"}, {"ud", "--json", "host"}, {"srq", "--js"}} {
		o, err := parsePingpongArgs(args)
		if err != nil || !o.json {
			t.Errorf("parsePingpongArgs(%q) = json %v, %v; want -json set", args, o.json, err)
		}
	}
	if o, err := parsePingpongArgs([]string{"rc", "-c"}); err != nil || o.json {
		t.Errorf("pingpong rc -c: json %v, %v", o.json, err)
	}
}
