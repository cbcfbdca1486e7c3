package sys

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerdma/rdma/internal/abi"
)

// FD is a command file descriptor (/dev/infiniband/uverbsN,
// /dev/infiniband/rdma_cm). Calls hold a read lock so Close cannot
// release the number while a call runs (and let another open reuse it).
// The uverbs command fd has no poll support, so it stays a raw fd.
//
// An FD that becomes unreachable without Close is closed by a cleanup
// (the garbage collector's), counted (LeakedFDs) and reported with
// slog.Warn: the program forgot a Close, and the kernel objects behind
// the fd go with it.
type FD struct {
	mu   sync.RWMutex
	raw  int   // -1 once closed
	fake *Fake // the test's device behind this fd, or nil (fake_linux.go)
	net  runtime.Cleanup
}

// leakedFDs counts FDs closed by their cleanup.
var leakedFDs atomic.Int64

// LeakedFDs is how many FDs became unreachable without Close (and were
// closed by their cleanup) in this process.
func LeakedFDs() int64 { return leakedFDs.Load() }

// fdLeak is what the cleanup of an unclosed FD needs: not the FD.
type fdLeak struct {
	raw  int
	path string
}

func fdLeaked(l fdLeak) {
	unix.Close(l.raw)
	leakedFDs.Add(1)
	slog.Warn("purerdma: a device file was not closed; the garbage collector closed it (close what opened it, a uverbs.Context, when done)",
		"path", l.path, "fd", l.raw)
}

// Open opens a character device read-write, close-on-exec.
func Open(path string) (*FD, error) {
	if f, ok, err := fakeOpen(path); ok {
		return f, err
	}
	raw, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errnoErr("open "+path, err)
	}
	f := &FD{raw: raw}
	f.net = runtime.AddCleanup(f, fdLeaked, fdLeak{raw, path})
	return f, nil
}

// Close closes the fd once; later calls return ErrClosed.
func (f *FD) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.raw < 0 {
		return ErrClosed
	}
	if fk := f.faked(); fk != nil {
		fk.Close(f.raw)
	}
	f.net.Stop()
	err := unix.Close(f.raw)
	f.raw = -1
	return errnoErr("close", err)
}

// Do runs fn with the raw fd, or returns ErrClosed.
func (f *FD) Do(fn func(raw int) error) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.raw < 0 {
		return ErrClosed
	}
	return fn(f.raw)
}

// Write writes one whole command buffer; a short write is an error.
// It is every rxe doorbell, so it takes the lock itself rather than
// through Do's closure and deferred unlock.
func (f *FD) Write(op string, b []byte) error {
	f.mu.RLock()
	if f.raw < 0 {
		f.mu.RUnlock()
		return ErrClosed
	}
	var n int
	var err error
	if fk := f.faked(); fk != nil {
		n, err = fk.Write(f.raw, b)
	} else {
		n, err = RawWrite(f.raw, b)
	}
	f.mu.RUnlock()
	if err != nil {
		return errnoErr(op, err)
	}
	if n != len(b) {
		return &Error{Op: op, Err: fmt.Errorf("short write: %d of %d bytes", n, len(b))}
	}
	return nil
}

// ioctl issues one ioctl whose argument is Go memory the caller keeps
// alive and pinned (a raw call: see raw_linux.go).
func ioctl(raw int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(raw), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// Mmap maps length bytes of the device at offset, shared read-write.
func (f *FD) Mmap(op string, offset int64, length int) ([]byte, error) {
	var b []byte
	err := f.Do(func(raw int) error {
		var err error
		if fk := f.faked(); fk != nil {
			b, err = fk.Mmap(raw, offset, length)
			return errnoErr(op, err)
		}
		b, err = rawMmap(raw, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		return errnoErr(op, err)
	})
	return b, err
}

// Munmap unmaps memory from Mmap.
func Munmap(b []byte) error {
	if ok, err := fakeMunmap(b); ok {
		return errnoErr("munmap", err)
	}
	return errnoErr("munmap", rawMunmap(b))
}

// Pointer is a user address handed to the kernel in a 64-bit field
// (abi.Pointer, the type of the generated structs' response members).
// The memory must stay alive and unmoved (pinned or heap) across the call.
type Pointer = abi.Pointer

// PointerTo returns the address of b's first byte (0 for an empty slice).
func PointerTo(b []byte) Pointer {
	if len(b) == 0 {
		return 0
	}
	return Pointer(uintptr(unsafe.Pointer(&b[0])))
}

// pin keeps Go memory in place across a call.
type pinner struct{ runtime.Pinner }

func (p *pinner) bytes(b []byte) Pointer {
	if len(b) == 0 {
		return 0
	}
	p.Pin(&b[0])
	return PointerTo(b)
}
