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
//
// A create command runs in three steps: the provider prepares its driver
// data (xxDriverData: a provider whose device reads queues from user
// memory, like mlx5, allocates the buffers and doorbell records here and
// names them in the request), the command runs, and newXX takes the
// driver response (a provider whose kernel allocates the queues, like
// rxe, maps them now). When the command or newXX fails, the request's
// release frees what the preparation allocated.
type provider interface {
	name() string
	contextDriverData() (in []byte, outLen int)
	// contextCreated takes GET_CONTEXT's driver response (mlx5 maps its
	// doorbell pages here); an error fails Open.
	contextCreated(out []byte) error
	cqDriverData(size int) (driverReq, error)
	newCQ(cq *CQ, req driverReq, driverOut []byte) (cqQueue, error)
	qpDriverData(cfg *QPConfig) (driverReq, error)
	newQP(qp *QP, req driverReq, driverOut []byte) (qpQueues, error)
	srqDriverData(cfg *SRQConfig) (driverReq, error)
	newSRQ(srq *SRQ, req driverReq, driverOut []byte) (srqQueue, error)
	ahDriverOutLen() int
	// ahCreated takes CREATE_AH's driver response; an error fails
	// CreateAH (the AH is destroyed).
	ahCreated(ah *AH, driverOut []byte) error
	close()
}

// driverReq is a create command's driver data, prepared before the
// command runs.
type driverReq struct {
	in     []byte // UHW_IN: the driver's request
	outLen int    // UHW_OUT: the driver response's size
	// size, when non-zero, replaces the queue size the command asks for
	// (a CQ's entries: mlx5 rounds them as libmlx5 does).
	size int
	// state is what the provider prepared (buffers, doorbell records),
	// handed back to newXX; release frees it when the object is not
	// created. Both are nil for rxe.
	state   any
	release func()
}

// abort releases what a preparation allocated, once.
func (r *driverReq) abort() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// cqQueue polls a CQ's completions without system calls.
type cqQueue interface {
	poll(wc []WorkCompletion) int
	// resized takes the driver response of RESIZE_CQ.
	resizeDriverOutLen() int
	resized(driverOut []byte) error
	unmap() error
}

// Optional queue methods, for providers whose device user space drives
// directly (mlx5):
//
//   - cqArmer: RequestNotify arms the CQ in user space instead of
//     REQ_NOTIFY_CQ; cqEventer hears of each completion event.
//   - qpResetter: the QP went to RESET: its rings start over.
//   - fixedSize: the queue cannot be resized (CQ.Resize and an SRQ's
//     MaxWR are refused before any kernel call).
type (
	cqArmer interface {
		arm(solicitedOnly bool) error
	}
	cqEventer  interface{ event() }
	qpResetter interface{ reset() }
	fixedSize  interface{ fixedSize() string }
)

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
	case abi.RDMA_DRIVER_MLX5:
		return &mlx5Provider{ctx: c}
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
func (p noProvider) name() string                                     { return p.driver }
func (noProvider) contextDriverData() ([]byte, int)                   { return nil, 0 }
func (noProvider) contextCreated([]byte) error                        { return nil }
func (p noProvider) cqDriverData(int) (driverReq, error)              { return driverReq{}, p.err() }
func (p noProvider) newCQ(*CQ, driverReq, []byte) (cqQueue, error)    { return nil, p.err() }
func (p noProvider) qpDriverData(*QPConfig) (driverReq, error)        { return driverReq{}, p.err() }
func (p noProvider) newQP(*QP, driverReq, []byte) (qpQueues, error)   { return nil, p.err() }
func (p noProvider) srqDriverData(*SRQConfig) (driverReq, error)      { return driverReq{}, p.err() }
func (p noProvider) newSRQ(*SRQ, driverReq, []byte) (srqQueue, error) { return nil, p.err() }
func (noProvider) ahDriverOutLen() int                                { return 0 }
func (noProvider) ahCreated(*AH, []byte) error                        { return nil }
func (noProvider) close()                                             {}
