package uverbs

import (
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// PD is a protection domain (ibv_pd): MRs, MWs, QPs, SRQs and AHs belong
// to one, and only objects of the same PD work together. Safe for
// concurrent use.
type PD struct {
	resource
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if c == nil {
		return nil, errNil("Context.AllocPD", "Context")
	}
	if c.closed.Load() {
		return nil, errClosedContext
	}
	var req abi.AllocPD
	var resp abi.AllocPDResp
	req.Response = uint64(sys.PointerTo(abi.Bytes(&resp)))
	if err := c.fd.Command("uverbs ALLOC_PD", abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		return nil, err
	}
	pd := &PD{resource{ctx: c, kind: "PD", handle: resp.PDHandle}}
	pd.closer = func() error {
		m := sys.NewMethod("uverbs PD_DESTROY", abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY)
		m.Handle(abi.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle)
		return m.Exec(c.fd, c.driverID)
	}
	c.track(&pd.resource)
	return pd, nil
}

// Close deallocates the PD (ibv_dealloc_pd). It fails with EBUSY, and
// the PD stays usable, while objects created on it are open.
func (pd *PD) Close() error {
	if pd == nil {
		return errNil("PD.Close", "PD")
	}
	return pd.close()
}

// Context is the context the PD belongs to (nil for a nil PD).
func (pd *PD) Context() *Context {
	if pd == nil {
		return nil
	}
	return pd.ctx
}
