package evfd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// rawEventFD is a plain non-blocking eventfd the test closes, standing
// in for a Set's members (a completion channel, an rdma_cm fd).
func rawEventFD(t *testing.T) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func newSet(t *testing.T, members ...struct {
	fd   int
	edge bool
}) *Set {
	t.Helper()
	s, err := NewSet("test set")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i, m := range members {
		if n, err := s.Add(m.fd, m.edge); err != nil || n != i {
			t.Fatalf("Add(%d) = %d, %v; want member %d", m.fd, n, err, i)
		}
	}
	return s
}

type member = struct {
	fd   int
	edge bool
}

// drainFD reads an eventfd's counter, making it unreadable.
func drainFD(t *testing.T, fd int) {
	var b [8]byte
	if _, err := unix.Read(fd, b[:]); err != nil {
		t.Fatal(err)
	}
}

// nothingReady checks that Wait finds no member ready: it ends only by
// its context (the error class is asserted, not how long it took).
func nothingReady(t *testing.T, s *Set) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if mask, err := s.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with nothing new = %#b, %v; want DeadlineExceeded", mask, err)
	}
}

// TestSetWakesOnEitherMember: Wait returns the mask of the members that
// are readable, whichever became so, and parks while none is.
func TestSetWakesOnEitherMember(t *testing.T) {
	a, b := rawEventFD(t), rawEventFD(t)
	s := newSet(t, member{a, false}, member{b, false})
	nothingReady(t, s)
	go func() { time.Sleep(20 * time.Millisecond); unix.Write(b, []byte{1, 0, 0, 0, 0, 0, 0, 0}) }()
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<1 {
		t.Fatalf("Wait after a write to member 1 = %#b, %v", mask, err)
	}
	// Level-triggered: reported until read.
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<1 {
		t.Fatalf("second Wait = %#b, %v; member 1 is still readable", mask, err)
	}
	unix.Write(a, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<0|1<<1 {
		t.Fatalf("Wait with both readable = %#b, %v", mask, err)
	}
	drainFD(t, a)
	drainFD(t, b)
	nothingReady(t, s)
}

// TestSetEdgeMember: an edge member that stays readable is reported
// once per signal, so a waiter that leaves its data to another reader
// does not spin; it is reported again when new data arrives.
func TestSetEdgeMember(t *testing.T) {
	a := rawEventFD(t)
	unix.Write(a, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // readable before Add: reported once
	s := newSet(t, member{a, true})
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1 {
		t.Fatalf("Wait = %#b, %v", mask, err)
	}
	nothingReady(t, s) // still readable, but no new signal
	unix.Write(a, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1 {
		t.Fatalf("Wait after a second write = %#b, %v", mask, err)
	}
}

func TestSetCancelAndClose(t *testing.T) {
	a := rawEventFD(t)
	s := newSet(t, member{a, false})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := s.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Wait(context.Background())
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, sys.ErrClosed) {
			t.Fatalf("Wait after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake Wait")
	}
}

// A closed member leaves the set: it is not reported, and the others
// still are.
func TestSetClosedMemberLeaves(t *testing.T) {
	a, err := unix.Eventfd(1, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK) // readable
	if err != nil {
		t.Fatal(err)
	}
	b := rawEventFD(t)
	s := newSet(t, member{a, false}, member{b, false})
	unix.Close(a)
	nothingReady(t, s)
	unix.Write(b, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<1 {
		t.Fatalf("Wait = %#b, %v", mask, err)
	}
}

func TestLatch(t *testing.T) {
	l, err := NewLatch()
	if err != nil {
		t.Fatal(err)
	}
	other := rawEventFD(t)
	s := newSet(t, member{other, false}, member{l.Fd(), false})
	nothingReady(t, s)
	go func() { time.Sleep(20 * time.Millisecond); l.Set() }()
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<1 {
		t.Fatalf("Wait for the latch = %#b, %v", mask, err)
	}
	if err := l.Set(); err != nil { // twice is fine
		t.Fatal(err)
	}
	if mask, err := s.Wait(context.Background()); err != nil || mask != 1<<1 {
		t.Fatalf("a set latch stays readable: %#b, %v", mask, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Set(); err != nil {
		t.Errorf("Set after Close = %v, want nothing done", err)
	}
	if err := l.Close(); !errors.Is(err, sys.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if l.Fd() != -1 {
		t.Errorf("Fd after Close = %d", l.Fd())
	}
	nothingReady(t, s)
}

// A Wait that finds a member ready allocates nothing.
func TestSetReadyWaitAllocatesNothing(t *testing.T) {
	a := rawEventFD(t)
	unix.Write(a, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	s := newSet(t, member{a, false})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if mask, err := s.Wait(ctx); err != nil || mask != 1 {
			t.Fatal(mask, err)
		}
	})
	if allocs != 0 {
		t.Errorf("ready Wait: %v allocations, want 0", allocs)
	}
}

func TestSetFull(t *testing.T) {
	a := rawEventFD(t)
	s, err := NewSet("test set")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range maxSetMembers {
		d, err := unix.Dup(a)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(d)
		if _, err := s.Add(d, false); err != nil {
			t.Fatalf("Add %d: %v", i, err)
		}
	}
	if _, err := s.Add(a, false); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Add past %d members = %v, want ENOSPC", maxSetMembers, err)
	}
}
