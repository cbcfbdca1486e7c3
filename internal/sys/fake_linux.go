package sys

import (
	"sync/atomic"
	"unsafe"
)

// A Fake stands in for the kernel behind a uverbs command fd, for tests
// that run a provider against a scripted device (the mlx5 differential
// harness, uverbs/internal/mlx5/oracle). It is consulted only off the
// data path: Open, ioctl methods, write() commands, Mmap and Munmap. Post
// and poll make no system call (rxe's doorbell is a Doorbell, which a
// Fake does not see), so a Fake costs them nothing; with none installed,
// Open and Munmap pay one atomic load, and Close, Write, Mmap and
// Method.Exec a nil check.
//
// Only tests install one (internal/layering checks that no other code
// calls InstallFake).
type Fake interface {
	// Open returns the fd to stand for path (a real fd the Fake owns,
	// so that Close works), or ok false to open path for real.
	Open(path string) (raw int, ok bool, err error)
	// Ioctl answers RDMA_VERBS_IOCTL: arg is the address of the
	// header and attributes, which the Fake reads and updates in place.
	Ioctl(raw int, req uintptr, arg uintptr) error
	// Write answers a write() command.
	Write(raw int, b []byte) (int, error)
	// Mmap maps length bytes of the device at offset.
	Mmap(raw int, offset int64, length int) ([]byte, error)
	// Munmap unmaps memory that Mmap returned; ok false for memory it
	// does not own.
	Munmap(b []byte) (ok bool, err error)
	// Close is told that raw is being closed.
	Close(raw int)
}

var fake atomic.Pointer[Fake]

// InstallFake routes the command fds that f opens to f until the
// returned function is called. For tests only.
func InstallFake(f Fake) (uninstall func()) {
	fake.Store(&f)
	return func() { fake.Store(nil) }
}

// faked returns the Fake of an FD that one opened, or nil.
func (f *FD) faked() Fake {
	if f.fake == nil {
		return nil
	}
	return *f.fake
}

func fakeOpen(path string) (*FD, bool, error) {
	p := fake.Load()
	if p == nil {
		return nil, false, nil
	}
	raw, ok, err := (*p).Open(path)
	if !ok {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, errnoErr("open "+path, err)
	}
	return &FD{raw: raw, fake: p}, true, nil
}

func fakeIoctl(f Fake, raw int, req uintptr, arg unsafe.Pointer) error {
	return f.Ioctl(raw, req, uintptr(arg))
}

func fakeMunmap(b []byte) (bool, error) {
	p := fake.Load()
	if p == nil {
		return false, nil
	}
	return (*p).Munmap(b)
}
