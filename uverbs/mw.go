package uverbs

import (
	"fmt"
	"strconv"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// MWType is a memory window's type (ibv_mw_type).
type MWType uint8

const (
	// MWType1 windows are bound with the bind verb (ibv_bind_mw); the
	// binding belongs to no QP.
	MWType1 MWType = 1 // IB_MW_TYPE_1
	// MWType2 windows are bound by a BIND_MW work request (a SendWR with
	// Opcode WRBindMW and a MWBind) and invalidated remotely or with
	// LOCAL_INV.
	MWType2 MWType = 2 // IB_MW_TYPE_2
)

func (t MWType) String() string {
	switch t {
	case MWType1:
		return "TYPE_1"
	case MWType2:
		return "TYPE_2"
	}
	return "MWType(" + strconv.Itoa(int(t)) + ")"
}

// MW is a memory window (ibv_mw): remote access to a part of a memory
// region, granted by binding the window and revoked by invalidating it,
// without registering memory again. A fresh window is unbound.
//
// Type and Close are safe for concurrent use. RKey changes when the
// window is bound; binding is done with work requests (see MWBind).
type MW struct {
	// pv holds the window's rkey, which a posted BIND_MW changes. It is
	// the first field: a bind's MW is seen by the provider as a
	// *provider.MW (TestProviderViews).
	pv provider.MW
	resource
	typ MWType
	pd  *PD
}

// AllocMW allocates a memory window of type typ (ibv_alloc_mw). The PD
// cannot be closed while the window is open.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	if pd == nil {
		return nil, fmt.Errorf("uverbs AllocMW: nil PD: %w", errInvalid)
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, fmt.Errorf("uverbs AllocMW: %v: the types are MWType1 and MWType2: %w", typ, errInvalid)
	}
	pd.use()
	if err := pd.alive("AllocMW"); err != nil {
		pd.release()
		return nil, err
	}
	c := pd.ctx
	var resp abi.AllocMWResp
	req := abi.AllocMW{
		Response: sys.PointerTo(abi.Bytes(&resp)),
		PDHandle: pd.handle,
		MWType:   uint8(typ),
	}
	if err := c.fd.Command("uverbs AllocMW: ALLOC_MW", abi.IB_USER_VERBS_CMD_ALLOC_MW, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		pd.release()
		return nil, err
	}
	mw := &MW{typ: typ, pd: pd}
	mw.pv.RKey.Store(resp.RKey)
	mw.resource = resource{ctx: c, kind: "MW", handle: resp.MWHandle, closer: mw.destroy}
	c.track(&mw.resource)
	return mw, nil
}

func (mw *MW) destroy() error {
	m := sys.NewMethod("uverbs MW.Close: MW_DESTROY", abi.UVERBS_OBJECT_MW, abi.UVERBS_METHOD_MW_DESTROY)
	m.Handle(abi.UVERBS_ATTR_DESTROY_MW_HANDLE, mw.handle)
	if err := m.Exec(mw.ctx.fd, mw.ctx.driverID); err != nil {
		return err
	}
	mw.pd.release()
	return nil
}

// Close deallocates the window (ibv_dealloc_mw). A second Close returns
// ErrClosed.
func (mw *MW) Close() error {
	if mw == nil {
		return errNil("MW.Close", "MW")
	}
	return mw.closeAs("MW")
}

// RKey is the key remote peers use with the window once it is bound (0
// for a nil MW).
func (mw *MW) RKey() uint32 {
	if mw == nil {
		return 0
	}
	return mw.pv.RKey.Load()
}

// Type is the window's type.
func (mw *MW) Type() MWType {
	if mw == nil {
		return 0
	}
	return mw.typ
}

// PD is the protection domain the window belongs to.
func (mw *MW) PD() *PD {
	if mw == nil {
		return nil
	}
	return mw.pd
}
