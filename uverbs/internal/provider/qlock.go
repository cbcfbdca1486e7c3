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
// one atomic exchange (a test-and-set: the lock is taken when the value
// it replaced was 0) and releasing it one store, each a sync/atomic
// intrinsic: the pair is six instructions on amd64, and on the mlx5
// oracle's scenario (callgrind) a post costs 3 more with a
// compare-and-swap through atomic.Uint32's methods (the compare's result
// is tested again, and an inlined method leaves an executed NOP) and 10
// more with sync.Mutex. A
// goroutine that finds it taken spins briefly and then yields its
// thread (runtime.Gosched) between looks, so a holder that was
// descheduled or is in a system call gets a thread to finish on. No
// fairness: a queue's lock is contended only by goroutines sharing one
// queue, which the threading model advises against (docs/threading.md).
// It is the provider layer's type, so that the sync.Locker a provider
// is given (CQ.Lock, SRQ.Lock) belongs to its own layer, not to uverbs
// (internal/layering's seam test).
type QLock struct{ v uint32 } // only through sync/atomic's functions

// Lock takes the lock.
func (l *QLock) Lock() {
	if atomic.SwapUint32(&l.v, 1) != 0 {
		l.lockSlow()
	}
}

// qLockSpins is how many looks a waiter takes before it yields.
const qLockSpins = 64

//go:noinline
func (l *QLock) lockSlow() {
	for i := 0; ; i++ {
		if atomic.LoadUint32(&l.v) == 0 && atomic.SwapUint32(&l.v, 1) == 0 {
			return
		}
		if i >= qLockSpins {
			runtime.Gosched()
		}
	}
}

// Unlock releases the lock, which the caller holds.
func (l *QLock) Unlock() { atomic.StoreUint32(&l.v, 0) }
