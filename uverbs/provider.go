package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/internal/abi"
)

// provider is the driver-specific half of the verbs, chosen from the
// kernel's driver id when a context opens (libibverbs' providers). It
// supplies the driver data that create commands carry and turns their
// driver responses into the fast-path queues it owns. rxe is the first;
// mlx5 (UAR doorbells, BlueFlame) plugs in here next.
type provider interface {
	name() string
	contextDriverData() (in []byte, outLen int)
	contextCreated(out []byte)
	// cqDriverData / newCQ: driver data of CREATE_CQ and the queue it maps.
	cqDriverData() (in []byte, outLen int)
	newCQ(cq *CQ, driverOut []byte) (cqQueue, error)
	qpDriverData() (in []byte, outLen int)
	newQP(qp *QP, driverOut []byte) (qpQueues, error)
	srqDriverData() (in []byte, outLen int)
	newSRQ(srq *SRQ, driverOut []byte) (srqQueue, error)
	ahDriverOutLen() int
	ahCreated(ah *AH, driverOut []byte)
	close()
}

// cqQueue polls a CQ's completions without system calls.
type cqQueue interface {
	poll(wc []WorkCompletion) int
	// resized takes the driver response of RESIZE_CQ.
	resizeDriverOutLen() int
	resized(driverOut []byte) error
	unmap() error
}

// qpQueues posts to a QP's send and receive queues.
type qpQueues interface {
	postSend(wr *SendWR) error
	postRecv(wr *RecvWR) error
	unmap() error
}

// srqQueue posts to a shared receive queue.
type srqQueue interface {
	postRecv(wr *RecvWR) error
	// modifyDriverData is MODIFY_SRQ's driver request data and the
	// memory the kernel writes through it; modified remaps after a resize.
	modifyDriverData() (in, out []byte)
	modified(resized bool) error
	unmap() error
}

func newProvider(c *Context) provider {
	switch c.driverID {
	case abi.RDMA_DRIVER_RXE:
		return &rxeProvider{ctx: c}
	}
	return noProvider{driver: c.dev.DriverName, id: c.driverID}
}

// noProvider serves the control path of devices without a purerdma
// provider; queues report ErrNotSupported naming the driver.
type noProvider struct {
	driver string
	id     uint32
}

func (p noProvider) err() error {
	return fmt.Errorf("uverbs: driver %q (id %d) has no purerdma provider, only rxe has: queues %w", p.driver, p.id, ErrNotSupported)
}
func (p noProvider) name() string                          { return p.driver }
func (noProvider) contextDriverData() ([]byte, int)        { return nil, 0 }
func (noProvider) contextCreated([]byte)                   {}
func (noProvider) cqDriverData() ([]byte, int)             { return nil, 0 }
func (p noProvider) newCQ(*CQ, []byte) (cqQueue, error)    { return nil, p.err() }
func (noProvider) qpDriverData() ([]byte, int)             { return nil, 0 }
func (p noProvider) newQP(*QP, []byte) (qpQueues, error)   { return nil, p.err() }
func (noProvider) srqDriverData() ([]byte, int)            { return nil, 0 }
func (p noProvider) newSRQ(*SRQ, []byte) (srqQueue, error) { return nil, p.err() }
func (noProvider) ahDriverOutLen() int                     { return 0 }
func (noProvider) ahCreated(*AH, []byte)                   {}
func (noProvider) close()                                  {}
