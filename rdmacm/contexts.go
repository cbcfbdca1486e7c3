package rdmacm

import (
	"errors"
	"sync"

	"github.com/purerdma/rdma/uverbs"
)

// This file keeps the uverbs Contexts this package opens itself.
//
// A QP, CQ or MR of an ID may live on any uverbs.Context of the ID's
// device: the kernel ties an rdma_cm ID to a device, not to a uverbs
// file, so the caller may pass a PD of its own Context to CreateQP, and
// that Context is the caller's to close. For callers that do not want
// to open one, ID.Context (and CreateQP or CreateSRQ with a nil PD)
// share one Context per device (a contextPool entry): it is opened on
// first use, each ID that used it holds a reference (its contextRefs)
// until it is closed, and the Context closes when the last of them
// goes, destroying whatever was still open on it. Objects that must
// outlive the IDs belong on a Context the caller opened.

// limits are the device attributes Connect and Accept need.
type limits struct {
	maxInitiatorDepth     uint8 // max_qp_init_rd_atom
	maxResponderResources uint8 // max_qp_rd_atom
}

// shared is a Context this package opened, with a default PD.
type shared struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	refs int // guarded by the pool's mu
}

// A contextPool is the shared Contexts, one per device by name, and the
// limits of each device, queried once per process.
type contextPool struct {
	mu     sync.Mutex
	shared map[string]*shared
	limits map[uverbs.GUID]limits
}

// contexts is the process's pool: librdmacm, too, keeps one device
// list and opens each device once per process.
var contexts contextPool

// acquire returns the shared Context of dev, opening it on first use.
// Each call takes a reference that release gives back.
func (p *contextPool) acquire(dev uverbs.Device) (*shared, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.shared[dev.Name]; s != nil {
		s.refs++
		return s, nil
	}
	ctx, err := dev.Open(nil)
	if err != nil {
		return nil, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	s := &shared{ctx: ctx, pd: pd, refs: 1}
	if p.shared == nil {
		p.shared = map[string]*shared{}
	}
	p.shared[dev.Name] = s
	return s, nil
}

// release drops a reference; the last one closes the Context and
// everything still open on it.
func (p *contextPool) release(dev string, s *shared) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	if p.shared[dev] == s {
		delete(p.shared, dev)
	}
	return s.ctx.Close() // destroys the default PD too
}

// deviceLimits returns the read/atomic limits of dev, querying the
// device once per process (through its shared Context when it is open).
func (p *contextPool) deviceLimits(dev uverbs.Device) (limits, error) {
	p.mu.Lock()
	l, ok := p.limits[dev.NodeGUID]
	s := p.shared[dev.Name]
	p.mu.Unlock()
	if ok {
		return l, nil
	}
	var attr uverbs.DeviceAttr
	var err error
	if s != nil {
		attr, err = s.ctx.QueryDevice()
	} else {
		var ctx *uverbs.Context
		if ctx, err = dev.Open(nil); err == nil {
			attr, err = ctx.QueryDevice()
			ctx.Close()
		}
	}
	if err != nil {
		return limits{}, err
	}
	l = limits{maxInitiatorDepth: uint8(min(attr.MaxQPInitRdAtom, 255)),
		maxResponderResources: uint8(min(attr.MaxQPRdAtom, 255))}
	p.mu.Lock()
	if p.limits == nil {
		p.limits = map[uverbs.GUID]limits{}
	}
	p.limits[dev.NodeGUID] = l
	p.mu.Unlock()
	return l, nil
}

// contextRefs are the references one ID holds on the pool, guarded by
// the ID's mu.
type contextRefs struct {
	sh   *shared            // the ID's own, once used
	kept map[string]*shared // a listener's: its connections' Contexts, held until it closes
}

// take empties r and returns what release must give back.
func (r *contextRefs) take() contextRefs {
	t := *r
	*r = contextRefs{}
	return t
}

// release gives back the references of t (from take); dev names the
// ID's device, which sh belongs to.
func (t contextRefs) release(dev *uverbs.Device) error {
	var errs []error
	if t.sh != nil {
		if err := contexts.release(dev.Name, t.sh); err != nil {
			errs = append(errs, err)
		}
	}
	for name, s := range t.kept {
		if err := contexts.release(name, s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Context returns the package's shared uverbs.Context of the ID's
// device, opening it on first use; the ID holds it open until the ID
// is closed, and the Context closes when no ID holds it any more (see
// the package documentation). The caller must not close it.
func (id *ID) Context() (*uverbs.Context, error) {
	s, err := id.shared("Context")
	if err != nil {
		return nil, err
	}
	return s.ctx, nil
}

func (id *ID) shared(op string) (*shared, error) {
	if err := id.alive(op); err != nil {
		return nil, err
	}
	dev, err := id.device(op)
	if err != nil {
		return nil, err
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.refs.sh == nil {
		s, err := contexts.acquire(dev)
		if err != nil {
			return nil, opError(op, id.handle, err)
		}
		id.refs.sh = s
		if id.parent != nil {
			id.parent.keep(dev)
		}
	}
	return id.refs.sh, nil
}

// keep makes a listener hold the shared Context its connections use, so
// a server that handles one connection at a time does not open and
// close the device for each (librdmacm keeps devices open for the
// process's life).
func (l *ID) keep(dev uverbs.Device) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || l.refs.kept[dev.Name] != nil {
		return
	}
	s, err := contexts.acquire(dev)
	if err != nil {
		return // the connection has its own reference; nothing is lost
	}
	if l.refs.kept == nil {
		l.refs.kept = map[string]*shared{}
	}
	l.refs.kept[dev.Name] = s
}
