package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// SRQConfig describes a shared receive queue.
type SRQConfig struct {
	MaxWR  uint32 // receive work requests it holds
	MaxSGE uint32 // scatter/gather entries per request
	// Limit, if not 0, arms the SRQ limit event: an async
	// SRQ_LIMIT_REACHED event when fewer than Limit requests remain.
	Limit uint32
	TD    *TD // if set, PostRecv is lock-free: one goroutine at a time
}

// SRQAttr are an SRQ's current attributes (ibv_srq_attr). From Query,
// MaxWR is how many receives the SRQ holds: that many can be posted at
// once, one more fails with ErrBusy.
type SRQAttr struct {
	MaxWR  uint32
	MaxSGE uint32
	Limit  uint32
}

// SRQ is a shared receive queue (ibv_srq): receive buffers several QPs
// of the same PD draw from. Safe for concurrent use unless created with
// a TD.
type SRQ struct {
	resource
	pd         *PD
	td         *TD
	userHandle uint64
	locks      bool
	mu         provider.QLock
	q          provider.SRQQueue
	// pv is what the provider knows of the SRQ; it sets Num and MaxWR
	// (the receives PostRecv takes at once: what its queue holds).
	pv provider.SRQ
}

// CreateSRQ creates a shared receive queue (ibv_create_srq). The SRQ
// may hold more than MaxWR receives (the device rounds up); Query says
// how many.
func (pd *PD) CreateSRQ(cfg SRQConfig) (*SRQ, error) {
	if pd == nil {
		return nil, errNil("CreateSRQ", "PD")
	}
	c := pd.ctx
	if err := pd.alive("CreateSRQ"); err != nil {
		return nil, err
	}
	cfg.TD = pd.inheritTD(cfg.TD)
	if cfg.MaxWR == 0 || cfg.MaxSGE == 0 {
		return nil, fmt.Errorf("uverbs CreateSRQ: MaxWR and MaxSGE must be at least 1: %w", errInvalid)
	}
	if err := c.checkSize("CreateSRQ", "MaxWR", uint64(cfg.MaxWR), func(a *DeviceAttr) int { return a.MaxSRQWR }); err != nil {
		return nil, err
	}
	if err := c.checkSize("CreateSRQ", "MaxSGE", uint64(cfg.MaxSGE), func(a *DeviceAttr) int { return a.MaxSRQSGE }); err != nil {
		return nil, err
	}
	if cfg.Limit > cfg.MaxWR {
		return nil, fmt.Errorf("uverbs CreateSRQ: Limit %d is more than MaxWR %d: %w", cfg.Limit, cfg.MaxWR, errInvalid)
	}
	if cfg.TD != nil {
		if err := cfg.TD.usable("CreateSRQ", c); err != nil {
			return nil, err
		}
	}
	srq := &SRQ{pd: pd, td: cfg.TD, locks: lockFor(cfg.TD)}
	srq.resource = resource{ctx: c, kind: "SRQ"}
	srq.userHandle = c.newUserHandle(srq)
	// The provider may round MaxWR and MaxSGE to what its queue holds.
	sizes := provider.SRQConfig{MaxWR: cfg.MaxWR, MaxSGE: cfg.MaxSGE}
	req, err := c.prov.SRQDriverData(&sizes)
	if err != nil {
		c.dropUserHandle(srq.userHandle)
		return nil, providerErr("CreateSRQ", err)
	}
	cfg.MaxWR, cfg.MaxSGE = sizes.MaxWR, sizes.MaxSGE
	var maxWR, maxSGE uint32
	m := sys.NewMethod("uverbs CreateSRQ: SRQ_CREATE", abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE)
	h := m.NewHandle(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
	m.Handle(abi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.handle)
	m.InUint(abi.UVERBS_ATTR_CREATE_SRQ_TYPE, abi.IB_UVERBS_SRQT_BASIC, 8)
	m.InUint(abi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, srq.userHandle, 8)
	m.InUint(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, uint64(cfg.MaxWR), 4)
	m.InUint(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, uint64(cfg.MaxSGE), 4)
	m.InUint(abi.UVERBS_ATTR_CREATE_SRQ_LIMIT, uint64(cfg.Limit), 4)
	m.FD(abi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, c.async.Fd())
	m.Out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, abi.Bytes(&maxWR))
	m.Out(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, abi.Bytes(&maxSGE))
	driverOut := c.driverData(m, &req)
	if err := c.exec(m); err != nil {
		req.Abort()
		c.dropUserHandle(srq.userHandle)
		return nil, err
	}
	srq.handle = uint32(m.Result(h))
	srq.pv = provider.SRQ{Handle: srq.handle, MaxWR: maxWR, MaxSGE: maxSGE}
	if srq.locks {
		srq.pv.Lock = &srq.mu
	}
	srq.closer = srq.destroy
	q, err := c.prov.NewSRQ(&srq.pv, req, driverOut)
	if err != nil {
		srq.destroyKernel()
		req.Abort()
		c.dropUserHandle(srq.userHandle)
		return nil, providerErr("CreateSRQ", err)
	}
	srq.q = q
	pd.use()
	if cfg.TD != nil {
		cfg.TD.use()
	}
	c.track(&srq.resource)
	return srq, nil
}

