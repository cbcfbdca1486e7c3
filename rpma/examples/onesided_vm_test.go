package examples_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// TestExample02ReadToVolatile: the client reads the server's greeting
// from its DRAM.
func TestExample02ReadToVolatile(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) {
		runExample(t, example{name: "02-read-to-volatile", pair: p,
			clientOut: []string{"Read a message: Hello client!\n"}})
	})
}

// pmemPath is the VM's persistent memory, a device DAX. The examples
// that take a PMem path keep their servers' data at its start and
// their clients' at the offset the test gives, as librpma's
// run-all-examples.sh does (each test its own offset, below 64 KiB:
// 03's client sends its data's offset as 16 bits); tests run one after
// another, so no two examples use it at once. Earlier tests leave their data behind, so
// the tests check what one run leaves for the next, not what the
// memory held first.
func pmemPath(t testing.TB) string {
	t.Helper()
	testenv.NeedFabric(t)
	p := os.Getenv("PURERDMA_PMEM")
	if p == "" {
		t.Fatal("PURERDMA_PMEM is not set: the VM has no persistent memory")
	}
	return p
}

// value is what follows prefix on the one line of p's standard output
// that starts with it; ok is false when no line does.
func value(p *proc, prefix string) (v string, ok bool) {
	for l := range strings.Lines(p.out.String()) {
		if rest, found := strings.CutPrefix(l, prefix); found {
			return strings.TrimSuffix(rest, "\n"), true
		}
	}
	return "", false
}

// mustValue is value that fails the test without the line.
func mustValue(t testing.TB, p *proc, prefix string) string {
	t.Helper()
	v, ok := value(p, prefix)
	if !ok {
		t.Fatalf("%s's output lacks a line %q...:\n%s\nstderr:\n%s", p.name, prefix, p.out.String(), p.err.String())
	}
	return v
}

const (
	helloEN = "Hello world!"
	helloES = "¡Hola Mundo!"
)

// other is the translation of a greeting.
func other(t testing.TB, hello string) string {
	t.Helper()
	switch hello {
	case helloEN:
		return helloES
	case helloES:
		return helloEN
	}
	t.Fatalf("%q is no greeting of the examples", hello)
	return ""
}

// helloRun is one run of 03, 04 or 05: the greeting the client sent
// and the values the server printed.
type helloRun struct {
	sent, translation string
	old               string
	hasOld            bool
	got               string
}

// runHello runs an example whose client sends its greeting, kept in
// PMem or DRAM, and translates it afterwards, and whose server prints
// the value it had and the one it got.
func runHello(t testing.TB, name string, p pair, serverArgs, clientArgs []string, serverOut, clientOut []string) helloRun {
	t.Helper()
	s, cs := runExample(t, example{name: name, pair: p, serverArgs: serverArgs, clientArgs: clientArgs,
		serverOut: serverOut, clientOut: append([]string{"translating...\n"}, clientOut...)})
	c := cs[0]
	t.Logf("server %v:\n%sclient %v:\n%s", serverArgs, s.out.String(), clientArgs, c.out.String())
	var r helloRun
	r.sent = mustValue(t, c, "Next value: ")
	r.translation = mustValue(t, c, "Translation: ")
	if want := other(t, r.sent); r.translation != want {
		t.Errorf("the client translated %q to %q, want %q", r.sent, r.translation, want)
	}
	r.old, r.hasOld = value(s, "Old value: ")
	r.got = mustValue(t, s, "New value: ")
	if r.got != r.sent {
		t.Errorf("the server got %q, the client sent %q", r.got, r.sent)
	}
	return r
}

