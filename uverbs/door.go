package uverbs

import (
	"sync/atomic"

	"github.com/purerdma/rdma/uverbs/internal/mlx5"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"github.com/purerdma/rdma/uverbs/internal/rxe"
)

// The doors: the only places uverbs names a provider's own types. Every
// other call into a provider goes through the interfaces of
// uverbs/internal/provider; these take a measured fast path past them
// (docs/performance.md: the interface call and the frame it adds cost
// rxe's post and poll instructions that C's librxe does not spend).
// One door per provider, all in this file; a provider without a door
// (siw), and a path a door does not take, is called through the
// interfaces.
//
// rxe's door: QP.PostSend calls rxe.QP.PostSend directly, and the Poll of
// a CQ with a TD (no lock) runs rxe.CQ.Poll's loop written out here.
// mlx5's: the Poll of a CQ calls mlx5.ProvCQ.Poll directly, with the
// lock of a CQ without a TD taken in place.

// qpDoor is a QP's direct path: rxe is the QP's queues when those are
// rxe's, which PostSend calls without dispatch (one load and test).
type qpDoor struct {
	rxe *rxe.QP
}

// open sets the door for the QP's queues q.
func (d *qpDoor) open(q provider.QPQueues) {
	d.rxe, _ = q.(*rxe.QP)
}

// cqDoor is a CQ's direct path: rxe or mlx5 is the CQ's queue when that
// is the provider's and the CQ has a TD (no lock), while the CQ is open,
// and mlx5Locked an mlx5 CQ's with a lock; Poll tests each with one
// load.
type cqDoor struct {
	rxe  *rxe.CQ
	mlx5 *mlx5.ProvCQ
	// mlx5Locked is the queue of an mlx5 CQ with a lock, which Poll
	// calls directly with the lock taken in place. It is set before the
	// CQ is returned and never cleared: Poll reads it unlocked, and the
	// CQ's closed flag, read under the lock, keeps a destroyed CQ's
	// queue from being polled.
	mlx5Locked *mlx5.ProvCQ
}

// open sets the door for the CQ's new queue q.
func (d *cqDoor) open(q provider.CQQueue, locks bool) {
	if locks {
		d.mlx5Locked, _ = q.(*mlx5.ProvCQ)
		return
	}
	switch q := q.(type) {
	case *rxe.CQ:
		d.rxe = q
	case *mlx5.ProvCQ:
		d.mlx5 = q
	}
}

// close shuts a TD CQ's door when the CQ is destroyed (no Poll runs
// meanwhile: a TD's objects are one goroutine's). A locked CQ's door,
// mlx5Locked, stays: its Poll reads the doors unlocked, and tests the
// closed flag under the lock before it uses it.
func (d *cqDoor) close() {
	// No write for a locked CQ, whose Poll reads the doors unlocked.
	if d.rxe != nil {
		d.rxe = nil
	}
	if d.mlx5 != nil {
		d.mlx5 = nil
	}
}

// Poll moves up to len(wc) completions into wc and returns how many
// (ibv_poll_cq). It makes no system call and does not allocate.
//
// A completion with an error status tells the library that its QP may
// be in ERR (the device moves a QP there on an error): that QP's next
// PostRecv asks the kernel, so that receives posted to a QP in ERR
// complete with WCWRFlushErr.
//
//go:nosplit
func (cq *CQ) Poll(wc []WorkCompletion) (int, error) {
	if cq == nil {
		return cq.pollIface(wc)
	}
	if cq.door.rxe == nil {
		if m := cq.door.mlx5; m != nil { // mlx5 without a lock
			return m.Poll(wcView(wc)), nil
		}
		if m := cq.door.mlx5Locked; m != nil { // mlx5 with one
			cq.mu.Lock()
			if cq.closed.Load() {
				cq.mu.Unlock()
				return 0, errClosedCQ
			}
			n := m.Poll(wcView(wc))
			cq.mu.Unlock()
			return n, nil
		}
		return cq.pollIface(wc)
	}
	// rxe without a lock: rxe.CQ.Poll's loop, written out here (a call
	// and a frame less, see docs/performance.md).
	q := cq.door.rxe
	h := q.Hdr
	prod := atomic.LoadUint32(&h.ProducerIndex)
	cons := atomic.LoadUint32(&h.ConsumerIndex)
	n, status := 0, uint32(0)
	for ; n < len(wc) && cons != prod; n++ {
		status |= rxe.CopyWC(provider.As[provider.WC](&wc[n]), q.WCs.Slot(cons))
		cons = (cons + 1) & q.WCs.Mask()
	}
	if n > 0 {
		if status != 0 {
			q.SawErrors(cons, n)
		}
		atomic.StoreUint32(&h.ConsumerIndex, cons)
	}
	return n, nil
}

// pollIface is Poll for a nil or closed CQ, an rxe CQ with a lock, or
// another provider's: through the provider interface, with the lock (a CQ
// without a TD) taken and released here, without a defer (the
// providers' Poll does not panic: each reads its ring through masked
// indices and writes only wc). A function of its own, so that Poll's
// rxe loop keeps its machine code. No stack check: the frame is small,
// and what it calls checks its own.
//
//go:nosplit
func (cq *CQ) pollIface(wc []WorkCompletion) (int, error) {
	if cq == nil {
		return 0, errNil("CQ.Poll", "CQ")
	}
	locks := cq.locks
	if locks {
		cq.mu.Lock()
	}
	if cq.closed.Load() {
		if locks {
			cq.mu.Unlock()
		}
		return 0, errClosedCQ
	}
	n := cq.q.Poll(wcView(wc))
	if locks {
		cq.mu.Unlock()
	}
	return n, nil
}
