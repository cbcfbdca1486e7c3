package uverbs

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
)

// VMFlags returns the VmFlags of the mapping that holds addr, from
// /proc/self/smaps ("dc" is VM_DONTCOPY, set by MADV_DONTFORK). Exported
// for the package's external tests.
func VMFlags(addr uint64) ([]string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := smapsRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			return strings.Fields(rest), nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no mapping holds %#x", addr)
}

// smapsRange parses the "start-end perms ..." header line of a mapping.
func smapsRange(line string) (lo, hi uint64, ok bool) {
	field, _, _ := strings.Cut(line, " ")
	a, b, found := strings.Cut(field, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(a, 16, 64)
	hi, err2 := strconv.ParseUint(b, 16, 64)
	return lo, hi, err1 == nil && err2 == nil
}

// dontCopy reports whether the page at addr is marked MADV_DONTFORK.
func dontCopy(t *testing.T, addr uint64) bool {
	t.Helper()
	flags, err := VMFlags(addr)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(flags, "dc")
}

func TestAllocBuffer(t *testing.T) {
	ps := os.Getpagesize()
	for _, size := range []int{1, ps - 1, ps, ps + 1, 3*ps + 17} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			b, err := AllocBuffer(size)
			if err != nil {
				t.Fatal(err)
			}
			mem := b.Bytes()
			if len(mem) != size || cap(mem) != size || b.Len() != size {
				t.Errorf("len %d cap %d Len %d, want %d", len(mem), cap(mem), b.Len(), size)
			}
			if addr := uint64(sys.PointerTo(mem)); addr%uint64(ps) != 0 {
				t.Errorf("address %#x is not page aligned", addr)
			}
			for i, v := range mem {
				if v != 0 {
					t.Fatalf("byte %d = %d, want zeroed memory", i, v)
				}
			}
			mem[0], mem[size-1] = 1, 2 // writable
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if b.Bytes() != nil {
				t.Error("Bytes after Close is not nil")
			}
			if err := b.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
		})
	}
}

func TestAllocBufferSize(t *testing.T) {
	for _, size := range []int{0, -1, int(^uint(0) >> 1)} {
		if b, err := AllocBuffer(size); err == nil {
			b.Close()
			t.Errorf("AllocBuffer(%d) succeeded", size)
		}
	}
}

// TestMapFile: the mapping is the file's contents both ways, it outlives
// the *os.File, and Close unmaps it.
func TestMapFile(t *testing.T) {
	ps := os.Getpagesize()
	f, err := os.CreateTemp(t.TempDir(), "map")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("written before the mapping")
	if _, err := f.WriteAt(want, int64(ps)); err != nil {
		t.Fatal(err)
	}
	size := 2*ps + 100
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	b, err := MapFile(f, size)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != size || b.Len() != size {
		t.Errorf("len %d Len %d, want %d", len(mem), b.Len(), size)
	}
	if addr := uint64(sys.PointerTo(mem)); addr%uint64(ps) != 0 {
		t.Errorf("address %#x is not page aligned", addr)
	}
	if got := string(mem[ps : ps+len(want)]); got != string(want) {
		t.Errorf("mapping holds %q, the file %q", got, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	copy(mem[size-5:], "tail!") // stores reach the file, after its fd is closed
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if string(got[size-5:]) != "tail!" {
		t.Errorf("file ends %q after a store through the mapping, want tail!", got[size-5:])
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

// TestMapFileBadInput: sizes beyond the file, non-positive sizes and a
// closed file are refused before anything is mapped.
func TestMapFileBadInput(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "map")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, -1, 4097} {
		if b, err := MapFile(f, size); !errors.Is(err, syscall.EINVAL) {
			if err == nil {
				b.Close()
			}
			t.Errorf("MapFile(%d bytes of 4096) = %v, want EINVAL", size, err)
		}
	}
	f.Close()
	if b, err := MapFile(f, 4096); err == nil {
		b.Close()
		t.Error("MapFile of a closed file succeeded")
	}
}

// TestBufferBusy: a registration on a Buffer (or on part of it) keeps it
// open; memory outside any Buffer is not counted.
func TestBufferBusy(t *testing.T) {
	ps := os.Getpagesize()
	b, err := AllocBuffer(2 * ps)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	addr := uint64(sys.PointerTo(mem))
	if got := buffers.use(addr+10, 100); got != b {
		t.Fatalf("use of a part = %p, want %p", got, b)
	}
	if got := buffers.use(addr, uint64(len(mem))); got != b {
		t.Fatalf("use of all = %p, want %p", got, b)
	}
	if got := buffers.use(addr+uint64(ps), uint64(2*ps)); got != nil {
		t.Errorf("use of a range past the end = %p, want nil", got)
	}
	heap := make([]byte, 100)
	if got := buffers.use(uint64(sys.PointerTo(heap)), 100); got != nil {
		t.Errorf("use of heap memory = %p, want nil", got)
	}
	if err := b.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Close while used = %v, want EBUSY", err)
	}
	if b.Bytes() == nil {
		t.Fatal("a refused Close unmapped the buffer")
	}
	b.release()
	if err := b.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Close while used once = %v, want EBUSY", err)
	}
	b.release()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := buffers.use(addr, 1); got != nil {
		t.Errorf("use after Close = %p, want nil", got)
	}
}

