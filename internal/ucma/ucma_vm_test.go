package ucma

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/testenv"
	"golang.org/x/sys/unix"
)

// Commands and the reading of a queued event run many times per
// connection: on the real device they allocate nothing. The count is an
// average over whole ID life cycles (testing.AllocsPerRun) because the
// runtime itself allocates now and then on any goroutine's behalf (a new
// thread's M costs seven objects); a call that allocates still shows as
// at least one per run.
func TestCommandsAndQueuedEventAllocateNothing(t *testing.T) {
	testenv.Devices(t, 2)
	f, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const ibvQPTRC = 2
	// 198.18.0.1, rxe0's address in the test VM.
	dst := []byte{unix.AF_INET, 0, 0, 0, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	tos := []byte{32}
	ctx := context.Background()
	var ev abi.UCMEventResp
	uid := uint64(0)
	var cycleErr error
	// One life cycle: create, set an option, query, resolve, read the
	// queued ADDR_RESOLVED, destroy.
	cycle := func() error {
		uid++
		id, err := f.CreateID(uid, abi.RDMA_PS_TCP, ibvQPTRC)
		if err != nil {
			return err
		}
		defer f.DestroyID(id)
		if err := f.SetOption(id, abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_TOS, tos); err != nil {
			return err
		}
		if _, err := f.QueryAddr(id); err != nil {
			return err
		}
		if err := f.ResolveAddr(id, nil, dst, 2000); err != nil {
			return err
		}
		// Wait until the event is queued, so that GetEvent reads it at
		// once instead of parking (a park arms a context callback).
		if err := waitReadable(f.Fd(), 5*time.Second); err != nil {
			return err
		}
		if err := f.GetEvent(ctx, &ev); err != nil {
			return err
		}
		if ev.UID != uid || ev.Event != 0 { // RDMA_CM_EVENT_ADDR_RESOLVED
			return errWrongEvent
		}
		return nil
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := cycle(); err != nil && cycleErr == nil {
			cycleErr = err
		}
	})
	if cycleErr != nil {
		t.Fatalf("cycle %d (event %d for uid %d): %v", uid, ev.Event, ev.UID, cycleErr)
	}
	if allocs != 0 {
		t.Errorf("create, SET_OPTION, QUERY, RESOLVE_ADDR, GET_EVENT, destroy: %v allocations per cycle, want 0", allocs)
	}
}

var (
	errNoEvent    = errors.New("no event within 5 s")
	errWrongEvent = errors.New("not the ADDR_RESOLVED of this ID")
)

// waitReadable waits up to d for fd to be readable. poll(2) is retried
// when a signal interrupts it (the Go runtime preempts goroutines with
// SIGURG), with what is left of d.
func waitReadable(fd int, d time.Duration) error {
	deadline := time.Now().Add(d)
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errNoEvent
		}
		n, err := unix.Poll(pfd[:], int(left.Milliseconds())+1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		case n > 0:
			return nil
		}
	}
}
