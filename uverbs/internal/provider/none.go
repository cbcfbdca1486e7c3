package provider

import (
	"fmt"

	"github.com/purerdma/rdma/internal/sys"
)

// Unsupported is the provider of a device whose driver has none in
// purerdma: the control path works (uverbs' own commands), and every
// queue creation fails with ErrNotSupported naming the driver.
type Unsupported struct {
	Driver string
	ID     uint32
}

func (p Unsupported) err() error {
	return fmt.Errorf("driver %q (id %d) has no purerdma provider, only rxe, siw and mlx5 have: queues %w", p.Driver, p.ID, sys.ErrNotSupported)
}
func (p Unsupported) Name() string                   { return p.Driver }
func (Unsupported) ContextDriverData() ([]byte, int) { return nil, 0 }
func (Unsupported) ContextCreated([]byte) error      { return nil }
func (p Unsupported) CQDriverData(int) (DriverReq, error) {
	return DriverReq{}, p.err()
}
func (p Unsupported) NewCQ(*CQ, DriverReq, []byte) (CQQueue, error) { return nil, p.err() }
func (p Unsupported) QPDriverData(*QPConfig) (DriverReq, error) {
	return DriverReq{}, p.err()
}
func (p Unsupported) NewQP(*QP, DriverReq, []byte) (QPQueues, error) { return nil, p.err() }
func (p Unsupported) SRQDriverData(*SRQConfig) (DriverReq, error) {
	return DriverReq{}, p.err()
}
func (p Unsupported) NewSRQ(*SRQ, DriverReq, []byte) (SRQQueue, error) { return nil, p.err() }
func (Unsupported) AHDriverOutLen() int                                { return 0 }
func (Unsupported) AHCreated(*AH, *AHAttr, []byte) error               { return nil }
func (Unsupported) Close()                                             {}
