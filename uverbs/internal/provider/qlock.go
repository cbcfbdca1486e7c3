package provider

import (
	"runtime"
	"sync/atomic"
)

// QLock is the lock of a queue that has no thread domain: a QP's send
// and receive queues, a CQ, an SRQ. It is a spinlock, as libibverbs'
// providers take (pthread_spin_lock): what it guards is short (a post
// or a poll writes a few queue entries; the longest holders, rxe's
// doorbell and a destroy, make one system call). Taking a free lock is
// one compare-and-swap and releasing it one store: against sync.Mutex,
// whose pair costs 19 instructions on a post (callgrind, the mlx5
// oracle's scenario), this one costs 7. A goroutine that finds it taken
// spins briefly and then yields its thread (runtime.Gosched) between
// looks, so a holder that was descheduled or is in a system call gets a
// thread to finish on. No fairness: a queue's lock is contended only by
// goroutines sharing one queue, which the threading model advises
// against (docs/threading.md). It is the provider layer's type, so
// that the sync.Locker a provider is given (CQ.Lock, SRQ.Lock) belongs
// to its own layer, not to uverbs (internal/layering's seam test).
type QLock struct{ v atomic.Uint32 }

// Lock takes the lock.
func (l *QLock) Lock() {
	if !l.v.CompareAndSwap(0, 1) {
		l.lockSlow()
	}
}

// qLockSpins is how many looks a waiter takes before it yields.
const qLockSpins = 64

//go:noinline
func (l *QLock) lockSlow() {
	for i := 0; ; i++ {
		if l.v.Load() == 0 && l.v.CompareAndSwap(0, 1) {
			return
		}
		if i >= qLockSpins {
			runtime.Gosched()
		}
	}
}

// Unlock releases the lock, which the caller holds.
func (l *QLock) Unlock() { l.v.Store(0) }
