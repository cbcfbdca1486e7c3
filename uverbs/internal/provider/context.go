package provider

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// Context is what the provider layer keeps of an open device: the
// command fd, the driver id its ioctls carry, the table of the
// context's QPs with the error mark a completion sets, and the table of
// its registered memory (Spans). uverbs makes one
// per context and hands it to the provider it picks; providers use it
// and never call up into uverbs (internal/layering's TestProviderSeam
// checks that no uverbs type implements an interface of this package
// other than the ones providers implement for uverbs).
type Context struct {
	fd       *sys.FD
	driverID uint32
	closed   atomic.Bool
	qps      qpTable
	spans    Spans
}

// NewContext is the provider layer's view of a context whose command fd
// is fd (nil in tests without a device: commands then fail).
func NewContext(fd *sys.FD, driverID uint32) *Context {
	return &Context{fd: fd, driverID: driverID}
}

// FD is the context's command fd (mmap, commands, doorbells).
func (c *Context) FD() *sys.FD { return c.fd }

// Spans is the context's registered memory, for the providers' inline
// copies (uverbs keeps it).
func (c *Context) Spans() *Spans { return &c.spans }

// SetClosed marks the context closed: Exec fails from then on.
func (c *Context) SetClosed() { c.closed.Store(true) }

// Exec runs an ioctl method on the context; it fails once the context
// is closed.
func (c *Context) Exec(m *sys.Method) error {
	if c.closed.Load() {
		return &sys.Error{Op: m.Op(), Err: fmt.Errorf("context: %w", sys.ErrClosed)}
	}
	if c.fd == nil {
		return &sys.Error{Op: m.Op(), Err: fmt.Errorf("no command fd: %w", sys.ErrNotSupported)}
	}
	return m.Exec(c.fd, c.driverID)
}

// ErrSeen marks a QP's state word (QP.State): a completion in error or
// an error event for the QP was seen since its state was last set or
// queried, so the device may have moved it to ERR. It lies above the
// state byte, so a marked state compares greater than StateErr.
const ErrSeen = 1 << 8

// MarkErrSeen records that the device may have moved the QP to ERR.
func (qp *QP) MarkErrSeen() { qp.State.Or(ErrSeen) }

// AddQP enters qp in the context's QP table, by its number.
func (c *Context) AddQP(qp *QP) { c.qps.add(qp) }

// RemoveQP takes qp out of the table.
func (c *Context) RemoveQP(qp *QP) { c.qps.remove(qp) }

// MarkErrSeenOnCQ marks every QP whose send or receive completions go
// to cq (a CQ error event: the device may have moved them to ERR).
func (c *Context) MarkErrSeenOnCQ(cq CQQueue) {
	c.qps.mu.RLock()
	defer c.qps.mu.RUnlock()
	for _, qp := range c.qps.m {
		if qp.SendCQ == cq || qp.RecvCQ == cq {
			qp.MarkErrSeen()
		}
	}
}

// MarkErrSeenAll marks every QP of the context (a fatal device event).
func (c *Context) MarkErrSeenAll() {
	c.qps.mu.RLock()
	defer c.qps.mu.RUnlock()
	for _, qp := range c.qps.m {
		qp.MarkErrSeen()
	}
}

// SawErrorCompletion is a poll's error branch: a completion with an
// error status for the QP numbered qpn means the device may have moved
// that QP to ERR.
func (c *Context) SawErrorCompletion(qpn uint32) {
	if qp := c.qps.lookup(qpn); qp != nil {
		qp.MarkErrSeen()
	}
}

// qpTable maps QP numbers to a context's QPs.
type qpTable struct {
	mu sync.RWMutex
	m  map[uint32]*QP
}

func (t *qpTable) add(qp *QP) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint32]*QP{}
	}
	t.m[qp.Num] = qp
}

func (t *qpTable) remove(qp *QP) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[qp.Num] == qp {
		delete(t.m, qp.Num)
	}
}

func (t *qpTable) lookup(num uint32) *QP {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[num]
}

