package ucma

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/testenv"
	"golang.org/x/sys/unix"
)

// mallocs counts heap allocations during fn.
func mallocs(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// Commands and the reading of a queued event run many times per
// connection: on the real device they allocate nothing.
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
	for uid := uint64(1); uid <= 5; uid++ {
		id, err := f.CreateID(uid, abi.RDMA_PS_TCP, ibvQPTRC)
		if err != nil {
			t.Fatal(err)
		}
		if n := mallocs(func() {
			if err := f.SetOption(id, abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_TOS, tos); err != nil {
				t.Fatal(err)
			}
			if _, err := f.QueryAddr(id); err != nil {
				t.Fatal(err)
			}
			if err := f.ResolveAddr(id, nil, dst, 2000); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("SET_OPTION, QUERY and RESOLVE_ADDR: %d allocations, want 0", n)
		}
		// Wait outside the count until the event is queued, so that
		// GetEvent does not park (a park arms a context callback).
		pfd := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int((5 * time.Second).Milliseconds())); err != nil || pfd[0].Revents&unix.POLLIN == 0 {
			t.Fatalf("no event within 5 s: %v", err)
		}
		var ev abi.UCMEventResp
		ctx := context.Background()
		if n := mallocs(func() {
			if err := f.GetEvent(ctx, &ev); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("GET_EVENT with an event queued: %d allocations, want 0", n)
		}
		if ev.UID != uid || ev.Event != 0 { // RDMA_CM_EVENT_ADDR_RESOLVED
			t.Errorf("event %d for uid %d, want ADDR_RESOLVED (0) for %d", ev.Event, ev.UID, uid)
		}
		if _, err := f.DestroyID(id); err != nil {
			t.Fatal(err)
		}
	}
}