// TestBufferLeakKeepsMapping: a Buffer dropped without Close while a
// slice of it is still in use is reported as leaked, and its memory stays
// mapped: the slice keeps working. (The GC cleanup used to unmap it,
// and the next use of the slice crashed the process.)
func TestBufferLeakKeepsMapping(t *testing.T) {
	var logged lockedLog
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(old)
	before := buffersLeaked.Load()
	mem := func() []byte {
		b, err := AllocBuffer(4096)
		if err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()
	mem[0] = 1
	addr := uint64(sys.PointerTo(mem))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logged.String(), fmt.Sprintf("%#x", addr)) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning naming the unreachable Buffer at %#x; log: %q", addr, logged.String())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logged.String(), "was not closed") {
		t.Errorf("the warning does not say what happened: %q", logged.String())
	}
	if buffersLeaked.Load() == before {
		t.Error("the leak was not counted")
	}
	if _, err := VMFlags(addr); err != nil {
		t.Fatalf("the leaked Buffer's memory is gone: %v", err)
	}
	for i := range mem { // faults if it was unmapped
		mem[i] = byte(i)
	}
	if mem[4095] != byte(4095%256) || mem[0] != 0 {
		t.Errorf("leaked memory reads back %d %d", mem[0], mem[4095])
	}
	// The test leaks it on purpose: unmap it so the process does not.
	if err := sys.Munmap(mem[:4096:4096]); err != nil {
		t.Fatal(err)
	}
}

// lockedLog collects log output written from the cleanup goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDontForkOnBuffer runs the real madvise calls on Buffer memory and
// checks the kernel's view in smaps: overlapping ranges are counted per
// page.
func TestDontForkOnBuffer(t *testing.T) {
	ps := uint64(os.Getpagesize())
	b, err := AllocBuffer(int(4 * ps))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	base := uint64(sys.PointerTo(b.Bytes()))
	page := func(i uint64) uint64 { return base + i*ps }
	want := func(marked ...bool) {
		t.Helper()
		for i, m := range marked {
			if got := dontCopy(t, page(uint64(i))); got != m {
				t.Errorf("page %d: dc = %v, want %v", i, got, m)
			}
		}
	}
	var f forkRanges
	// Page 1 and part of page 2.
	if err := f.protect(page(1)+100, ps+10); err != nil {
		t.Fatal(err)
	}
	want(false, true, true, false)
	// Pages 2 and 3, overlapping page 2.
	if err := f.protect(page(2), 2*ps); err != nil {
		t.Fatal(err)
	}
	want(false, true, true, true)
	if err := f.release(page(1)+100, ps+10); err != nil {
		t.Fatal(err)
	}
	want(false, false, true, true)
	if err := f.release(page(2), 2*ps); err != nil {
		t.Fatal(err)
	}
	want(false, false, false, false)
	if len(f.spans) != 0 {
		t.Errorf("spans left: %v", f.spans)
	}
}
