package testutils

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// SoakEnv turns the soak tests on: they run only with PURERDMA_SOAK=1
// (make soak), never in make test.
const SoakEnv = "PURERDMA_SOAK"

// Soak skips a soak test unless PURERDMA_SOAK=1. With it set, the test
// needs at least devices RDMA devices and fails, not skips, when there
// are fewer: a soak run that found no device must not pass.
func Soak(t testing.TB, devices int) {
	t.Helper()
	if os.Getenv(SoakEnv) != "1" {
		t.Skip("a soak test: make soak runs it (" + SoakEnv + "=1)")
	}
	ents, err := os.ReadDir("/sys/class/infiniband_verbs")
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "uverbs") {
			n++
		}
	}
	if n < devices {
		t.Fatalf("%s=1: the soak needs %d RDMA devices, found %d (%v); run it in the VM: make soak", SoakEnv, devices, n, err)
	}
}

// Usage is what a soak test compares before and after its cycles.
type Usage struct {
	FDs        int
	Goroutines int
	RSS        int64                     // bytes, VmRSS after a GC that returned what it could to the OS
	Heap       uint64                    // bytes of live Go heap objects after that GC (for the logs)
	Resources  map[string]map[string]int // per RDMA device, the kernel's object counts (rdma res: pd, cq, qp, cm_id, mr, ctx, srq)
}

func (u Usage) String() string {
	return fmt.Sprintf("%d fds, %d goroutines, RSS %.1f MiB, Go heap %.2f MiB, kernel objects %v",
		u.FDs, u.Goroutines, float64(u.RSS)/(1<<20), float64(u.Heap)/(1<<20), u.Resources)
}

// MeasureUsage collects the Usage of the process now.
func MeasureUsage(t testing.TB) Usage {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	fds, err := openFDs()
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Usage{FDs: len(fds), Goroutines: runtime.NumGoroutine(), RSS: rss(t), Heap: ms.HeapAlloc, Resources: resources(t)}
}

// CheckUsage fails t unless now is back at base: the same descriptors,
// goroutines and kernel objects, and an RSS at most rssGrowth bytes
// above base. Goroutines that are ending get a second to go.
func CheckUsage(t testing.TB, what string, base, now Usage, rssGrowth int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); now.Goroutines != base.Goroutines && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		now.Goroutines = runtime.NumGoroutine()
	}
	if now.FDs != base.FDs {
		t.Errorf("%s: %d open file descriptors, %d before", what, now.FDs, base.FDs)
	}
	if now.Goroutines != base.Goroutines {
		t.Errorf("%s: %d goroutines, %d before", what, now.Goroutines, base.Goroutines)
	}
	if diff := cmp.Diff(base.Resources, now.Resources); diff != "" {
		t.Errorf("%s: kernel objects (rdma res) not back to the baseline (-before +after):\n%s", what, diff)
	}
	if g := now.RSS - base.RSS; g > rssGrowth {
		t.Errorf("%s: RSS grew %.1f MiB (%.1f to %.1f), more than %.1f MiB", what,
			float64(g)/(1<<20), float64(base.RSS)/(1<<20), float64(now.RSS)/(1<<20), float64(rssGrowth)/(1<<20))
	}
}

// rss reads VmRSS from /proc/self/status.
func rss(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// resources runs `rdma -j res` (iproute2) and returns each device's
// counts.
func resources(t testing.TB) map[string]map[string]int {
	t.Helper()
	out, err := exec.Command("rdma", "-j", "res").Output()
	if err != nil {
		t.Fatalf("rdma -j res: %v (the soak reads the kernel's object counts with iproute2's rdma tool)", err)
	}
	var devs []map[string]any
	if err := json.Unmarshal(out, &devs); err != nil {
		t.Fatalf("rdma -j res: %v: %s", err, out)
	}
	res := make(map[string]map[string]int)
	for _, d := range devs {
		name, _ := d["ifname"].(string)
		counts := make(map[string]int)
		for k, v := range d {
			if n, ok := v.(float64); ok && k != "ifindex" {
				counts[k] = int(n)
			}
		}
		res[name] = counts
	}
	return res
}
