package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResolveErrorText: the failure of a blocking resolution names the
// step and the address, says which timer fired, and matches the event's
// errno, and context.DeadlineExceeded only when ctx's deadline passed
// (the kernel's timer set from it, or ctx itself). The VM test
// TestResolveErrors checks the same against the kernel.
func TestResolveErrorText(t *testing.T) {
	dst := netip.MustParseAddrPort("198.18.0.99:7471")
	id := &ID{handle: 3}
	timedOut := &EventError{Op: "ResolveAddrContext", Want: EventAddrResolved, Event: &Event{Type: EventAddrError, Status: -int(syscall.ETIMEDOUT)}}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, tt := range []struct {
		name     string
		ctx      context.Context
		r        resolution
		err      error
		want     string
		deadline bool // matches context.DeadlineExceeded
	}{
		{"kernel timer, DefaultResolveTimeout", context.Background(), resolution{timeout: 2 * time.Second}, timedOut,
			"rdmacm ResolveAddrContext (id 3): address resolution of 198.18.0.99:7471 timed out: the kernel's timer of 2s (DefaultResolveTimeout: ctx has no deadline) fired: ADDR_ERROR: connection timed out", false},
		{"kernel timer, ctx's deadline", context.Background(), resolution{timeout: 1499999 * time.Microsecond, fromCtx: true}, timedOut,
			"rdmacm ResolveAddrContext (id 3): address resolution of 198.18.0.99:7471 timed out: the kernel's timer of 1.5s, set to ctx's deadline, fired: ADDR_ERROR: connection timed out", true},
		{"ctx's deadline", expired, resolution{timeout: 300 * time.Millisecond, fromCtx: true}, context.DeadlineExceeded,
			"rdmacm ResolveAddrContext (id 3): address resolution of 198.18.0.99:7471 did not finish by ctx's deadline (300ms after it started): context deadline exceeded", true},
		{"kernel error", context.Background(), resolution{timeout: 2 * time.Second},
			opError("ResolveAddrContext", 3, errors.New("rdma_cm RESOLVE_ADDR: network is unreachable")),
			"rdmacm ResolveAddrContext (id 3): address resolution of 198.18.0.99:7471: rdma_cm RESOLVE_ADDR: network is unreachable", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			r.op, r.step, r.ran = "ResolveAddrContext", "address resolution", true
			err := r.explain(tt.ctx, id, dst, tt.err)
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err, tt.want)
			}
			if errors.Is(err, context.DeadlineExceeded) != tt.deadline {
				t.Errorf("errors.Is(DeadlineExceeded) = %v", !tt.deadline)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not match what it wraps", err)
			}
			if tt.err == timedOut && (!errors.Is(err, syscall.ETIMEDOUT) || !errors.As(err, new(*EventError))) {
				t.Errorf("%v: not ETIMEDOUT and an *EventError", err)
			}
		})
	}
	r := &resolution{op: "ResolveAddrContext", step: "address resolution"}
	if err := r.explain(context.Background(), id, dst, ErrBusy); err != ErrBusy {
		t.Errorf("a step that never started: %v, want its error unchanged", err)
	}
	if s := noDeviceText(netip.MustParseAddr("127.0.0.1")); !strings.HasPrefix(s, "no RDMA device on the netdev of 127.0.0.1 (lo)") {
		t.Errorf("noDeviceText(127.0.0.1) = %q", s)
	}
}
