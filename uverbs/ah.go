package uverbs

import (
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// AH is an address handle (ibv_ah): the destination of UD sends.
type AH struct {
	// pv is what the provider keeps of the AH. It is the first field:
	// a work request's AH is seen by the provider as a *provider.AH
	// (TestProviderViews).
	pv provider.AH
	resource
	pd   *PD
	attr AHAttr
}

// CreateAH creates an address handle (ibv_create_ah). On RoCE the
// address must be global (IsGlobal, GRH.DGID, GRH.SGIDIndex): on a port
// that requires a GRH (PortAttr.GRHRequired: RoCE ports, and InfiniBand
// ports that say so) an address without IsGlobal fails before the
// kernel call with an error matching EINVAL that names the port and the
// fields to set.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	if pd == nil {
		return nil, errNil("CreateAH", "PD")
	}
	c := pd.ctx
	if err := pd.alive("CreateAH"); err != nil {
		return nil, err
	}
	if err := c.checkPort("uverbs CreateAH: PortNum", attr.PortNum); err != nil {
		return nil, err
	}
	if err := c.checkGRH("CreateAH", "AHAttr", &attr); err != nil {
		return nil, err
	}
	// The provider builds its address from the port's link layer
	// (mlx5: a RoCE address vector or an InfiniBand one).
	eth, err := c.portIsEthernet(attr.PortNum)
	if err != nil {
		return nil, err
	}
	ah := &AH{pd: pd, attr: attr}
	ah.resource = resource{ctx: c, kind: "AH"}
	drvLen := c.prov.AHDriverOutLen()
	resp := make([]byte, abi.OffsetofCreateAHRespDriverData+drvLen)
	req := abi.CreateAH{PDHandle: pd.handle, Attr: abi.AHAttr{
		GRH: abi.GlobalRoute{DGID: attr.GRH.DGID, FlowLabel: attr.GRH.FlowLabel, SGIDIndex: uint8(attr.GRH.SGIDIndex),
			HopLimit: attr.GRH.HopLimit, TrafficClass: attr.GRH.TrafficClass},
		DLID: attr.DLID, SL: attr.SL, SrcPathBits: attr.SrcPathBits, StaticRate: attr.StaticRate,
		IsGlobal: boolByte(attr.IsGlobal), PortNum: uint8(attr.PortNum),
	}}
	req.Response = sys.PointerTo(resp)
	if err := c.fd.Command("uverbs CreateAH: CREATE_AH", abi.IB_USER_VERBS_CMD_CREATE_AH, abi.Bytes(&req), resp); err != nil {
		return nil, err
	}
	var core abi.CreateAHResp
	copy(abi.Bytes(&core), resp)
	ah.handle = core.AHHandle
	destroy := func() error {
		m := sys.NewMethod("uverbs AH.Close: AH_DESTROY", abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY)
		m.Handle(abi.UVERBS_ATTR_DESTROY_AH_HANDLE, ah.handle)
		return m.Exec(c.fd, c.driverID)
	}
	g := attr.GRH
	pattr := provider.AHAttr{DLID: attr.DLID, SL: attr.SL, SrcPathBits: attr.SrcPathBits, StaticRate: attr.StaticRate,
		IsGlobal: attr.IsGlobal, PortNum: uint8(attr.PortNum), DGID: g.DGID, FlowLabel: g.FlowLabel,
		SGIDIndex: uint8(g.SGIDIndex), HopLimit: g.HopLimit, TrafficClass: g.TrafficClass, Ethernet: eth}
	if err := c.prov.AHCreated(&ah.pv, &pattr, resp[abi.OffsetofCreateAHRespDriverData:]); err != nil {
		destroy()
		return nil, err
	}
	ah.closer = func() error {
		if err := destroy(); err != nil {
			return err
		}
		pd.release()
		return nil
	}
	pd.use()
	c.track(&ah.resource)
	return ah, nil
}

// Attr is the address the AH was created with.
func (ah *AH) Attr() AHAttr {
	if ah == nil {
		return AHAttr{}
	}
	return ah.attr
}

// Close destroys the AH (ibv_destroy_ah).
func (ah *AH) Close() error {
	if ah == nil {
		return errNil("AH.Close", "AH")
	}
	return ah.closeAs("AH")
}
