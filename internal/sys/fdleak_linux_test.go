package sys

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFDCleanup: an FD dropped without Close is closed by its cleanup
// and counted; one that was closed is not counted again. The garbage
// collector runs a bounded number of times, not for a time.
func TestFDCleanup(t *testing.T) {
	before := LeakedFDs()
	closed, err := Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	raw := func() int {
		f, err := Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		return f.raw // f is unreachable from here on
	}()
	for i := 0; i < 100 && LeakedFDs() == before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := LeakedFDs() - before; got != 1 {
		t.Fatalf("LeakedFDs rose by %d after dropping one unclosed FD and closing another; want 1", got)
	}
	if _, err := unix.FcntlInt(uintptr(raw), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("fd %d after its cleanup: F_GETFD = %v, want EBADF", raw, err)
	}
	runtime.KeepAlive(closed)
}
