package toolrun

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcNetTCP(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0101A8C6:1C8A 0201A8C6:98EC 01 00000000:00000028 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   1: 00000000:07E8 00000000:0000 0A 00000010:00000000 00:00000000 00000000     0        0 588 1 000000003271ea68 100 0 0 10 0
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 20 4 0 10 -1
   1: 000080FE00000000FF00000002000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
`
	got, err := ParseProcNetTCP([]byte(tcp))
	if err != nil {
		t.Fatal(err)
	}
	got6, err := ParseProcNetTCP([]byte(tcp6))
	if err != nil {
		t.Fatal(err)
	}
	want := []TCPSocket{
		{netip.MustParseAddrPort("198.168.1.1:7306"), netip.MustParseAddrPort("198.168.1.2:39148"), 1, 0, 40},
		{netip.MustParseAddrPort("0.0.0.0:2024"), netip.MustParseAddrPort("0.0.0.0:0"), 10, 16, 0},
		{netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:50000"), 1, 0, 0},
		{netip.MustParseAddrPort("[fe80::ff:0:2]:22"), netip.MustParseAddrPort("[::]:0"), 10, 0, 0},
	}
	if diff := cmp.Diff(want, append(got, got6...), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"h\n 0: 0101A8C6 0201A8C6:98EC 01 00000000:00000028", "h\n 0: 0101A8C6:1C8A 0201A8C6:98EC 01 0000000000000028", "h\n 0: 0101:1C8A 0201A8C6:98EC 01 00000000:00000028", "h\n 0: x"} {
		if _, err := ParseProcNetTCP([]byte(bad)); err == nil {
			t.Errorf("ParseProcNetTCP(%q) = nil error", bad)
		}
	}
}

// TestWatchdogStranded: a socket on the port that holds bytes its owner
// does not read ends the watch before its deadline, as stranded, and
// only when the watchdog looks for that.
func TestWatchdogStranded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.Write(make([]byte, 40)); err != nil { // s never reads
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	dog := Watch(time.Hour, port, true, cancel)
	<-ctx.Done()
	dog.Stop()
	st := dog.Stranded()
	if len(st) != 1 || int(st[0].Local.Port()) != port || st[0].RxQueue != 40 || dog.TimedOut() {
		t.Fatalf("stranded %v, timed out %v; want the accepted socket with 40 bytes\n%s", st, dog.TimedOut(), dog.Report())
	}
	t.Log(StrandedWhy(st))

	// Without strands, only the deadline ends it.
	ctx, cancel = context.WithCancel(context.Background())
	dog = Watch((strandLooks+1)*strandPoll, port, false, cancel)
	<-ctx.Done()
	dog.Stop()
	if dog.Stranded() != nil || !dog.TimedOut() {
		t.Fatalf("stranded %v, timed out %v; want only the deadline", dog.Stranded(), dog.TimedOut())
	}
}

// TestStartDescribesWhatItEnds: a C end still running when its run's
// context ends is described (its threads, from /proc) before it is
// killed, in its result's stderr.
func TestStartDescribesWhatItEnds(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pid, done := Start(t, ctx, nil, "", sleep, true, []string{"600"}, stringer("sleep"))
	cancel()
	r := <-done
	want := fmt.Sprintf("[when the run ended: pid %d; thread %d (sleep) ", pid, pid)
	if r.Code != -1 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, ", wchan ") || !strings.Contains(r.Stderr, "signal: killed") {
		t.Errorf("result %d, stderr %q; want -1, %q..., a wchan and the kill", r.Code, r.Stderr, want)
	}
	t.Logf("stderr: %s", r.Stderr)
	if s := ProcState(pid); !strings.Contains(s, "no such file") {
		t.Errorf("ProcState of an ended process = %q, want it gone", s)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// TestConnectRaced: only a failed end whose dial ended in CONNECT_ERROR
// lost siw's connect race.
func TestConnectRaced(t *testing.T) {
	const raced = "purerdma: rcopy: dial rsocket 198.18.1.1:7305: rdmacm ConnectContext: CONNECT_ERROR instead of ESTABLISHED: invalid argument\n"
	for _, tc := range []struct {
		r    Result
		lost bool
	}{
		{Result{Code: 1, Stderr: raced}, true},
		{Result{Code: 0, Stderr: raced}, false},
		{Result{Code: 1, Stderr: "purerdma: rcopy: dial rsocket 198.18.1.1:7305: rdmacm ConnectContext: REJECTED\n"}, false},
		{Result{Code: 1}, false},
	} {
		if got := ConnectRaced(tc.r); (got != "") != tc.lost {
			t.Errorf("ConnectRaced(%v) = %q, want lost %v", tc.r, got, tc.lost)
		}
	}
}