func (srq *SRQ) destroyKernel() error {
	var resp abi.DestroySRQResp
	m := sys.NewMethod("uverbs SRQ.Close: SRQ_DESTROY", abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY)
	m.Handle(abi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, srq.handle)
	m.Out(abi.UVERBS_ATTR_DESTROY_SRQ_RESP, abi.Bytes(&resp))
	return m.Exec(srq.ctx.fd, srq.ctx.driverID)
}

func (srq *SRQ) destroy() error {
	if srq.locks {
		srq.mu.Lock()
		defer srq.mu.Unlock()
	}
	if err := srq.destroyKernel(); err != nil {
		return err
	}
	err := srq.q.Unmap()
	srq.ctx.dropUserHandle(srq.userHandle)
	srq.pd.release()
	if srq.td != nil {
		srq.td.release()
	}
	return err
}

// Close destroys the SRQ (ibv_destroy_srq); it fails with EBUSY while QPs
// use it.
func (srq *SRQ) Close() error {
	if srq == nil {
		return errNil("SRQ.Close", "SRQ")
	}
	return srq.closeAs("SRQ")
}

// Num is the SRQ number, as the provider reports it (rxe does); 0 for a
// nil SRQ.
func (srq *SRQ) Num() uint32 {
	if srq == nil {
		return 0
	}
	return srq.pv.Num
}

// PostRecv posts a chain of receive work requests (ibv_post_srq_recv),
// without a system call or an allocation. A full SRQ (Query's MaxWR
// receives posted and not yet used) fails at once with an error
// matching ErrBusy.
func (srq *SRQ) PostRecv(wr *RecvWR) error {
	if srq == nil || wr == nil {
		if srq == nil {
			return errNil("SRQ.PostRecv", "SRQ")
		}
		return errNil("SRQ.PostRecv", "work request")
	}
	if srq.locks {
		return srq.postRecvLocked(wr)
	}
	return srq.postRecvUnlocked(wr)
}

// postRecvLocked: see QP.postSendLocked.
func (srq *SRQ) postRecvLocked(wr *RecvWR) error {
	srq.mu.Lock()
	defer srq.mu.Unlock()
	return srq.postRecvUnlocked(wr)
}

func (srq *SRQ) postRecvUnlocked(wr *RecvWR) error {
	if srq.closed.Load() {
		return &sys.Error{Op: "uverbs SRQ.PostRecv", Err: fmt.Errorf("SRQ: %w", ErrClosed)}
	}
	return srq.q.PostRecv(recvWRView(wr))
}

