package uverbs

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
)

// TestCopyInlineFault: inline data at an address with no mapping is an
// error; readable data is copied.
func TestCopyInlineFault(t *testing.T) {
	b, err := AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Bytes(), "inline")
	addr := uint64(sys.PointerTo(b.Bytes()))
	dst := make([]byte, 64)
	if n, err := copyInline(dst, []SGE{{Addr: addr, Length: 6}}); n != 6 || err != nil || string(dst[:6]) != "inline" {
		t.Fatalf("copyInline of mapped memory = %d, %v, %q", n, err, dst[:6])
	}
	sgl := []SGE{{Addr: addr, Length: 6}}
	if allocs := testing.AllocsPerRun(100, func() { copyInline(dst, sgl) }); allocs != 0 {
		t.Errorf("copyInline allocates %v times", allocs)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = copyInline(dst, []SGE{{Addr: addr, Length: 6}, {Addr: addr + 100, Length: 8}})
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "no readable memory") {
		t.Errorf("copyInline of unmapped memory = %v, want EINVAL", err)
	}
}
