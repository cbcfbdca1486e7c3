package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// CQConfig describes a completion queue.
type CQConfig struct {
	// Size is the minimum number of completions the CQ holds; the
	// device may round it up (CQ.Size says what it got).
	//
	// Size it for every completion that can be waiting to be polled:
	// the signaled sends and posted receives of all QPs using it, plus
	// one per outstanding WR when a QP can fail (an error flushes them
	// all). A completion that finds the CQ full is lost; the device
	// reports EventCQErr through Context.AsyncEvent.
	Size int
	// Channel, if set, receives an event when the CQ was armed with
	// RequestNotify and a completion arrives. Several CQs may share one.
	Channel *CompChannel
	// CompVector selects the completion vector (0 .. NumCompVectors-1).
	CompVector int
	// TD, if set, makes Poll lock-free: one goroutine at a time only.
	TD *TD
	// ParentDomain, if set, gives the CQ its thread domain when TD is
	// nil (ibv_cq_init_attr_ex.parent_domain).
	ParentDomain *PD
}

// CQ is a completion queue (ibv_cq). Poll reads completions from memory
// shared with the kernel, without a system call.
//
// Poll, RequestNotify, Resize and Close are safe for concurrent use
// unless the CQ was created with a TD.
type CQ struct {
	resource
	mu         provider.QLock
	locks      bool
	q          provider.CQQueue
	pv         provider.CQ // what the provider knows of the CQ
	door       cqDoor      // Poll's direct path into a provider (door.go)
	size       int
	channel    *CompChannel
	td         *TD
	userHandle uint64
	events     atomic.Uint32 // completion events delivered by the channel
	acked      atomic.Uint32
}

