package uverbs_test

import (
	"errors"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// TestSyscallConn: the RawConn of a completion channel and of the async
// event fd hands out the same fd as Fd and AsyncFd while open, and is
// refused after Close.
func TestSyscallConn(t *testing.T) {
	c := openContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ch.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := -1
	if err := rc.Control(func(fd uintptr) { got = int(fd) }); err != nil || got != ch.Fd() || got < 0 {
		t.Errorf("CompChannel RawConn fd %d (%v), Fd %d", got, err, ch.Fd())
	}
	ac, err := c.AsyncConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := ac.Control(func(fd uintptr) { got = int(fd) }); err != nil || got != c.AsyncFd() {
		t.Errorf("async RawConn fd %d (%v), AsyncFd %d", got, err, c.AsyncFd())
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.SyscallConn(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("SyscallConn after Close = %v, want ErrClosed", err)
	}
}
