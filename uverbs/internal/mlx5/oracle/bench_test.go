package oracle

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/uverbs"
)

// benchKinds are the requests whose posts scripts/bench-mlx5 counts.
var benchKinds = []struct{ name, wr string }{
	{"send", "wr send 1 signaled 0:0:64"},
	{"send_inline", "wr send 1 signaled,inline 0:0:32"},
	{"send_imm", "wr send_imm 1 signaled 0:0:64 imm=7"},
	{"write", "wr write 1 signaled 0:0:64 raddr=1:0"},
	{"write_inline", "wr write 1 signaled,inline 0:0:32 raddr=1:0"},
	{"send_inline_nokey", "wr send 1 signaled,inline 0:0:32:0"},
	{"write_inline_nokey", "wr write 1 signaled,inline 0:0:32:0 raddr=1:0"},
	{"read", "wr read 1 signaled 0:0:64 raddr=1:0"},
	{"cas", "wr cas 1 signaled 0:0:8 raddr=1:0 cmp=1 swap=2"},
	{"faa", "wr faa 1 signaled 0:0:8 raddr=1:0 add=1"},
}

// benchScenario posts each kind of request n times, each completed by
// the device, polled, and polled again on an empty CQ.
func benchScenario(n int) string {
	var b strings.Builder
	b.WriteString(base + "cq 256\nqp RC 0 0 - 64 16 1 1 64 0\nrts 0 RC\n")
	for _, k := range benchKinds {
		fmt.Fprintf(&b, "%s\nbench 0 0 %d %s\n", k.wr, n, k.name)
	}
	return b.String()
}

// TestBenchScenario runs the benchmark's scenario briefly on both sides,
// with locks and without (libmlx5 single-threaded, uverbs' CQ and QP in a
// thread domain, whose polls go through mlx5's door in uverbs): the
// verbs' results must agree, as in TestAgainstLibmlx5.
func TestBenchScenario(t *testing.T) {
	testutils.HostOnly(t)
	script := benchScenario(70) // wraps the 64-entry send queue
	bin := buildC(t)
	for _, td := range []string{"0", "1"} {
		t.Run("td="+td, func(t *testing.T) {
			t.Setenv("PURERDMA_ORACLE_BENCH_TD", td)
			cOut, _ := runC(t, bin, script)
			goOut, _ := runGo(t, script)
			if d := cmp.Diff(cOut, goOut); d != "" {
				t.Errorf("(-libmlx5 +uverbs):\n%s", d)
			}
		})
	}
}

// TestCallgrindC and TestCallgrindGo are scripts/bench-mlx5's: they run
// the benchmark scenario, the C driver under callgrind or this process
// under it. They skip unless the script sets PURERDMA_ORACLE_BENCH.
func TestCallgrindC(t *testing.T) {
	if os.Getenv("PURERDMA_ORACLE_BENCH") == "" {
		t.Skip("scripts/bench-mlx5 runs this under callgrind")
	}
	runC(t, buildC(t), benchScenario(2000))
}

func TestCallgrindGo(t *testing.T) {
	if os.Getenv("PURERDMA_ORACLE_BENCH") == "" {
		t.Skip("scripts/bench-mlx5 runs this under callgrind")
	}
	runGo(t, benchScenario(2000))
}

// TestNoAllocations: posting and polling through the mlx5 provider on
// the scripted device allocate nothing.
func TestNoAllocations(t *testing.T) {
	testutils.HostOnly(t)
	const runs = 50
	script := base + "cq 512\nqp RC 0 0 - 512 16 1 1 64 0\nrts 0 RC\n"
	d := newDevice(procMem{})
	r, cleanup := startGo(t, d)
	defer cleanup()
	for _, l := range strings.Split(script, "\n") {
		if err := r.line(l); err != nil {
			t.Fatal(err)
		}
	}
	qp, cq := r.qps[0], r.cqs[0]
	for _, k := range benchKinds {
		if err := r.line(k.wr); err != nil {
			t.Fatal(err)
		}
		wr := r.swr[0]
		r.swr = nil
		wr.Flags &^= uverbs.SendSignaled
		if k.name == "read" {
			continue // the send queue holds 512; a read takes write's path
		}
		if n := testing.AllocsPerRun(runs, func() {
			if err := qp.PostSend(wr); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("post %s: %v allocations", k.name, n)
		}
		// retire the unsignaled requests with one signaled one
		sig := *wr
		sig.Flags |= uverbs.SendSignaled
		if err := qp.PostSend(&sig); err != nil {
			t.Fatal(err)
		}
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if n := testing.AllocsPerRun(runs, func() { cq.Poll(wc) }); n != 0 {
		t.Errorf("empty poll: %v allocations", n)
	}
	// Five completions: one for everything posted so far, then one
	// each for four more signaled sends.
	if err := r.d.step("dev cqe cq=0 qp=0 op=req wqe=last"); err != nil {
		t.Fatal(err)
	}
	send := &uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	for range 4 {
		if err := qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
		if err := r.d.step("dev cqe cq=0 qp=0 op=req wqe=last"); err != nil {
			t.Fatal(err)
		}
	}
	hits := 0
	if n := testing.AllocsPerRun(4, func() {
		if k, _ := cq.Poll(wc); k == 1 {
			hits++
		}
	}); n != 0 {
		t.Errorf("poll with a completion: %v allocations", n)
	}
	if hits != 5 {
		t.Errorf("polled %d completions, want 5", hits)
	}
}
