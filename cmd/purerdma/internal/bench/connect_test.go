package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
)

func TestBenchConnectFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-b", "198.18.0.1"}, true},
		{[]string{"-s", "198.18.0.1", "-b", "198.18.0.2", "-c", "5"}, true},
		{[]string{"-b", "198.18.0.1", "-allocprofile", "/tmp/allocs", "-cpuprofile", "/tmp/cpu"}, true},
		{nil, false},
		{[]string{"-s", "x", "-c", "0"}, false},
		{[]string{"-s", "x", "-p", "70000"}, false},
		{[]string{"-s", "x", "extra"}, false},
		{[]string{"-b", "198.18.0.1", "-accepters", "0"}, true},
		{[]string{"-b", "198.18.0.1", "-accepters", "4"}, true},
		{[]string{"-b", "198.18.0.1", "-accepters", "-1"}, false},
	} {
		_, err := parseConnectFlags(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.args, err, tc.ok)
		}
		if err != nil && !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v is not a usage error", tc.args, err)
		}
	}
}

func TestConnectTable(t *testing.T) {
	now := time.Now()
	steps := make([]stepTimes, len(connectSteps))
	for i := range steps {
		steps[i] = stepTimes{start: now, end: now.Add(time.Duration(i+1) * time.Millisecond),
			per: []time.Duration{time.Duration(i+1) * 100 * time.Microsecond, time.Duration(i+1) * 300 * time.Microsecond}}
	}
	r := summarize(steps, 2)
	var b bytes.Buffer
	r.print(&b, false)
	want := "step              total ms     max ms     min us  us / conn\n" +
		"create id    :        1.00       0.30     100.00     500.00\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("table starts\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "bind addr") {
		t.Error("bind addr printed without -b")
	}
	if got := r.Steps[stepConnect]; got.TotalMS != 6 || got.MaxMS != 1.8 || got.MinUS != 600 || got.USPerConn != 3000 {
		t.Errorf("connect row %+v", got)
	}
}

// TestBenchConnectVM runs the server and a 20-connection client in the
// VM, with the server handling requests in its event loop and in
// accepter goroutines: every connection is set up and torn down, every
// step timed.
func TestBenchConnectVM(t *testing.T) {
	testenv.Devices(t, 2)
	for i, accepters := range []string{"0", "1", "3"} {
		t.Run("accepters="+accepters, func(t *testing.T) {
			port := fmt.Sprint(17473 + i)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			srvCtx, stopServer := context.WithCancel(ctx)
			served := make(chan error, 1)
			// The client starts once the server listens: a client run
			// begun earlier fails part way, and the requests of it that
			// reached the server after all are gone by the time the
			// server takes them (INIT_QP_ATTR then fails: EINVAL).
			pr, pw := io.Pipe()
			var srvOut bytes.Buffer
			go func() {
				err := runBenchConnect(srvCtx, []string{"-b", "198.18.0.1", "-p", port, "-accepters", accepters}, pw, io.Discard)
				pw.CloseWithError(err)
				served <- err
			}()
			listening, readDone := make(chan bool, 1), make(chan struct{})
			go func() {
				defer close(readDone)
				buf := make([]byte, 4096)
				said := false
				for {
					n, err := pr.Read(buf)
					srvOut.Write(buf[:n])
					if !said && strings.Contains(srvOut.String(), "listening on") {
						said = true
						listening <- true
					}
					if err != nil {
						if !said {
							listening <- false
						}
						return
					}
				}
			}()
			if !<-listening {
				stopServer()
				<-readDone
				t.Fatalf("server did not listen: %v: %s", <-served, srvOut.String())
			}
			var out bytes.Buffer
			err := runBenchConnect(ctx, []string{"-s", "198.18.0.1", "-b", "198.18.0.2", "-p", port, "-c", "20", "-json"}, &out, io.Discard)
			stopServer()
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			if err := <-served; err != nil {
				t.Fatalf("server: %v", err)
			}
			<-readDone // the server closed the pipe: all its output is in
			if strings.Contains(srvOut.String(), "connect request:") {
				t.Errorf("server reported failures:\n%s", srvOut.String())
			}
			var r ConnectResult
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			if r.Connections != 20 || len(r.Steps) != len(connectSteps) {
				t.Fatalf("result %+v", r)
			}
			for _, s := range r.Steps {
				if s.TotalMS <= 0 || s.USPerConn <= 0 || s.MaxMS*1000 < s.MinUS {
					t.Errorf("step %+v", s)
				}
			}
			t.Logf("%s", out.String())
		})
	}
}

// A client whose server never answers returns when its context ends:
// the event reader stops with the context, and the step waiting for it
// must not wait on. The test cancels the client's context once its
// first connect request reached the listener (which never answers it),
// so the client has entered the connect step, and asserts that the run
// ends with that step reporting the cancel's context.Canceled: not an
// error of the CM (a reject, an unreachable peer), and not a deadline.
// How soon it returns is not measured; a client that waited on would
// hang, which the minute's guard only turns into a failure.
func TestBenchConnectClientCancelled(t *testing.T) {
	testenv.Devices(t, 2)
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Bind(netip.MustParseAddrPort("198.18.0.1:17480")); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(0); err != nil {
		t.Fatal(err)
	}
	guard, stopGuard := context.WithTimeout(context.Background(), time.Minute) // only ends a hang
	defer stopGuard()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runBenchConnect(ctx, []string{"-s", "198.18.0.1", "-b", "198.18.0.2", "-p", "17480", "-c", "2"}, io.Discard, io.Discard)
	}()
	// The request is taken off the listener's channel and never
	// accepted or rejected: the client waits for an answer.
	req, err := l.GetRequest(guard)
	if err != nil {
		cancel()
		select {
		case cerr := <-done:
			t.Fatalf("no connect request reached the listener (%v); the client returned %v", err, cerr)
		case <-time.After(time.Minute): // only ends a hang
			t.Fatalf("no connect request reached the listener (%v), and the client still runs", err)
		}
	}
	defer req.ID.Close()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), connectSteps[stepConnect]+": ") {
			t.Fatalf("client = %v, want the connect step to end with the cancel's context.Canceled", err)
		}
	case <-guard.Done():
		t.Fatal("the client still waits for its connections after its context was cancelled")
	}
}

// -cpuprofile's and -allocprofile's files are gzipped pprof profiles.
func TestProfiles(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	dir := t.TempDir()
	cpu, allocs := filepath.Join(dir, "cpu"), filepath.Join(dir, "allocs")
	stop, err := startProfiles(cpu, allocs)
	if err != nil {
		t.Fatal(err)
	}
	sink = make([]byte, 4096)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{cpu, allocs} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s starts %x, want gzip's 1f8b", path, b[:min(len(b), 4)])
		}
	}
	stop, err = startProfiles("", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("no profile asked for: %v", err)
	}
}

var sink []byte

// TestConnectResultJSON: bench connect -json uses the snake_case keys
// the package doc promises, like every other -json.
func TestConnectResultJSON(t *testing.T) {
	b, err := json.Marshal(ConnectResult{Connections: 2, Steps: []ConnectStep{{Step: "connect", TotalMS: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"connections":2,"steps":[{"step":"connect","total_ms":1,"max_ms":0,"min_us":0,"us_per_conn":0}]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
