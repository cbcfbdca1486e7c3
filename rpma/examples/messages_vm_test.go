package examples_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// valueOf is what follows prefix on the line of out that starts with
// it; a missing line fails the test.
func valueOf(t testing.TB, p *proc, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(p.out.String(), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	t.Fatalf("%s printed no line starting with %q:\n%s\nstderr:\n%s", p.name, prefix, p.out.String(), p.err.String())
	return ""
}

var translation = map[string]string{"Hello world!": "¡Hola Mundo!", "¡Hola Mundo!": "Hello world!"}

// The ping-pong examples as librpma's run-all-examples.sh runs them:
// seed 7, 3 rounds.

func TestExample08MessagesPingPong(t *testing.T) {
	// C's client loops while (--rounds): 3 rounds are 2 exchanges.
	forPairs(t, func(t *testing.T, p pair) {
		s, _ := runExample(t, example{name: "08-messages-ping-pong", pair: p,
			clientArgs: []string{"7", "3"},
			serverOut:  []string{"Value received: 7\n", "Value sent: 8\n", "Value received: 8\n", "Value sent: 9\n"},
			clientOut:  []string{"Value sent: 7\n", "Value received: 8\n", "Value sent: 8\n", "Value received: 9\n"}})
		noLine(t, s, "Value received: 9\n")
	})
}

// noLine fails the test if p printed line.
func noLine(t testing.TB, p *proc, line string) {
	t.Helper()
	if strings.Contains(p.out.String(), line) {
		t.Errorf("%s printed %q:\n%s", p.name, line, p.out.String())
	}
}

// TestExample08srqSimpleMessagesPingPongWithSRQ: receives from the
// SRQ's receive CQ (no argument), the connection's main CQ (m) and its
// separate receive CQ (r); the client's do-while makes 3 exchanges.
func TestExample08srqSimpleMessagesPingPongWithSRQ(t *testing.T) {
	for _, mode := range []string{"", "m", "r"} {
		t.Run("rcq="+mode, func(t *testing.T) {
			var args []string
			if mode != "" {
				args = []string{mode}
			}
			forPairs(t, func(t *testing.T, p pair) {
				runExample(t, example{name: "08srq-simple-messages-ping-pong-with-srq", pair: p,
					serverArgs: args,
					clientArgs: []string{"7", "3"},
					serverOut:  []string{"Value received: 7\n", "Value sent: 8\n", "Value received: 9\n", "Value sent: 10\n"},
					clientOut:  []string{"Value sent: 7\n", "Value received: 8\n", "Value sent: 9\n", "Value received: 10\n"}})
			})
		})
	}
}

// TestExample09FlushToPersistentGPSPM: run09 for both variants.
func TestExample09FlushToPersistentGPSPM(t *testing.T) {
	run09(t, "09-flush-to-persistent-GPSPM")
}

// run09 runs a GPSPM example, with each pair, with DRAM on both sides,
// then twice with the VM's persistent memory on both sides (the
// client's data 4 KiB into the device, clear of the server's), where
// each run finds what the run before it persisted, whichever pair ran
// it: the server's old value is what the client wrote, the client's
// next value its translation.
func run09(t *testing.T, name string) {
	t.Run("DRAM", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			s, c := runExample(t, example{name: name, pair: p,
				serverOut: []string{"Flush request received: {offset: 0x0, length: 0x400, op_context: 0xF01D}\n", "New value: Hello world!\n"},
				clientOut: []string{"Next value: Hello world!\n", "translating...\n", "Translation: ¡Hola Mundo!\n"}})
			for _, p := range []*proc{s, c[0]} {
				if !strings.Contains(p.err.String(), "No <pmem-path> provided. Using DRAM instead.") {
					t.Errorf("%s does not say it uses DRAM:\n%s", p.name, p.err.String())
				}
			}
			if strings.Contains(s.out.String(), "Old value") {
				t.Errorf("the server's DRAM had an old value:\n%s", s.out.String())
			}
		})
	})
	t.Run("PMem", func(t *testing.T) {
		pmem := pmemPath(t)
		var written, next string // by the run before
		run := 0
		forPairs(t, func(t *testing.T, p pair) {
			for range 2 {
				run09PMem(t, name, p, pmem, run, &written, &next)
				run++
			}
		})
	})
}

