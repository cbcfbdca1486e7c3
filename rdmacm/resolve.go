package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// The failure of a blocking resolution step (ResolveAddrContext,
// ResolveRouteContext, and so Resolve, CreateEP and the rpma package)
// names the step and the address, and says which timer fired: the
// kernel's, set from ctx's deadline or to DefaultResolveTimeout, or ctx
// itself; and when the address has no RDMA device (ENODEV: 127.0.0.1,
// an address on a network interface without one), which interface that
// is and where the RDMA devices are.

// resolution is one blocking resolution step, for the error that
// explains its failure.
type resolution struct {
	op      string        // the call: "resolve address"
	step    string        // what it does: "address resolution"
	timeout time.Duration // the kernel's timer
	fromCtx bool          // timeout is what was left of ctx's deadline
	ran     bool          // the step was started (the kernel asked)
}

func newResolution(ctx context.Context, op, step string) *resolution {
	_, fromCtx := ctx.Deadline()
	return &resolution{op: op, step: step, timeout: resolveTimeout(ctx), fromCtx: fromCtx}
}

// explain returns err, the step's result, as a *resolveError, or
// unchanged when the step never started (ctx done before, or the ID's
// channel busy) or succeeded.
func (r *resolution) explain(ctx context.Context, id *ID, dst netip.AddrPort, err error) error {
	if err == nil || !r.ran {
		return err
	}
	e := &resolveError{r: *r, handle: id.handle, dst: dst, err: err}
	var ee *EventError
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		e.kind = ctxEnded
	case errors.As(err, &ee) && errors.Is(err, sys.ErrTimedOut):
		e.kind = timedOut
	case errors.Is(err, sys.ErrNoDevice):
		e.kind, e.noDevice = noDevice, noDeviceText(dst.Addr())
	}
	return e
}

type resolveKind int

const (
	resolveFailed resolveKind = iota
	timedOut                  // the kernel's timer fired (ETIMEDOUT)
	ctxEnded                  // ctx ended during the wait
	noDevice                  // ENODEV: no RDMA device for the address
)

// resolveError is the failure of a blocking resolution step. It matches
// what it wraps (the error event and its errno, ctx's error, the kernel
// call's errno) and, when the kernel's timer was set from ctx's deadline
// and fired, context.DeadlineExceeded too: either way the caller's
// deadline passed.
type resolveError struct {
	r        resolution
	handle   uint32
	dst      netip.AddrPort
	kind     resolveKind
	noDevice string // for noDevice: the interface and where the devices are
	err      error
}

func (e *resolveError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmacm %s (id %d): %s of %v", e.r.op, e.handle, e.r.step, e.dst)
	timeout := e.r.timeout.Round(time.Millisecond)
	switch e.kind {
	case timedOut:
		if e.r.fromCtx {
			fmt.Fprintf(&b, " timed out: the kernel's timer of %v, set to ctx's deadline, fired", timeout)
		} else {
			fmt.Fprintf(&b, " timed out: the kernel's timer of %v (DefaultResolveTimeout: ctx has no deadline) fired", timeout)
		}
	case ctxEnded:
		if errors.Is(e.err, context.DeadlineExceeded) {
			fmt.Fprintf(&b, " did not finish by ctx's deadline (%v after it started)", timeout)
		} else {
			b.WriteString(" was abandoned: ctx ended")
		}
	case noDevice:
		b.WriteString(": " + e.noDevice)
	}
	b.WriteString(": " + e.cause())
	return b.String()
}

// cause is the wrapped error's text without what Error says already.
func (e *resolveError) cause() string {
	var ee *EventError
	if errors.As(e.err, &ee) && ee.Event != nil {
		bare := *ee
		bare.Op = "" // "ADDR_ERROR: connection timed out", not "ADDR_ERROR instead of ADDR_RESOLVED"
		return strings.TrimPrefix(bare.Error(), "rdmacm Event.Err: ")
	}
	return strings.TrimPrefix(e.err.Error(), fmt.Sprintf("rdmacm %s (id %d): ", e.r.op, e.handle))
}

func (e *resolveError) Unwrap() error { return e.err }

func (e *resolveError) Is(target error) bool {
	return target == context.DeadlineExceeded && e.kind == timedOut && e.r.fromCtx
}

// noDeviceText says that the network interface of a (the one that has
// it, or else the one whose subnet holds it) has no RDMA device, and
// which interfaces have one.
func noDeviceText(a netip.Addr) string {
	a = a.Unmap()
	var s string
	switch name, local := netdevOf(a); {
	case name != "" && local:
		s = fmt.Sprintf("no RDMA device on the netdev of %v (%s)", a, name)
	case name != "":
		s = fmt.Sprintf("no RDMA device on the netdev that reaches %v (%s)", a, name)
	default:
		s = fmt.Sprintf("no RDMA device on the netdev that reaches %v", a)
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return s
	}
	var on []string
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev != "" {
				on = append(on, fmt.Sprintf("%s (port %d of %s)", p.Netdev, p.Num, d.Name))
			}
		}
	}
	if len(on) == 0 {
		return s + "; this machine has no RDMA device on any netdev"
	}
	return s + "; RDMA devices are on " + strings.Join(on, ", ")
}

// netdevOf names the network interface that has the address a (local),
// or else the first whose subnet holds it; "" when none does.
func netdevOf(a netip.Addr) (name string, local bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", false
	}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			p, err := netip.ParsePrefix(ad.String())
			if err != nil {
				continue
			}
			switch {
			case p.Addr().Unmap() == a:
				return ifi.Name, true
			case name == "" && p.Masked().Contains(a):
				name = ifi.Name
			}
		}
	}
	return name, false
}