// attrState is IB_QP_STATE of enum ib_qp_attr_mask (uverbs.QPAttrState).
const attrState = 1 << 0

// ModifyToErr moves qp to ERR (EX_MODIFY_QP of the state alone): its
// queued requests then complete with WCWRFlushErr. A provider calls it
// when a doorbell failed after requests were written to the queue. Its
// error names the command alone (EX_MODIFY_QP): the caller names the
// operation.
func (c *Context) ModifyToErr(qp *QP) error {
	if c.fd == nil {
		return &sys.Error{Op: "EX_MODIFY_QP", Err: fmt.Errorf("no command fd: %w", sys.ErrNotSupported)}
	}
	var req abi.ExModifyQP
	req.Base.QPHandle = qp.Handle
	req.Base.AttrMask = attrState
	req.Base.QPState = StateErr
	if _, err := c.fd.CommandEx("EX_MODIFY_QP", abi.IB_USER_VERBS_EX_CMD_MODIFY_QP, abi.Bytes(&req), nil, 0, 0); err != nil {
		return err
	}
	qp.State.Store(StateErr)
	return nil
}

// FlushRecvs makes receives just posted to a QP in ERR complete with
// WCWRFlushErr, for a device that does not flush them by itself (rxe):
// when the QP is only marked (ErrSeen), it asks the kernel for the
// state first (QUERY_QP) and does nothing unless that is ERR; then it
// moves the QP to ERR again, which flushes its receive queue.
func (c *Context) FlushRecvs(qp *QP) error {
	if qp.State.Load()&ErrSeen != 0 {
		if c.fd == nil {
			return &sys.Error{Op: "uverbs PostRecv: QUERY_QP", Err: fmt.Errorf("no command fd: %w", sys.ErrNotSupported)}
		}
		var resp abi.QueryQPResp
		req := abi.QueryQP{QPHandle: qp.Handle, AttrMask: attrState}
		req.Response = sys.PointerTo(abi.Bytes(&resp))
		if err := c.fd.Command("uverbs PostRecv: QUERY_QP", abi.IB_USER_VERBS_CMD_QUERY_QP, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
			return err
		}
		qp.State.Store(uint32(resp.QPState))
		if resp.QPState != StateErr {
			return nil
		}
	}
	if err := c.ModifyToErr(qp); err != nil {
		return fmt.Errorf("uverbs PostRecv: %w", err)
	}
	return nil
}

// PostError reports a post list that failed part way: the work requests
// before Index were posted, the one at Index and after were not. A post
// that fails at its first work request returns the cause itself, not a
// PostError: nothing was posted. (uverbs.PostError is this type.)
type PostError struct {
	Index int    // position of the failing request in the list
	WRID  uint64 // its WRID
	Err   error
}

func (e *PostError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("uverbs: work request %d (wr_id %#x): %v", e.Index, e.WRID, e.Err)
}

func (e *PostError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// PostFailed is the error of a post list whose request i (wrid) failed
// with err: err itself for the first request, else a PostError, which
// says the requests before it were posted.
func PostFailed(i int, wrid uint64, err error) error {
	if i == 0 {
		return err
	}
	return &PostError{Index: i, WRID: wrid, Err: err}
}

// BrokenDoorbell is a test hook's doorbell for the providers whose
// doorbell is an empty POST_SEND (rxe, siw): one that names a QP handle
// that does not exist, so the kernel refuses it with EINVAL. dbOut is
// the response buffer of the QP's own doorbell.
func (c *Context) BrokenDoorbell(dbOut []byte) ([]byte, sys.Doorbell, error) {
	req := abi.PostSend{QPHandle: ^uint32(0), WQESize: uint32(abi.SizeofSendWR), Response: sys.PointerTo(dbOut)}
	db := c.fd.CommandBuffer(abi.IB_USER_VERBS_CMD_POST_SEND, abi.Bytes(&req), len(dbOut))
	bell, err := c.fd.Doorbell(db)
	if err != nil {
		return nil, sys.Doorbell{}, err
	}
	return db, bell, nil
}
