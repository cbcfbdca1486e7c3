package rpma

import (
	"errors"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/sys"

	"github.com/purerdma/rdma/uverbs"
)

// Peer is the local side of RDMA on one device (struct rpma_peer): a
// protection domain, and what the device can do (native FLUSH, native
// ATOMIC_WRITE, on-demand paging). Memory regions, endpoints and
// connections are made from it.
//
// A Peer is the expensive thing to share: all its methods are safe for
// concurrent use, and the usual shape is one Peer per device shared by
// goroutines that each own their connections.
type Peer struct {
	ctx         *uverbs.Context
	pd          *uverbs.PD
	odp         bool
	atomicWrite bool
	flush       bool
	// iwarp: an iWARP device, whose read sinks need remote write
	// (the RDMA READ response is a tagged write into them).
	iwarp  bool
	closed atomic.Bool

	// regMR registers memory; a test replaces it to exercise the
	// on-demand-paging retry.
	regMR func(buf []byte, access uverbs.Access) (*uverbs.MR, error)
}

// NewPeer creates a peer on an open device (rpma_peer_new). The Peer
// does not own ctx: close the Peer before the context.
func NewPeer(ctx *uverbs.Context) (*Peer, error) {
	const op = "peer new"
	if ctx == nil {
		return nil, invalid(op, "nil device context")
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		return nil, provider(op, err)
	}
	p := &Peer{ctx: ctx, iwarp: ctx.Device().Transport == uverbs.TransportIWARP}
	p.atomicWrite = attr.SupportsAtomicWrite()
	g, per := attr.SupportsFlush()
	p.flush = g && per // librpma's rule: both kinds, or neither is used
	p.odp = odpCapable(&attr)
	if !p.atomicWrite {
		logf(LogInfo, "Native atomic write is not supported - ordinary RDMA write will be used instead.")
	}
	if !p.flush {
		logf(LogInfo, "Native flush is not supported - ordinary RDMA read will be used instead.")
	}
	if p.pd, err = ctx.AllocPD(); err != nil {
		return nil, provider(op, err)
	}
	p.regMR = p.pd.RegMR
	return p, nil
}

// odpCapable is librpma's test: ODP at all, and RDMA read and write on
// RC.
func odpCapable(a *uverbs.DeviceAttr) bool {
	return a.ODPCaps.General&uverbs.ODPSupport != 0 &&
		a.ODPCaps.RC&uverbs.ODPSupportRead != 0 && a.ODPCaps.RC&uverbs.ODPSupportWrite != 0
}

// Context is the device context the peer was made on.
func (p *Peer) Context() *uverbs.Context { return p.ctx }

// PD is the peer's protection domain, for verbs a program mixes in.
func (p *Peer) PD() *uverbs.PD { return p.pd }

// NativeFlush reports whether the device executes RDMA FLUSH of both
// types, global visibility and persistence (librpma uses it only
// then; otherwise a flush is an RDMA READ after the writes).
func (p *Peer) NativeFlush() bool { return p.flush }

// NativeAtomicWrite reports whether the device executes RDMA
// ATOMIC_WRITE (otherwise AtomicWrite is a fenced 8-byte inline RDMA
// WRITE).
func (p *Peer) NativeAtomicWrite() bool { return p.atomicWrite }

// ODPCapable reports whether the device supports on-demand paging for
// RDMA read and write on RC connections.
func (p *Peer) ODPCapable() bool { return p.odp }

func (p *Peer) alive(op string) error {
	if p == nil {
		return invalid(op, "nil peer")
	}
	if p.closed.Load() {
		return newErr(op, ErrInvalid, uverbs.ErrClosed)
	}
	return nil
}

// Close releases the peer's protection domain (rpma_peer_delete). It
// fails, and the peer stays usable, while memory regions, endpoints'
// connections or SRQs made from it are open. A second Close returns an
// error matching uverbs.ErrClosed.
func (p *Peer) Close() error {
	const op = "peer delete"
	if p == nil {
		return invalid(op, "nil peer")
	}
	if err := p.pd.Close(); err != nil {
		if errors.Is(err, uverbs.ErrClosed) {
			p.closed.Store(true)
			return newErr(op, ErrInvalid, err)
		}
		return provider(op, err)
	}
	p.closed.Store(true)
	return nil
}

// access turns MR usage into access rights (librpma's
// rpma_peer_usage2access). Memory that may be flushed gets remote read,
// which the read-after-write flush of C librpma and of FlushEmulated
// needs, and, on a device with native flush, the FLUSH rights too, so
// that peers of either method can flush it.
func (p *Peer) access(u Usage) uverbs.Access {
	var a uverbs.Access
	if u&UsageReadSrc != 0 {
		a |= uverbs.AccessRemoteRead
	}
	if u&(UsageFlushVisibility|UsageFlushPersistent) != 0 {
		a |= uverbs.AccessRemoteRead
		if p.flush {
			if u&UsageFlushVisibility != 0 {
				a |= uverbs.AccessFlushGlobal
			}
			if u&UsageFlushPersistent != 0 {
				a |= uverbs.AccessFlushPersistent
			}
		}
	}
	if u&(UsageReadDst|UsageWriteSrc|UsageRecv) != 0 {
		a |= uverbs.AccessLocalWrite
	}
	if u&UsageReadDst != 0 && p.iwarp {
		a |= uverbs.AccessRemoteWrite // librpma's iWARP rule
	}
	if u&UsageWriteDst != 0 {
		a |= uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
	}
	return a
}

// register registers buf for usage, retrying with on-demand paging
// when the plain registration is refused as not supported and the
// device has ODP, as librpma does.
func (p *Peer) register(op string, buf []byte, u Usage) (*uverbs.MR, error) {
	access := p.access(u)
	mr, err := p.regMR(buf, access)
	if err == nil {
		return mr, nil
	}
	if access&uverbs.AccessFlushPersistent != 0 && errors.Is(err, sys.ErrInvalid) {
		// The device grants FLUSH to persistence only on persistent
		// memory (rxe: pmem pages). On other memory the region keeps
		// what the emulated flush needs, remote read, and native
		// flush to visibility.
		logf(LogWarning, "reg_mr(length=%d): memory is not persistent, so it takes no native flush to persistence: %v", len(buf), err)
		access &^= uverbs.AccessFlushPersistent
		if mr, err = p.regMR(buf, access); err == nil {
			return mr, nil
		}
	}
	if !errors.Is(err, uverbs.ErrNotSupported) {
		return nil, provider(op, err)
	}
	if !p.odp {
		logf(LogError, "Peer does not support On-Demand Paging: reg_mr(addr=%p, length=%d, access=%v): %v", &buf[0], len(buf), access, err)
		return nil, newErr(op, ErrProvider, &odpError{"the device does not support on-demand paging, which registering this memory needs", err})
	}
	mr, err2 := p.regMR(buf, access|uverbs.AccessOnDemand)
	if err2 != nil {
		logf(LogError, "Memory registration with On-Demand Paging (maybe FSDAX?) support failed: %v", err2)
		return nil, newErr(op, ErrProvider, &odpError{"registration with on-demand paging failed too", errors.Join(err, err2)})
	}
	return mr, nil
}

type odpError struct {
	msg string
	err error
}

func (e *odpError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *odpError) Unwrap() error { return e.err }
