package uverbs

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/purerdma/rdma/internal/sys"
)

// Buffer is page-aligned memory for registration, mapped outside the Go
// heap (AllocBuffer's anonymous memory, or a file's pages with MapFile):
// the garbage collector never moves or frees it,
// and it shares no page with Go objects, so fork protection (see
// ForkSafety) marks nothing else. Register it with PD.RegBuffer, or pass
// Bytes (or a part of it) to PD.RegMR; either way Close is refused while
// a memory region uses it.
//
// Close the Buffer when done. A Buffer that becomes unreachable without
// Close is leaked, never unmapped behind the caller's back: slices from
// Bytes do not keep the *Buffer reachable (they point outside the heap)
// and may still be in use, so unmapping would turn a leak into a crash.
// The garbage collector's cleanup only reports it: a warning through
// log/slog's default logger, naming the address and size, and a count
// the package's tests read.
//
// Bytes may be used from any goroutine; synchronising access to the
// contents is the caller's business. Close is safe to call concurrently
// and more than once.
type Buffer struct {
	mu     sync.Mutex
	mem    []byte // the whole mapping, nil once closed
	size   int    // what AllocBuffer or MapFile was asked for
	users  atomic.Int32
	leaked runtime.Cleanup
}

// AllocBuffer maps size bytes of zeroed, page-aligned memory. The mapping
// is rounded up to whole pages; Bytes returns exactly size bytes.
func AllocBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("uverbs AllocBuffer: size %d: must be positive: %w", size, errInvalid)
	}
	ps := os.Getpagesize()
	if size > int(^uint(0)>>1)-ps {
		return nil, fmt.Errorf("uverbs AllocBuffer: size %d: too large: %w", size, errInvalid)
	}
	mem, err := sys.MmapAnon((size + ps - 1) &^ (ps - 1))
	if err != nil {
		return nil, fmt.Errorf("uverbs AllocBuffer: %w", err)
	}
	return newBuffer(mem, size), nil
}

// MapFile maps the first size bytes of f, shared read-write, as a
// Buffer: what the memory holds is the file's, and stores reach the file.
// f is a regular file at least size bytes long (a store past its end
// would fault), or a device that can be mapped, such as device DAX
// (/dev/daxN.M) over persistent memory: that mapping is the persistent
// memory itself, which a memory region with AccessFlushPersistent needs
// (rxe refuses that access on ordinary pages, and the kernel refuses to
// pin pages of a DAX file system for a registration: EOPNOTSUPP). f may
// be closed once MapFile returns; the mapping keeps the file open.
func MapFile(f *os.File, size int) (*Buffer, error) {
	if f == nil {
		return nil, errNil("MapFile", "file")
	}
	if size <= 0 {
		return nil, fmt.Errorf("uverbs MapFile: size %d: must be positive: %w", size, errInvalid)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("uverbs MapFile: %w", err)
	}
	if st.Mode().IsRegular() && st.Size() < int64(size) {
		return nil, fmt.Errorf("uverbs MapFile %s: %d bytes, the file has %d: %w", f.Name(), size, st.Size(), errInvalid)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("uverbs MapFile: %w", err)
	}
	var mem []byte
	if cerr := rc.Control(func(fd uintptr) { mem, err = sys.MmapFile(int(fd), size) }); cerr != nil {
		return nil, fmt.Errorf("uverbs MapFile: %w", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs MapFile %s: %w", f.Name(), err)
	}
	return newBuffer(mem, size), nil
}

// newBuffer tracks a fresh mapping of at least size bytes.
func newBuffer(mem []byte, size int) *Buffer {
	b := &Buffer{mem: mem, size: size}
	// A leak report: an unreachable, unclosed Buffer is forgotten and
	// reported, and its memory stays mapped, since slices of it may
	// still be in use. (A memory region keeps its Buffer reachable
	// while it is open.)
	addr := uint64(sys.PointerTo(mem))
	b.leaked = runtime.AddCleanup(b, func(n int) { bufferLeaked(addr, n) }, size)
	buffers.add(b)
	return b
}

// bufferLeaked is the cleanup of a Buffer that became unreachable
// without Close: it forgets it and reports the leak, without unmapping.
func bufferLeaked(addr uint64, size int) {
	buffers.mu.Lock()
	buffers.drop(addr)
	buffers.mu.Unlock()
	buffersLeaked.Add(1)
	slog.Warn("uverbs: a Buffer was not closed; its memory stays mapped (slices of it may be in use): close Buffers when done",
		"addr", fmt.Sprintf("%#x", addr), "size", size)
}

// buffersLeaked counts Buffers that became unreachable without Close
// (their memory stays mapped); tests check it.
var buffersLeaked atomic.Int64

// Bytes is the buffer's memory, or nil after Close. Slices taken from it
// must not be used after Close: the memory is unmapped.
func (b *Buffer) Bytes() []byte {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	return b.mem[:b.size:b.size]
}

// Len is the size AllocBuffer or MapFile was asked for.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.size
}

// Close unmaps the buffer. It fails with EBUSY, and the buffer stays
// usable, while memory regions are registered on it; a second Close
// returns ErrClosed.
func (b *Buffer) Close() error {
	if b == nil {
		return errNil("Buffer.Close", "Buffer")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return fmt.Errorf("uverbs Buffer.Close: %w", ErrClosed)
	}
	// Under buffers' lock, so a concurrent registration either sees the
	// buffer gone or is counted before this check.
	if err := buffers.remove(b); err != nil {
		return err
	}
	b.leaked.Stop()
	err := sys.Munmap(b.mem)
	b.mem = nil
	return err
}

// bufferSet finds the Buffer that holds an address, so that registering a
// slice of a Buffer counts as a use of it. It holds weak pointers: an
// unreachable Buffer stays collectable.
type bufferSet struct {
	mu   sync.Mutex
	live []bufEntry // sorted by address
}

type bufEntry struct {
	start, end uint64
	b          weak.Pointer[Buffer]
}

var buffers bufferSet

func (s *bufferSet) add(b *Buffer) {
	start := uint64(sys.PointerTo(b.mem))
	e := bufEntry{start, start + uint64(len(b.mem)), weak.Make(b)}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.live), func(i int) bool { return s.live[i].start > start })
	s.live = slices.Insert(s.live, i, e)
}

// remove forgets b unless memory regions use it (EBUSY).
func (s *bufferSet) remove(b *Buffer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := b.users.Load(); n > 0 {
		return sys.InUse("uverbs Buffer.Close", int(n))
	}
	s.drop(uint64(sys.PointerTo(b.mem)))
	return nil
}

// drop forgets the entry starting at start; s.mu is held.
func (s *bufferSet) drop(start uint64) {
	s.live = slices.DeleteFunc(s.live, func(e bufEntry) bool { return e.start == start })
}

// use finds the open Buffer that holds all of [addr, addr+length) and
// counts a use of it; nil if the memory is not a Buffer's.
func (s *bufferSet) use(addr, length uint64) *Buffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.live), func(i int) bool { return s.live[i].start > addr })
	if i == 0 {
		return nil
	}
	e := s.live[i-1]
	b := e.b.Value()
	if b == nil || addr+length > e.end {
		return nil
	}
	b.users.Add(1)
	return b
}

// release undoes use.
func (b *Buffer) release() {
	if b != nil {
		b.users.Add(-1)
	}
}