// testHello runs a hello example on DRAM, then twice on PMem, with
// each pair: each PMem run's client sends what the run before's
// translated, and its server had what the run before's got, both kept
// in PMem by processes that have exited, of the same language or not
// (the pairs run in turn on the same PMem).
func testHello(t *testing.T, name string, clientOffset string) {
	t.Run("DRAM", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			r := runHello(t, name, p, nil, nil, nil, nil)
			if r.sent != helloEN || r.hasOld {
				t.Errorf("on DRAM: the client sent %q (want %q), the server had %q (%v; want none)", r.sent, helloEN, r.old, r.hasOld)
			}
		})
	})
	t.Run("PMem", func(t *testing.T) {
		pmem := pmemPath(t)
		sargs, cargs := []string{pmem}, []string{pmem, clientOffset}
		var prev *helloRun
		forPairs(t, func(t *testing.T, p pair) {
			for range 2 {
				r := runHello(t, name, p, sargs, cargs, nil, nil)
				checkHelloChain(t, prev, r)
				prev = &r
			}
		})
	})
}

// checkHelloChain checks that a PMem run found what the run before it
// (if any) persisted: its client sends the translation, its server had
// the value the one before got.
func checkHelloChain(t testing.TB, prev *helloRun, r helloRun) {
	t.Helper()
	if prev == nil {
		return
	}
	if r.sent != prev.translation {
		t.Errorf("the client sent %q, the run before translated to %q", r.sent, prev.translation)
	}
	if !r.hasOld || r.old != prev.got {
		t.Errorf("the server had %q (%v), the run before got %q", r.old, r.hasOld, prev.got)
	}
}

// TestExample03ReadToPersistent: the server reads the client's greeting
// into its memory; on PMem, the greetings of both sides outlive their
// processes.
func TestExample03ReadToPersistent(t *testing.T) {
	testHello(t, "03-read-to-persistent", "8192")
}

// TestExample04WriteToPersistent: the client writes its greeting to the
// server's memory.
func TestExample04WriteToPersistent(t *testing.T) {
	testHello(t, "04-write-to-persistent", "16384")
}

const (
	flushPersistent = "RPMA_FLUSH_TYPE_PERSISTENT is supported\n"
	flushVisibility = "RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n"
)

// TestExample05FlushToPersistent: the client writes its greeting to the
// server's memory and flushes it, to persistence only when the server
// says its PMem takes writes directly ("on").
func TestExample05FlushToPersistent(t *testing.T) {
	const name = "05-flush-to-persistent"
	t.Run("DRAM", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			r := runHello(t, name, p, nil, nil, nil, []string{flushVisibility})
			if r.sent != helloEN || r.hasOld {
				t.Errorf("on DRAM: the client sent %q (want %q), the server had %q (%v; want none)", r.sent, helloEN, r.old, r.hasOld)
			}
		})
	})
	t.Run("PMem", func(t *testing.T) {
		pmem := pmemPath(t)
		cargs := []string{pmem, "24576"}
		var prev *helloRun
		forPairs(t, func(t *testing.T, p pair) {
			first := runHello(t, name, p, []string{pmem, "on"}, cargs, nil, []string{flushPersistent})
			checkHelloChain(t, prev, first)
			second := runHello(t, name, p, []string{pmem}, cargs, nil, []string{flushVisibility})
			checkHelloChain(t, &first, second)
			prev = &second
		})
	})
}

// atomicWriteRun runs 07-atomic-write, appending words, and returns
// where the client found the log's end and what the server printed.
func atomicWriteRun(t testing.TB, p pair, serverArgs []string, words ...string) (used uint64, log string) {
	t.Helper()
	s, cs := runExample(t, example{name: "07-atomic-write", pair: p, serverArgs: serverArgs, clientArgs: words})
	t.Logf("server %v:\n%sclient %v:\n%s", serverArgs, s.out.String(), words, cs[0].out.String())
	v := mustValue(t, cs[0], "used value: ")
	used, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("used value %q: %v", v, err)
	}
	log = s.out.String()
	entries := strings.Join(words, "\n") + "\n"
	if !strings.HasSuffix(log, entries) {
		t.Errorf("the server's log %q does not end with the entries %q", log, entries)
	}
	// The log's data starts after the 8-byte signature and the 8-byte
	// end; the server prints it to the end, the client's words
	// included.
	if want := int(used) - 16 + len(entries); len(log) != want {
		t.Errorf("the server printed %d bytes of log, want %d (the client found the end at %d)", len(log), want, used)
	}
	return used, log
}

