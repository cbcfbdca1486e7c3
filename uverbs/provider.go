package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/mlx5"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"github.com/purerdma/rdma/uverbs/internal/rxe"
	"github.com/purerdma/rdma/uverbs/internal/siw"
)

// The providers, one package per driver, behind the interface of
// uverbs/internal/provider (docs/providers.md): newProvider picks one
// from the kernel's driver id when a context opens.
func newProvider(c *Context) provider.Provider {
	switch c.driverID {
	case abi.RDMA_DRIVER_RXE:
		return rxe.New((*provCtx)(c))
	case abi.RDMA_DRIVER_MLX5:
		return mlx5.NewProvider((*provCtx)(c))
	case abi.RDMA_DRIVER_SIW:
		return siw.New((*provCtx)(c))
	}
	return noProvider{driver: c.dev.DriverName, id: c.driverID}
}

// provCtx is a Context as its provider sees it (provider.Context).
type provCtx Context

func (c *provCtx) FD() *sys.FD                   { return c.fd }
func (c *provCtx) Exec(m *sys.Method) error      { return (*Context)(c).exec(m) }
func (c *provCtx) CapsEx() (uint64, error)       { return (*Context)(c).capsEx() }
func (c *provCtx) SawErrorCompletion(qpn uint32) { (*Context)(c).sawErrorCompletion(qpn) }
func (c *provCtx) PostError(i int, wrid uint64, err error) error {
	return postError(i, wrid, err)
}

func (c *provCtx) PortIsEthernet(port uint8) (bool, error) {
	pa, err := (*Context)(c).QueryPort(int(port))
	return pa.LinkLayer == LinkLayerEthernet, err
}

// qpOwner is a QP as its provider sees it (provider.QPOwner).
type qpOwner QP

func (q *qpOwner) CheckSend(wr *provider.SendWR) error {
	return (*QP)(q).checkSend(provider.As[SendWR](wr))
}
func (q *qpOwner) ModifyToErr() error {
	return (*QP)(q).Modify(&QPAttr{State: QPStateErr}, QPAttrState)
}
func (q *qpOwner) FlushRecvs() error { return (*QP)(q).flushRecvs() }

// The views providers take of the public work requests and completions
// (provider.As; TestProviderViews checks the layouts).
func sendWRView(wr *SendWR) *provider.SendWR { return provider.As[provider.SendWR](wr) }
func recvWRView(wr *RecvWR) *provider.RecvWR { return provider.As[provider.RecvWR](wr) }
func wcView(wc []WorkCompletion) []provider.WC {
	return provider.SliceAs[provider.WC](wc)
}

// noProvider serves the control path of devices without a purerdma
// provider; queues report ErrNotSupported naming the driver.
type noProvider struct {
	driver string
	id     uint32
}

func (p noProvider) err() error {
	return fmt.Errorf("uverbs: driver %q (id %d) has no purerdma provider, only rxe, siw and mlx5 have: queues %w", p.driver, p.id, ErrNotSupported)
}
func (p noProvider) Name() string                   { return p.driver }
func (noProvider) ContextDriverData() ([]byte, int) { return nil, 0 }
func (noProvider) ContextCreated([]byte) error      { return nil }
func (p noProvider) CQDriverData(int) (provider.DriverReq, error) {
	return provider.DriverReq{}, p.err()
}
func (p noProvider) NewCQ(*provider.CQ, provider.DriverReq, []byte) (provider.CQQueue, error) {
	return nil, p.err()
}
func (p noProvider) QPDriverData(*provider.QPConfig) (provider.DriverReq, error) {
	return provider.DriverReq{}, p.err()
}
func (p noProvider) NewQP(*provider.QP, provider.DriverReq, []byte) (provider.QPQueues, error) {
	return nil, p.err()
}
func (p noProvider) SRQDriverData(*provider.SRQConfig) (provider.DriverReq, error) {
	return provider.DriverReq{}, p.err()
}
func (p noProvider) NewSRQ(*provider.SRQ, provider.DriverReq, []byte) (provider.SRQQueue, error) {
	return nil, p.err()
}
func (noProvider) AHDriverOutLen() int                                    { return 0 }
func (noProvider) AHCreated(*provider.AH, *provider.AHAttr, []byte) error { return nil }
func (noProvider) Close()                                                 {}