// flushRequest09 is the line 09's server prints for the PMem chain's
// flush request (the client's data 4 KiB into the device).
const flushRequest09 = "Flush request received: {offset: 0x11, length: 0x400, op_context: 0xF01D}\n"

// run09PMem is run number run (from 0) of a GPSPM example on PMem; the
// runs before it, whichever pair ran them, wrote written and
// translated it to next. A run lost to rxe's unacknowledged last
// message (proc.ackLost) is run again, but not undone: its server
// persisted what its client wrote before it answered, and its client
// translated, so it is checked as a run of the chain, all but the
// server's new value, which its server never printed.
func run09PMem(t testing.TB, name string, p pair, pmem string, run int, written, next *string) {
	t.Helper()
	var lost []exampleRun
	s, c := runExample(t, example{name: name, pair: p,
		serverArgs: []string{pmem},
		clientArgs: []string{pmem, "4096"},
		serverOut:  []string{flushRequest09},
		clientOut:  []string{"translating...\n"},
		ackLost:    &lost})
	for i, r := range lost {
		if !strings.Contains(r.server.out.String(), flushRequest09) {
			t.Errorf("run %d, attempt %d: the server did not print the flush request:\n%s", run+1, i+1, r.server.out.String())
		}
		chain09(t, fmt.Sprintf("run %d, attempt %d", run+1, i+1), run > 0 || i > 0, r.server, r.clients[0], written, next)
	}
	got := chain09(t, fmt.Sprintf("run %d", run+1), run > 0 || len(lost) > 0, s, c[0], written, next)
	if v := valueOf(t, s, "New value: "); v != got {
		t.Errorf("run %d: the server's new value is %q, the client wrote %q", run+1, v, got)
	}
}

// chain09 checks a run of 09's PMem chain, named run, and returns what
// its client wrote: if the chain has a run before it (after), the
// client read what that run translated, next, and the server found
// what it wrote, written; the client's translation is right. It then
// moves written and next on.
func chain09(t testing.TB, run string, after bool, s, c *proc, written, next *string) string {
	t.Helper()
	got := valueOf(t, c, "Next value: ")
	if after && got != *next {
		t.Errorf("%s: the client's next value is %q, want the translation persisted by the run before, %q", run, got, *next)
	}
	if after {
		if v := valueOf(t, s, "Old value: "); v != *written {
			t.Errorf("%s: the server's old value is %q, want the run before's %q", run, v, *written)
		}
	}
	*written, *next = got, valueOf(t, c, "Translation: ")
	if want, ok := translation[got]; !ok || *next != want {
		t.Errorf("%s: %q translated to %q", run, got, *next)
	}
	return got
}

// TestExample09scchFlushToPersistentGPSPM: 09 with a shared completion
// channel.
func TestExample09scchFlushToPersistentGPSPM(t *testing.T) {
	run09(t, "09scch-flush-to-persistent-GPSPM")
}

// TestExample10SendWithImm: a word with immediate data, as
// run-all-examples.sh sends it, and an empty message with immediate
// data.
func TestExample10SendWithImm(t *testing.T) {
	testenv.NotIWARP(t, "the example sends with immediate data, which iWARP does not have (C librpma's post fails the same way on siw)")
	t.Run("word", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			runExample(t, example{name: "10-send-with-imm", pair: p,
				clientArgs: []string{"1234", "1st_word"},
				serverOut:  []string{"Received value '1st_word' with immediate data '1234'\n"},
				clientOut:  []string{"Sending value '1st_word' with immediate data '1234'\n"}})
		})
	})
	t.Run("empty", func(t *testing.T) {
		forPairs(t, func(t *testing.T, p pair) {
			runExample(t, example{name: "10-send-with-imm", pair: p,
				clientArgs: []string{"4294967295"},
				serverOut:  []string{"Received value '' with immediate data '4294967295'\n"},
				clientOut:  []string{"Sending immediate data '4294967295'\n"}})
		})
	})
}