// TestExample07AtomicWrite: the client appends words to the server's
// log, moving its end with atomic writes; on PMem the log outlives the
// server.
func TestExample07AtomicWrite(t *testing.T) {
	t.Run("DRAM", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			used, log := atomicWriteRun(t, p, nil, "1st_word", "2nd_word", "3rd_word")
			if used != 16 || log != "1st_word\n2nd_word\n3rd_word\n" {
				t.Errorf("on DRAM: the log ended at %d (want 16), the server printed %q", used, log)
			}
		})
	})
	t.Run("PMem", func(t *testing.T) {
		pmem := pmemPath(t)
		// Each run appends to the log the runs before it left, whichever
		// pair ran them.
		var prevUsed uint64
		var prevLog, prevEntries string
		for i, p := range pairs {
			t.Run(p.String(), func(t *testing.T) {
				for _, words := range [][]string{{"1st_word", "2nd_word", "3rd_word"}, {"4th_word"}} {
					used, log := atomicWriteRun(t, p, []string{pmem}, words...)
					if i > 0 || len(words) == 1 {
						if want := prevUsed + uint64(len(prevEntries)); used != want {
							t.Errorf("the client found the end at %d, want %d", used, want)
						}
						if want := prevLog + strings.Join(words, "\n") + "\n"; log != want {
							t.Errorf("the server printed %q, want %q", log, want)
						}
					}
					prevUsed, prevLog, prevEntries = used, log, strings.Join(words, " ")+" "
				}
			})
		}
	})
}

// The names the clients of 06 pick by their seeds, as C's rand picks
// them (glibc's srand and rand).
var nameSeeds = []struct{ seed, name string }{{"8", "Chet"}, {"9", "Piotr"}, {"11", "Piotr"}, {"12", "Lukasz"}}

// testMultipleConnections runs a 06 server with the clients of
// run-all-examples.sh one after another, then the same clients all at
// once, and checks that it read every client's name and ended by
// itself when nothing happened for 15 s.
func testMultipleConnections(t testing.TB, name string, p pair) {
	testenv.NeedFabric(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	port := fmt.Sprint(nextPort.Add(1))
	server := p.start(t, ctx, "server", name, "server", serverAddr, port)
	server.waitFor(t, listening, 30*time.Second)
	client := func(i int, seed string) *proc {
		return p.start(t, ctx, fmt.Sprintf("client %d (seed %s)", i, seed), name, "client", serverAddr, port, seed)
	}
	want := map[string]int{}
	for i, s := range nameSeeds {
		c := client(i, s.seed)
		c.wait(t, 0)
		c.expect(t, "My names is: "+s.name+"\n")
		want[s.name]++
	}
	var cs []*proc
	for i, s := range nameSeeds {
		cs = append(cs, client(len(nameSeeds)+i, s.seed))
		want[s.name]++
	}
	for i, c := range cs {
		c.wait(t, 0)
		c.expect(t, "My names is: "+nameSeeds[i].name+"\n")
	}
	server.wait(t, 0)
	t.Logf("server:\n%s", server.out.String())
	server.expect(t, "Today I have got in touch with:\n")
	got := map[string]int{}
	for l := range strings.Lines(server.out.String()) {
		if n, ok := strings.CutPrefix(l, "- "); ok {
			got[strings.TrimSuffix(n, "\n")]++
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("the server got in touch with %v, want %v", got, want)
	}
	if !strings.Contains(server.err.String(), "Server timed out.\n") {
		t.Errorf("the server did not say it timed out:\n%s", server.err.String())
	}
}

// TestExample06MultipleConnections: one server, many clients, each
// connection waited on by its own CQ's channel.
func TestExample06MultipleConnections(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) { testMultipleConnections(t, "06-multiple-connections", p) })
}

// TestExample06scchMultipleConnections: 06 with each connection's CQs on
// one shared completion channel.
func TestExample06scchMultipleConnections(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) { testMultipleConnections(t, "06scch-multiple-connections", p) })
}

