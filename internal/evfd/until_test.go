package evfd

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

func TestReadUntilData(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	var b [8]byte
	go func() {
		var one [8]byte
		one[0] = 1
		unix.Write(w, one[:])
	}()
	if n, err := f.ReadUntil(time.Time{}, b[:]); n != 8 || err != nil || b[0] != 1 {
		t.Fatalf("ReadUntil = %d, %v, %v", n, err, b)
	}
}

func TestReadUntilDeadline(t *testing.T) {
	f, _ := newEventFD(t)
	defer f.Close()
	var b [8]byte
	for _, d := range []time.Time{time.Unix(1, 0), time.Now().Add(20 * time.Millisecond)} {
		if _, err := f.ReadUntil(d, b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadUntil(%v) = %v; want os.ErrDeadlineExceeded", d, err)
		}
	}
}

// TestReadUntilInterrupt: an Interrupt before the wait, or while it
// waits (whichever the scheduler makes it), ends it, once: the next
// wait goes on to its data.
//
//purerdma:race
func TestReadUntilInterrupt(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	var b [8]byte
	f.Interrupt()
	f.Interrupt()
	if _, err := f.ReadUntil(time.Time{}, b[:]); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("after Interrupt: %v; want ErrInterrupted", err)
	}
	go f.Interrupt()
	if _, err := f.ReadUntil(time.Time{}, b[:]); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("with a concurrent Interrupt: %v; want ErrInterrupted", err)
	}
	signal(t, w)
	if n, err := f.ReadUntil(time.Time{}, b[:]); n != 8 || err != nil {
		t.Fatalf("after the interruptions: %d, %v; want the data", n, err)
	}
	// A context Read after an Interrupt nobody took is not ended by it.
	f.Interrupt()
	signal(t, w)
	if n, err := f.Read(context.Background(), b[:]); n != 8 || err != nil {
		t.Fatalf("Read after an Interrupt: %d, %v", n, err)
	}
}

//purerdma:race
func TestReadUntilClose(t *testing.T) {
	f, _ := newEventFD(t)
	go func() {
		time.Sleep(10 * time.Millisecond) // most often parked by then; either way Close ends it
		f.Close()
	}()
	var b [8]byte
	if _, err := f.ReadUntil(time.Time{}, b[:]); !errors.Is(err, sys.ErrClosed) {
		t.Fatalf("ReadUntil across Close: %v; want ErrClosed", err)
	}
	f.Interrupt() // after Close: nothing to do, no panic
}

func TestReadUntilAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	f, w := newEventFD(t)
	defer f.Close()
	var b [8]byte
	if n := testing.AllocsPerRun(100, func() {
		signal(t, w)
		if _, err := f.ReadUntil(time.Time{}, b[:]); err != nil {
			t.Fatal(err)
		}
		f.Interrupt()
		if _, err := f.ReadUntil(time.Time{}, b[:]); !errors.Is(err, ErrInterrupted) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestReadUntilStaleDeadline: a deadline an earlier ReadUntil left (it
// is kept, to be set only when it changes) ends neither a later
// ReadUntil with another deadline nor a Read with a context.
func TestReadUntilStaleDeadline(t *testing.T) {
	f, w := newEventFD(t)
	defer f.Close()
	var b [8]byte
	signal(t, w)
	// The data is there, but a ReadUntil that reaches the poller after
	// its 1 ms (a loaded machine) ends by it without reading: then the
	// data is still there for the next try. Whether the machine is fast
	// enough decides only how many tries it takes.
	giveUp := time.Now().Add(time.Minute) // only turns a hang into a failure
	for {
		_, err := f.ReadUntil(time.Now().Add(time.Millisecond), b[:])
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Now().After(giveUp) {
			t.Fatalf("ReadUntil with the data there: %v", err)
		}
	}
	time.Sleep(5 * time.Millisecond) // the kept deadline passes
	go func() {
		time.Sleep(10 * time.Millisecond)
		var one [8]byte
		one[0] = 1
		unix.Write(w, one[:])
	}()
	if n, err := f.ReadUntil(time.Time{}, b[:]); n != 8 || err != nil {
		t.Fatalf("ReadUntil without a deadline after one with: %d, %v; want the data", n, err)
	}
	if _, err := f.ReadUntil(time.Now().Add(time.Millisecond), b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadUntil with a deadline: %v", err)
	}
	time.Sleep(5 * time.Millisecond)
	go func() {
		time.Sleep(10 * time.Millisecond)
		var one [8]byte
		one[0] = 1
		unix.Write(w, one[:])
	}()
	if n, err := f.Read(context.Background(), b[:]); n != 8 || err != nil {
		t.Fatalf("Read after a ReadUntil's deadline: %d, %v; want the data", n, err)
	}
}
