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

// TestTryCopy: readable memory is copied and reported so; memory of no
// mapping is reported unreadable, with the goroutine's fault setting
// back to what it was (off, and on when it was on); it allocates nothing.
func TestTryCopy(t *testing.T) {
	mem, err := sys.MmapAnon(4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "inline")
	addr := uint64(sys.PointerTo(mem))
	dst := make([]byte, 6)
	if !TryCopy(dst, addr) || string(dst) != "inline" {
		t.Fatalf("TryCopy of mapped memory: %q", dst)
	}
	if allocs := testing.AllocsPerRun(100, func() { TryCopy(dst, addr) }); allocs != 0 {
		t.Errorf("TryCopy allocates %v times", allocs)
	}
	if err := sys.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if TryCopy(dst, addr) {
		t.Error("TryCopy of unmapped memory reported a copy")
	}
	if debug.SetPanicOnFault(true) {
		t.Error("TryCopy left the goroutine's SetPanicOnFault on")
	}
	if TryCopy(dst, addr+8) {
		t.Error("TryCopy of unmapped memory reported a copy")
	}
	if !debug.SetPanicOnFault(false) {
		t.Error("TryCopy turned off a SetPanicOnFault that was on")
	}
}

// TestDropFault: what TryCopy's deferred function does with what it
// recovered: nothing (Goexit) and a memory fault end there, any other
// panic goes on; the fault setting is restored either way.
func TestDropFault(t *testing.T) {
	dropFault(false, nil)
	dropFault(false, faultLike{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("dropFault of another panic: recovered %v, want it passed on", r)
			}
		}()
		debug.SetPanicOnFault(true)
		dropFault(false, "boom")
	}()
	if debug.SetPanicOnFault(false) {
		t.Error("dropFault did not restore the fault setting")
	}
}

// faultLike is what a memory fault's panic value has: an Addr method.
type faultLike struct{}

func (faultLike) Addr() uintptr { return 1 }