// CreateCQ creates a completion queue (ibv_create_cq).
func (c *Context) CreateCQ(cfg CQConfig) (*CQ, error) {
	if c == nil {
		return nil, errNil("CreateCQ", "Context")
	}
	if c.closed.Load() {
		return nil, closedContext("uverbs CreateCQ")
	}
	if err := c.checkCQSize("CreateCQ", "Size", cfg.Size); err != nil {
		return nil, err
	}
	if cfg.CompVector < 0 || cfg.CompVector >= max(c.numCompVectors, 1) {
		return nil, fmt.Errorf("uverbs CreateCQ: completion vector %d: the device has %d: %w", cfg.CompVector, c.numCompVectors, errInvalid)
	}
	if cfg.Channel != nil {
		if err := cfg.Channel.usable("CreateCQ", c); err != nil {
			return nil, err
		}
	}
	if cfg.ParentDomain != nil {
		if cfg.ParentDomain.td == nil {
			return nil, fmt.Errorf("uverbs CreateCQ: ParentDomain is a plain PD, not a parent domain: %w", errInvalid)
		}
		if err := cfg.ParentDomain.usable("CreateCQ", c); err != nil {
			return nil, err
		}
		cfg.TD = cfg.ParentDomain.inheritTD(cfg.TD)
	}
	if cfg.TD != nil {
		if err := cfg.TD.usable("CreateCQ", c); err != nil {
			return nil, err
		}
	}
	cq := &CQ{locks: lockFor(cfg.TD), channel: cfg.Channel, td: cfg.TD}
	cq.resource = resource{ctx: c, kind: "CQ"}
	userHandle := c.newUserHandle(cq)
	cq.userHandle = userHandle

	req, err := c.prov.CQDriverData(cfg.Size)
	if err != nil {
		c.dropUserHandle(userHandle)
		return nil, providerErr("CreateCQ", err)
	}
	size := cfg.Size
	if req.Size != 0 {
		size = req.Size
	}
	var respCQE uint32
	m := sys.NewMethod("uverbs CreateCQ: CQ_CREATE", abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE)
	h := m.NewHandle(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	m.Out(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, abi.Bytes(&respCQE))
	m.InUint(abi.UVERBS_ATTR_CREATE_CQ_CQE, uint64(size), 4)
	m.InUint(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, userHandle, 8)
	if cfg.Channel != nil {
		m.FD(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, cfg.Channel.Fd())
	}
	m.InUint(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint64(cfg.CompVector), 4)
	m.FD(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.async.Fd())
	m.Optional()
	driverOut := c.driverData(m, &req)
	if err := c.exec(m); err != nil {
		req.Abort()
		c.dropUserHandle(userHandle)
		return nil, err
	}
	cq.handle = uint32(m.Result(h))
	cq.size = int(respCQE)
	cq.closer = cq.destroy
	cq.pv.Handle = cq.handle
	if cq.locks {
		cq.pv.Lock = &cq.mu
	}
	q, err := c.prov.NewCQ(&cq.pv, req, driverOut)
	if err != nil {
		cq.destroy()
		req.Abort()
		return nil, providerErr("CreateCQ", err)
	}
	cq.q = q
	cq.door.open(q, cq.locks)
	if cfg.Channel != nil {
		cfg.Channel.add(userHandle, cq)
		cfg.Channel.use()
	}
	if cfg.TD != nil {
		cfg.TD.use()
	}
	c.track(&cq.resource)
	return cq, nil
}

// checkCQSize checks a CQ size before the kernel gets it as 32 bits:
// at least 1, at most the device's MaxCQE.
func (c *Context) checkCQSize(op, field string, size int) error {
	if size < 1 {
		return fmt.Errorf("uverbs %s: %s %d: must be at least 1: %w", op, field, size, errInvalid)
	}
	return c.checkSize(op, field, uint64(size), func(a *DeviceAttr) int { return a.MaxCQE })
}

// driverData adds the provider's driver data to a create method and
// returns the buffer the kernel fills.
func (c *Context) driverData(m *sys.Method, req *provider.DriverReq) []byte {
	if len(req.In) > 0 {
		m.In(abi.UVERBS_ATTR_UHW_IN, req.In)
	}
	if req.OutLen == 0 {
		return nil
	}
	out := make([]byte, req.OutLen)
	m.Out(abi.UVERBS_ATTR_UHW_OUT, out)
	return out
}

func (cq *CQ) destroy() error {
	if cq.locks {
		cq.mu.Lock()
		defer cq.mu.Unlock()
	}
	var resp abi.DestroyCQResp
	m := sys.NewMethod("uverbs CQ.Close: CQ_DESTROY", abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY)
	m.Handle(abi.UVERBS_ATTR_DESTROY_CQ_HANDLE, cq.handle)
	m.Out(abi.UVERBS_ATTR_DESTROY_CQ_RESP, abi.Bytes(&resp))
	if err := m.Exec(cq.ctx.fd, cq.ctx.driverID); err != nil {
		return err
	}
	var err error
	cq.door.close()
	if cq.q != nil {
		err = cq.q.Unmap()
	}
	cq.ctx.dropUserHandle(cq.userHandle)
	if cq.channel != nil {
		cq.channel.removeCQ(cq)
		cq.channel.release()
	}
	if cq.td != nil {
		cq.td.release()
	}
	return err
}

// Close destroys the CQ (ibv_destroy_cq). It fails with EBUSY, and the CQ
// stays usable, while QPs or SRQs use it.
func (cq *CQ) Close() error {
	if cq == nil {
		return errNil("CQ.Close", "CQ")
	}
	return cq.closeAs("CQ")
}

// Size is how many completions the CQ holds (0 for a nil CQ).
func (cq *CQ) Size() int {
	if cq == nil {
		return 0
	}
	return cq.size
}

var errClosedCQ = &sys.Error{Op: "uverbs CQ.Poll", Err: fmt.Errorf("CQ: %w", ErrClosed)}

// RequestNotify arms the CQ: its channel gets an event for the next
// completion, or with solicitedOnly for the next solicited or error
// completion (ibv_req_notify_cq). One event per arming.
func (cq *CQ) RequestNotify(solicitedOnly bool) error {
	if cq == nil {
		return errNil("CQ.RequestNotify", "CQ")
	}
	if err := cq.alive("CQ.RequestNotify"); err != nil {
		return err
	}
	if a, ok := cq.q.(provider.CQArmer); ok {
		if cq.locks {
			cq.mu.Lock()
			defer cq.mu.Unlock()
		}
		return a.Arm(solicitedOnly)
	}
	req := abi.ReqNotifyCQ{CQHandle: cq.handle}
	if solicitedOnly {
		req.SolicitedOnly = 1
	}
	return cq.ctx.fd.Command("uverbs CQ.RequestNotify: REQ_NOTIFY_CQ", abi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, abi.Bytes(&req), nil)
}

// AckEvents acknowledges n completion events returned by the channel's
// Wait (ibv_ack_cq_events). Go's garbage collector makes unacknowledged
// events harmless; the count is kept for Unacked. n is capped at the
// events not yet acknowledged; n <= 0, or a nil CQ, acknowledges none.
func (cq *CQ) AckEvents(n int) {
	if cq == nil || n <= 0 {
		return
	}
	for {
		acked := cq.acked.Load()
		k := uint32(min(n, int(cq.events.Load()-acked)))
		if cq.acked.CompareAndSwap(acked, acked+k) {
			return
		}
	}
}

// Unacked is how many events Wait returned for this CQ that AckEvents has
// not acknowledged (0 for a nil CQ).
func (cq *CQ) Unacked() int {
	if cq == nil {
		return 0
	}
	return int(cq.events.Load() - cq.acked.Load())
}

// Resize changes the CQ's size, keeping its completions (ibv_resize_cq).
// size must be at least 1 and at most the device's MaxCQE, and (EINVAL
// otherwise) at least the completions waiting in the CQ. The CQ's new
// size, which Size reports, may be larger: mlx5 rounds as at CreateCQ,
// and a size that rounds to the present one changes nothing.
func (cq *CQ) Resize(size int) error {
	if cq == nil {
		return errNil("CQ.Resize", "CQ")
	}
	if err := cq.ctx.checkCQSize("CQ.Resize", "size", size); err != nil {
		return err
	}
	if f, ok := cq.q.(provider.FixedSize); ok {
		return fmt.Errorf("uverbs CQ.Resize: %s: %w", f.FixedSize(), ErrNotSupported)
	}
	if cq.locks {
		cq.mu.Lock()
		defer cq.mu.Unlock()
	}
	if err := cq.alive("CQ.Resize"); err != nil {
		return err
	}
	var drv provider.DriverReq
	if r, ok := cq.q.(provider.CQResizer); ok {
		var same bool
		var err error
		if drv, same, err = r.ResizeReq(size); err != nil {
			return providerErr("CQ.Resize", err)
		} else if same {
			return nil
		}
		size = drv.Size
	}
	drvLen := cq.q.ResizeDriverOutLen()
	resp := make([]byte, abi.OffsetofResizeCQRespDriverData+drvLen)
	req := abi.ResizeCQ{CQHandle: cq.handle, CQE: uint32(size)}
	req.Response = sys.PointerTo(resp)
	in := append(append([]byte{}, abi.Bytes(&req)...), drv.In...) // the core request, then the driver's
	if err := cq.ctx.fd.Command("uverbs CQ.Resize: RESIZE_CQ", abi.IB_USER_VERBS_CMD_RESIZE_CQ, in, resp); err != nil {
		drv.Abort()
		return err
	}
	var core abi.ResizeCQResp
	copy(abi.Bytes(&core), resp)
	cq.size = int(core.CQE)
	if err := cq.q.Resized(resp[abi.OffsetofResizeCQRespDriverData:]); err != nil {
		return providerErr("CQ.Resize", err)
	}
	return nil
}