// TestExampleLog: the log example, which takes no arguments, lives in
// the folder beside the examples' (make examples puts it there, out of
// TestExampleUsage's way). It needs no device. Its worker makes rpma
// log an INFO and a DEBUG message twice: with the default logger (the
// auxiliary threshold's lines on stderr, once each), then with a logger
// of its own only.
func TestExampleLog(t *testing.T) {
	dir := os.Getenv("PURERDMA_EXAMPLES_BIN")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "examples")
	}
	path, err := filepath.Abs(filepath.Clean(dir) + "-noargs/log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (run `make examples`)", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	p := start(t, ctx, "log", path)
	p.wait(t, 0)
	t.Logf("stdout:\n%s\nstderr:\n%s", p.out.String(), p.err.String())
	p.expect(t, "Let's write messages to stderr\n",
		"Let's use custom log function to write messages to stderr\nNo message should be written to the default slog logger\n")
	stderr := p.err.String()
	const (
		infoMsg  = "Direct Write To PMem is supported"
		debugMsg = "new RemoteMR {addr=0x7f0000001000, size=720401, rkey=0x102, usage=READ_SRC|WRITE_DST}"
	)
	for _, c := range []struct {
		what string
		n    int
	}{
		{" INFO: ", 1}, {"rpma.PeerCfgFromDescriptor: " + infoMsg + "\n", 1}, // the auxiliary threshold's lines
		{" DEBUG: ", 1}, {"rpma.RemoteMRFromDescriptor: " + debugMsg + "\n", 1},
		{"rpma_level=", 0},             // once each: not again through slog's default handler
		{"Custom log handling: \n", 2}, // the program's own logger
		{"level: 4 " + infoMsg + "\n", 1},
		{"level: 5 " + debugMsg + "\n", 1},
	} {
		if n := strings.Count(stderr, c.what); n != c.n {
			t.Errorf("stderr has %q %d times, want %d", c.what, n, c.n)
		}
	}
}

// TestExampleFailureStatus: a failing example exits with its C
// original's status: -1 (255) for its own failures, -2 (254) for any
// failure of 07's sides, a librpma error code's low byte where C
// returns the code (RPMA_E_PROVIDER, -100002: 94).
func TestExampleFailureStatus(t *testing.T) {
	testenv.Devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	port := fmt.Sprint(nextPort.Add(1)) // nothing listens there
	const missing = "/nonexistent/pmem"
	for _, c := range []struct {
		name, side string
		args       []string // after <addr> <port>
		addr       string   // serverAddr if empty
		status     int
		stderr     string
	}{
		// Rejected: no server.
		{name: "02-read-to-volatile", side: "client", status: 255, stderr: "unexpected event: Connection rejected"},
		{name: "07-atomic-write", side: "client", args: []string{"word"}, status: 254, stderr: "unexpected event: Connection rejected"},
		// No route to the address: rpma_utils_get_ibv_context fails.
		{name: "02-read-to-volatile", side: "client", addr: "198.18.0.99", status: 94},
		// No PMem at the path.
		{name: "03-read-to-persistent", side: "server", args: []string{missing}, status: 255, stderr: missing},
		{name: "04-write-to-persistent", side: "server", args: []string{missing}, status: 255, stderr: missing},
		{name: "05-flush-to-persistent", side: "client", args: []string{missing}, status: 255, stderr: missing},
		{name: "07-atomic-write", side: "server", args: []string{missing}, status: 254, stderr: missing},
		// Numbers too large for strtoul.
		{name: "03-read-to-persistent", side: "client", args: []string{missing, "18446744073709551616"}, status: 255,
			stderr: "strtoul(18446744073709551616) overflowed"},
		{name: "06-multiple-connections", side: "client", args: []string{"18446744073709551616"}, status: 255,
			stderr: "strtoul(seed) overflowed"},
	} {
		addr := cmp.Or(c.addr, serverAddr)
		p := start(t, ctx, c.name+"-"+c.side, binary(t, c.name, c.side), append([]string{addr, port}, c.args...)...)
		p.wait(t, c.status)
		if !strings.Contains(p.err.String(), c.stderr) {
			t.Errorf("%s %v: stderr lacks %q:\n%s", p.name, c.args, c.stderr, p.err.String())
		}
	}
}
