package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// PD is a protection domain (ibv_pd): MRs, MWs, QPs, SRQs and AHs belong
// to one, and only objects of the same PD work together. Safe for
// concurrent use.
//
// A parent domain (AllocParentDomain) is a PD too: it stands for its
// parent in the kernel and hands its thread domain to the objects made
// on it.
type PD struct {
	resource
	td     *TD // a parent domain's thread domain; nil for a plain PD
	parent *PD
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if c == nil {
		return nil, errNil("AllocPD", "Context")
	}
	if c.closed.Load() {
		return nil, closedContext("uverbs AllocPD")
	}
	var req abi.AllocPD
	var resp abi.AllocPDResp
	req.Response = sys.PointerTo(abi.Bytes(&resp))
	if err := c.fd.Command("uverbs AllocPD: ALLOC_PD", abi.IB_USER_VERBS_CMD_ALLOC_PD, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		return nil, err
	}
	pd := &PD{resource: resource{ctx: c, kind: "PD", handle: resp.PDHandle}}
	pd.closer = func() error {
		m := sys.NewMethod("uverbs PD.Close: PD_DESTROY", abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY)
		m.Handle(abi.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle)
		return m.Exec(c.fd, c.driverID)
	}
	c.track(&pd.resource)
	return pd, nil
}

// AllocParentDomain makes a parent domain of pd with td
// (ibv_alloc_parent_domain, the second half of ibv_alloc_td(3)): a PD
// that MRs, MWs, AHs, QPs and SRQs are made on as on pd, and whose QPs
// and SRQs, and CQs naming it in CQConfig.ParentDomain, take td when
// their config names none, so they take no lock. It is a purerdma
// object, not a kernel one: the kernel sees pd. pd and td cannot be
// closed while the parent domain is open.
func (c *Context) AllocParentDomain(pd *PD, td *TD) (*PD, error) {
	const op = "AllocParentDomain"
	if c == nil {
		return nil, errNil(op, "Context")
	}
	if pd == nil {
		return nil, errNil(op, "PD")
	}
	if td == nil {
		return nil, errNil(op, "TD")
	}
	if pd.td != nil {
		return nil, fmt.Errorf("uverbs %s: the PD is a parent domain already: %w", op, errInvalid)
	}
	if err := pd.usable("AllocParentDomain", c); err != nil {
		return nil, err
	}
	if err := td.usable("AllocParentDomain", c); err != nil {
		return nil, err
	}
	d := &PD{resource: resource{ctx: c, kind: "parent domain", handle: pd.handle}, td: td, parent: pd}
	pd.use()
	td.use()
	d.closer = func() error {
		pd.release()
		td.release()
		return nil
	}
	c.track(&d.resource)
	return d, nil
}

// TD is a parent domain's thread domain, nil for a plain PD.
func (pd *PD) TD() *TD {
	if pd == nil {
		return nil
	}
	return pd.td
}

// inheritTD is the TD an object made on pd takes when its config names
// none.
func (pd *PD) inheritTD(td *TD) *TD {
	if td == nil && pd != nil {
		return pd.td
	}
	return td
}

// Close deallocates the PD (ibv_dealloc_pd). It fails with EBUSY, and
// the PD stays usable, while objects created on it are open.
func (pd *PD) Close() error {
	if pd == nil {
		return errNil("PD.Close", "PD")
	}
	return pd.closeAs("PD")
}

// Context is the context the PD belongs to (nil for a nil PD).
func (pd *PD) Context() *Context {
	if pd == nil {
		return nil
	}
	return pd.ctx
}