// TestExample11WriteWithImm: as run-all-examples.sh runs it.
func TestExample11WriteWithImm(t *testing.T) {
	testenv.NotIWARP(t, "the example writes with immediate data, which iWARP does not have (C librpma's post fails the same way on siw)")
	forPairs(t, func(t *testing.T, p pair) {
		runExample(t, example{name: "11-write-with-imm", pair: p,
			clientArgs: []string{"1234"},
			serverOut:  []string{"The value '1234' was written together with immediate data '1234'\n"},
			clientOut:  []string{"Writing value '1234' with immediate data '1234'\n"}})
	})
}

// TestExample12ReceiveCompletionQueue: start value 7, 3 rounds (2
// exchanges, as 08).
func TestExample12ReceiveCompletionQueue(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) { run12(t, "12-receive-completion-queue", p) })
}

func run12(t testing.TB, name string, p pair) {
	s, _ := runExample(t, example{name: name, pair: p,
		clientArgs: []string{"7", "3"},
		serverOut:  []string{"SERVER: Value received: 7\n", "SERVER: Value sent: 8\n", "SERVER: Value received: 8\n", "SERVER: Value sent: 9\n"},
		clientOut:  []string{"CLIENT: Value sent: 7\n", "CLIENT: Value received: 8\n", "CLIENT: Value sent: 8\n", "CLIENT: Value received: 9\n"}})
	noLine(t, s, "SERVER: Value received: 9\n")
}

// TestExample12scchReceiveCompletionQueue: 12 with a shared completion
// channel.
func TestExample12scchReceiveCompletionQueue(t *testing.T) {
	forPairs(t, func(t *testing.T, p pair) { run12(t, "12scch-receive-completion-queue", p) })
}

// TestExample13MessagesPingPongWithSRQ: three clients at once, as
// run-all-examples.sh runs them (seeds 1, 5 and 10, 3 rounds each),
// the server listening until 10 s pass without a request (the script
// gives 3: a C client, which loads libibverbs' providers, took longer
// than that to connect on the loaded 6.12 VM, and a request that comes
// after the server stopped listening is rejected). Each client gets
// its own counter back, and the server answers each client's messages
// on that client's connection.
func TestExample13MessagesPingPongWithSRQ(t *testing.T) {
	forPairs(t, test13)
}