// SRQAttrMask selects what Modify changes (ibv_srq_attr_mask).
type SRQAttrMask uint32

const (
	SRQMaxWR SRQAttrMask = 1 << 0 // resize (if the device can)
	SRQLimit SRQAttrMask = 1 << 1 // arm the limit event
)

// Modify resizes the SRQ or arms its limit event (ibv_modify_srq).
func (srq *SRQ) Modify(attr *SRQAttr, mask SRQAttrMask) error {
	if srq == nil {
		return errNil("SRQ.Modify", "SRQ")
	}
	if attr == nil {
		return errNil("SRQ.Modify", "attr")
	}
	if mask == 0 || mask&^(SRQMaxWR|SRQLimit) != 0 {
		return fmt.Errorf("uverbs SRQ.Modify: mask %#x: %w", uint32(mask), errInvalid)
	}
	if mask&SRQMaxWR != 0 {
		if attr.MaxWR == 0 {
			return fmt.Errorf("uverbs SRQ.Modify: MaxWR 0: %w", errInvalid)
		}
		if err := srq.ctx.checkSize("modify SRQ", "MaxWR", uint64(attr.MaxWR), func(a *DeviceAttr) int { return a.MaxSRQWR }); err != nil {
			return err
		}
	}
	if mask&SRQMaxWR != 0 && srq.locks {
		srq.mu.Lock()
		defer srq.mu.Unlock()
	}
	if err := srq.alive("SRQ.Modify"); err != nil {
		return err
	}
	if mask&SRQLimit != 0 {
		room := srq.pv.MaxWR
		if mask&SRQMaxWR != 0 {
			room = attr.MaxWR
		}
		if attr.Limit > room {
			return fmt.Errorf("uverbs SRQ.Modify: Limit %d is more than the %d receives the SRQ holds: %w", attr.Limit, room, errInvalid)
		}
	}
	if f, ok := srq.q.(provider.FixedSize); ok && mask&SRQMaxWR != 0 {
		return fmt.Errorf("uverbs SRQ.Modify: MaxWR: %s: %w", f.FixedSize(), ErrNotSupported)
	}
	drvIn, drvOut := srq.q.ModifyDriverData()
	core := abi.ModifySRQ{SRQHandle: srq.handle, AttrMask: uint32(mask), MaxWR: attr.MaxWR, SRQLimit: attr.Limit}
	in := append(append([]byte{}, abi.Bytes(&core)...), drvIn...)
	err := srq.ctx.fd.CommandPinned("uverbs SRQ.Modify: MODIFY_SRQ", abi.IB_USER_VERBS_CMD_MODIFY_SRQ, in, drvOut)
	if err != nil {
		return err
	}
	return srq.q.Modified(mask&SRQMaxWR != 0) // sets pv.MaxWR after a resize
}

// Query reads the SRQ's attributes (ibv_query_srq). MaxWR is how many
// receives PostRecv takes at once, which is what the SRQ's queue holds.
// (6.1's rxe reports its queue's size while telling CreateSRQ the size
// asked for; the library posts up to the queue's size.)
func (srq *SRQ) Query() (SRQAttr, error) {
	if srq == nil {
		return SRQAttr{}, errNil("SRQ.Query", "SRQ")
	}
	if err := srq.alive("SRQ.Query"); err != nil {
		return SRQAttr{}, err
	}
	var resp abi.QuerySRQResp
	req := abi.QuerySRQ{SRQHandle: srq.handle}
	req.Response = sys.PointerTo(abi.Bytes(&resp))
	if err := srq.ctx.fd.Command("uverbs SRQ.Query: QUERY_SRQ", abi.IB_USER_VERBS_CMD_QUERY_SRQ, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		return SRQAttr{}, err
	}
	return SRQAttr{MaxWR: srq.pv.MaxWR, MaxSGE: resp.MaxSGE, Limit: resp.SRQLimit}, nil
}
