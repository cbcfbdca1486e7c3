package evfd

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// An eventfd stands in for the uverbs event fds: same poll semantics.
func newEventFD(t *testing.T) (*File, int) {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(fd, "test eventfd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(dup) })
	return f, dup
}

func signal(t *testing.T, fd int) {
	var b [8]byte
	b[0] = 1
	if _, err := unix.Write(fd, b[:]); err != nil {
		t.Fatal(err)
	}
}

//purerdma:race
func TestReadWakesOnData(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	go func() { time.Sleep(20 * time.Millisecond); signal(t, w) }()
	var b [8]byte
	n, err := f.Read(context.Background(), b[:])
	if err != nil || n != 8 || b[0] != 1 {
		t.Fatalf("Read = %d, %v, %v", n, err, b)
	}
}

//purerdma:race
func TestReadCancel(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	var b [8]byte
	if _, err := f.Read(ctx, b[:]); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v, want context.Canceled", err)
	}
	// The cancelled wait's deadline must not leak into the next one.
	signal(t, w)
	if n, err := f.Read(context.Background(), b[:]); err != nil || n != 8 {
		t.Fatalf("Read after a cancelled Read = %d, %v", n, err)
	}
}

//purerdma:race
func TestReadClose(t *testing.T) {
	f, _ := newEventFD(t)
	done := make(chan error)
	go func() {
		var b [8]byte
		_, err := f.Read(context.Background(), b[:])
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	f.Close()
	select {
	case err := <-done:
		if !errors.Is(err, sys.ErrClosed) {
			t.Fatalf("Read after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake Read")
	}
}

//purerdma:race
func TestSecondWaiterBusy(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	done := make(chan error)
	go func() {
		var b [8]byte
		_, err := f.Read(context.Background(), b[:])
		done <- err
	}()
	// Once the first Read holds the waiter slot, a second fails at once.
	for !f.waiting.Load() {
		select {
		case err := <-done:
			t.Fatalf("the first Read ended before the data: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	var b [8]byte
	if _, err := f.Read(context.Background(), b[:]); !errors.Is(err, sys.ErrBusy) {
		t.Errorf("second Read = %v, want ErrBusy", err)
	}
	signal(t, w)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDeadlineAlreadyPassed(t *testing.T) {
	f, _ := newEventFD(t)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b [8]byte
	if _, err := f.Read(ctx, b[:]); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read = %v", err)
	}
}

// TestWaitAfterCancelledWait waits on an empty fd after a cancelled
// wait: the past deadline the cancellation left must be cleared before
// this wait parks, or it would end at once. The wait must end because
// the data came: with the data, and after it was written (a flag the
// writer sets first, not a duration, says so).
//
//purerdma:race
func TestWaitAfterCancelledWait(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(10 * time.Millisecond); cancel() }()
		var b [8]byte
		if _, err := f.Read(ctx, b[:]); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Read after cancel = %v, want context.Canceled", round, err)
		}
		// The sleep lets the Read park first; if it does not, the round
		// tests less but cannot fail for it.
		var written atomic.Bool
		go func() { time.Sleep(30 * time.Millisecond); written.Store(true); signal(t, w) }()
		if n, err := f.Read(context.Background(), b[:]); err != nil || n != 8 || b[0] != 1 {
			t.Fatalf("round %d: Read after a cancelled Read = %d, %v, %x; want the writer's 8 bytes", round, n, err, b)
		}
		if !written.Load() {
			t.Fatalf("round %d: Read returned before the data was written", round)
		}
	}
}

// rdma_cm's commands and GET_EVENT run on every connection: Write, and
// a Read or WaitWrite whose fd is ready, allocate nothing.
func TestWriteAndReadyWaitAllocateNothing(t *testing.T) {
	f, _ := newEventFD(t)
	defer f.Close()
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	var got [8]byte
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.Write(one); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WaitWrite(ctx, one); err != nil { // an eventfd takes writes at once
			t.Fatal(err)
		}
		if n, err := f.Read(ctx, got[:]); err != nil || n != 8 {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("Write + WaitWrite + ready Read: %v allocations, want 0", allocs)
	}
	if got[0] != 2 {
		t.Errorf("Read %v, want the two 1s written, added", got)
	}
}

func TestWriteAfterClose(t *testing.T) {
	f, _ := newEventFD(t)
	f.Close()
	if _, err := f.Write(make([]byte, 8)); !errors.Is(err, sys.ErrClosed) {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
	if fd := f.Fd(); fd != -1 {
		t.Fatalf("Fd after Close = %d, want -1", fd)
	}
}

// A Read that parks under a context that cannot end (Background) arms
// no context callback, and allocates nothing.
func TestParkedReadWithBackgroundAllocatesNothing(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	wake, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	go func() { // writes a moment after each wake, when the Read has parked
		one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
		for {
			select {
			case <-wake:
			case <-stop:
				return
			}
			time.Sleep(time.Millisecond)
			unix.Write(w, one)
		}
	}()
	var got [8]byte
	ctx := context.Background()
	allocs := testing.AllocsPerRun(50, func() {
		wake <- struct{}{}
		if n, err := f.Read(ctx, got[:]); err != nil || n != 8 {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("parked Read: %v allocations, want 0", allocs)
	}
}