func test13(t *testing.T, p pair) {
	const name = "13-messages-ping-pong-with-srq"
	testenv.NeedFabric(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	port := fmt.Sprint(nextPort.Add(1))
	server := p.start(t, ctx, "server", name, "server", serverAddr, port, "10")
	server.waitFor(t, listening, 30*time.Second)
	seeds := []int{1, 5, 10}
	var clients []*proc
	for i, seed := range seeds {
		clients = append(clients, p.start(t, ctx, fmt.Sprintf("client %d", i), name, "client", serverAddr, port, fmt.Sprint(seed), "3"))
	}
	for i, c := range clients {
		c.wait(t, 0)
		pid, seed := c.cmd.Process.Pid, seeds[i]
		for k := range 3 {
			c.expect(t, fmt.Sprintf("[client #%d] value sent: %d\n", pid, seed+k), fmt.Sprintf("[client #%d] value received: %d\n", pid, seed+k+1))
		}
	}
	server.wait(t, 0)
	server.expect(t, "The client #3 has been connected.\n", "Server ended listening.\n")

	// value -> the QP it came in on, and went back on.
	qp := map[string]string{}
	for _, m := range regexp.MustCompile(`\[server\] value (received|sent): (\d+) from the connection \[qp#(\d+)\]\n`).FindAllStringSubmatch(server.out.String(), -1) {
		qp[m[1]+" "+m[2]] = m[3]
	}
	used := map[string]bool{}
	for _, seed := range seeds {
		q := qp[fmt.Sprint("received ", seed)]
		for k := range 3 {
			if r, s := qp[fmt.Sprint("received ", seed+k)], qp[fmt.Sprint("sent ", seed+k+1)]; r == "" || r != q || s != q {
				t.Errorf("seed %d, round %d: received on QP %q, sent on %q; want both on %q:\n%s", seed, k, r, s, q, server.out.String())
			}
		}
		if used[q] {
			t.Errorf("two clients on QP %s:\n%s", q, server.out.String())
		}
		used[q] = true
	}
}

// TestExampleMessagesFailures: the examples' exit statuses and messages
// when their arguments or their peers are wrong, as C's: -1 (255) for
// their own failures, and for a librpma failure either -1 (the
// examples that return ret ? -1 : 0) or the librpma code truncated to
// a byte (those that return ret: RPMA_E_PROVIDER, -100002, exits 94).
func TestExampleMessagesFailures(t *testing.T) {
	const noServer = "198.18.0.1" // the VM's address, with nothing listening
	for _, tc := range []struct {
		name    string
		example string
		side    string
		args    []string
		device  bool // needs the VM's devices
		status  int
		stderr  string
	}{
		{"08srq server, bad receive CQ", "08srq-simple-messages-ping-pong-with-srq", "server", []string{noServer, "7999", "x"}, false, 255,
			"The third parameter should be one of m or r (x given)"},
		{"13 server, zero timeout", "13-messages-ping-pong-with-srq", "server", []string{noServer, "7999", "0"}, false, 255,
			"<timeout> should be a positive number of seconds (0 given)"},
		{"13 server, bad timeout", "13-messages-ping-pong-with-srq", "server", []string{noServer, "7999", "five"}, false, 255,
			"<timeout> should be a positive number of seconds (five given)"},
		{"10 client, immediate data too big", "10-send-with-imm", "client", []string{noServer, "7999", "4294967296"}, false, 255,
			"The provided immediate data is too big (4294967296 > 4294967295)"},
		{"11 client, immediate data overflows", "11-write-with-imm", "client", []string{noServer, "7999", "18446744073709551616"}, false, 255,
			"strtoul() overflow"},
		{"08 client, seed overflows", "08-messages-ping-pong", "client", []string{noServer, "7999", "18446744073709551616", "3"}, false, 255,
			"strtoul(18446744073709551616) overflowed"},
		{"12 client, rounds overflow", "12-receive-completion-queue", "client", []string{noServer, "7999", "1", "99999999999999999999"}, false, 255,
			"strtoul(99999999999999999999) overflowed"},
		{"08 client, no server", "08-messages-ping-pong", "client", []string{noServer, "7999", "7", "3"}, true, 255,
			"unexpected event: Connection rejected"},
		{"13 client, no server", "13-messages-ping-pong-with-srq", "client", []string{noServer, "7999", "7", "3"}, true, 255,
			"unexpected event: Connection rejected"},
		{"11 client, no server", "11-write-with-imm", "client", []string{noServer, "7999", "1"}, true, 255,
			"unexpected event: Connection rejected"},
		{"10 server, foreign address", "10-send-with-imm", "server", []string{"192.0.2.1", "7999"}, true, 94, "provider error occurred"},
		{"09 server, missing PMem", "09-flush-to-persistent-GPSPM", "server", []string{noServer, "7999", "/nonexistent/pmem"}, false, 255,
			"/nonexistent/pmem"},
		{"09scch client, PMem too small", "09scch-flush-to-persistent-GPSPM", "client", []string{noServer, "7999", "$EMPTY"}, false, 255,
			"is too small (actual:0 < expected:1045)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.device {
				testenv.Devices(t, 2)
			}
			args := slices.Clone(tc.args)
			if i := slices.Index(args, "$EMPTY"); i >= 0 {
				// An empty file: no room for the signature and the data.
				f, err := os.CreateTemp(t.TempDir(), "pmem")
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				args[i] = f.Name()
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := start(t, ctx, tc.side, binary(t, tc.example, tc.side), args...)
			p.wait(t, tc.status)
			if !strings.Contains(p.err.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, p.err.String())
			}
		})
	}
}
