package provider

import (
	"errors"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
)

// TestCopyInlineFault: inline data at an address with no mapping is an
// error; readable data is copied.
func TestCopyInlineFault(t *testing.T) {
	mem, err := sys.MmapAnon(4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "inline")
	addr := uint64(sys.PointerTo(mem))
	dst := make([]byte, 64)
	if n, err := CopyInline(dst, []SGE{{Addr: addr, Length: 6}}); n != 6 || err != nil || string(dst[:6]) != "inline" {
		t.Fatalf("CopyInline of mapped memory = %d, %v, %q", n, err, dst[:6])
	}
	sgl := []SGE{{Addr: addr, Length: 6}}
	if allocs := testing.AllocsPerRun(100, func() { CopyInline(dst, sgl) }); allocs != 0 {
		t.Errorf("CopyInline allocates %v times", allocs)
	}
	if err := sys.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	_, err = CopyInline(dst, []SGE{{Addr: addr, Length: 6}, {Addr: addr + 100, Length: 8}})
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "no readable memory") {
		t.Errorf("CopyInline of unmapped memory = %v, want EINVAL", err)
	}
	// One entry (CopyInline's path without the loop) names entry 0.
	_, err = CopyInline(dst, []SGE{{Addr: addr + 8, Length: 4}})
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "inline data of entry 0") {
		t.Errorf("CopyInline of one unmapped entry = %v, want EINVAL naming entry 0", err)
	}
	// The goroutine's fault setting is what it was before (off) after
	// the faults and the copies.
	if debug.SetPanicOnFault(false) {
		t.Error("CopyInline left the goroutine's SetPanicOnFault on")
	}
}
