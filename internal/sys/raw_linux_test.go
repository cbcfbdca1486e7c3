package sys

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRawReadWriteClose(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := p[0], p[1]
	defer unix.Close(w)
	if err := RawSetNonblock(r); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(uintptr(r), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("flags %#x, %v: O_NONBLOCK not set", flags, err)
	}
	buf := make([]byte, 8)
	if _, err := RawRead(r, buf); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("read of an empty non-blocking pipe: %v, want EAGAIN", err)
	}
	if n, err := RawWrite(w, []byte("doorbell")); n != 8 || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	if n, err := RawRead(r, buf); n != 8 || err != nil || !bytes.Equal(buf, []byte("doorbell")) {
		t.Fatalf("read = %d %q, %v", n, buf, err)
	}
	if err := RawClose(r); err != nil {
		t.Fatal(err)
	}
	if err := RawClose(r); !errors.Is(err, unix.EBADF) {
		t.Errorf("second close: %v, want EBADF", err)
	}
	if _, err := RawWrite(-1, buf); !errors.Is(err, unix.EBADF) {
		t.Errorf("write to fd -1: %v, want EBADF", err)
	}
}

func TestRawMmap(t *testing.T) {
	b, err := MmapAnon(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3*4096 || uintptr(PointerTo(b))%4096 != 0 {
		t.Fatalf("mapping of %d bytes at %#x", len(b), PointerTo(b))
	}
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("byte %d of fresh anonymous memory is %#x", i, b[i])
		}
	}
	b[len(b)-1] = 1 // writable to the end
	if err := DontFork(uint64(PointerTo(b)), uint64(len(b))); err != nil {
		t.Fatal(err)
	}
	if err := Munmap(b); err != nil {
		t.Fatal(err)
	}
	if _, err := MmapAnon(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("MmapAnon(0): %v, want EINVAL", err)
	}
	if err := Munmap(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Munmap(nil): %v, want EINVAL", err)
	}
}

// TestFDWrite covers the doorbell's path: a whole write, the errno
// wrapped with the operation, ErrClosed after Close, no allocation.
func TestFDWrite(t *testing.T) {
	f, err := Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	cmd := []byte("doorbell")
	if err := f.Write("test write", cmd); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { f.Write("test write", cmd) }); allocs != 0 {
		t.Errorf("Write allocates %v times", allocs)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Write("test write", cmd); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v, want ErrClosed", err)
	}

	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	readEnd := &FD{raw: p[0]}
	defer readEnd.Close()
	err = readEnd.Write("test write", cmd)
	if !errors.Is(err, unix.EBADF) || !strings.Contains(err.Error(), "test write") {
		t.Errorf("write to a pipe's read end: %v, want EBADF naming the operation", err)
	}
}
