package uverbs

import (
	"time"

	"github.com/purerdma/rdma/internal/evfd"
)

// ErrInterrupted is what CompChannel.WaitUntil returns after Interrupt.
var ErrInterrupted = evfd.ErrInterrupted

// WaitUntil is Wait with a deadline instead of a context, for loops
// that wait often and must not allocate (a context per wait does): it
// returns the CQ of the next completion event, or ends at deadline d
// (zero: none) with an error matching os.ErrDeadlineExceeded, or at
// Interrupt with ErrInterrupted, or at Close with ErrClosed. A wait that
// finds an event allocates nothing; neither does one that parks in the
// poller. As with Wait, one goroutine waits at a time (a second gets
// ErrBusy).
func (ch *CompChannel) WaitUntil(d time.Time) (*CQ, error) {
	if ch == nil {
		return nil, errNil("CompChannel.WaitUntil", "CompChannel")
	}
	f, err := ch.file()
	if err != nil {
		return nil, err
	}
	for {
		n, err := f.ReadUntil(d, ch.desc[:])
		if err != nil {
			return nil, err
		}
		if cq, err := ch.event(ch.desc[:n]); cq != nil || err != nil {
			return cq, err
		}
	}
}

// Interrupt ends the WaitUntil in progress, or else the next one, with
// ErrInterrupted: the way another goroutine wakes a waiter whose
// deadline moved or whose work ended. Interruptions before one wait
// count as one. It may be called from any goroutine; after Close it
// does nothing.
func (ch *CompChannel) Interrupt() {
	if ch == nil {
		return
	}
	if f, err := ch.file(); err == nil {
		f.Interrupt()
	}
}
