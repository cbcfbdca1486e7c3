package uverbs

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/evfd"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// CompChannel is a completion channel (ibv_comp_channel): a file
// descriptor that reports armed CQs with new completions. Any number of
// CQs may share one.
//
// Wait blocks through the Go runtime poller (no thread is held); one
// goroutine waits at a time, and a second concurrent Wait fails at once
// with ErrBusy. Close wakes a waiting Wait.
//
// The fd joins the poller on the first Wait, not at creation: rdma_cm
// creates two channels per connection that most programs never wait on,
// and registering costs system calls that wake the Go scheduler's
// monitor thread (see internal/sys).
type CompChannel struct {
	resource
	mu  sync.Mutex
	raw int        // -1 once closed
	f   *evfd.File // nil until the first Wait
	cqs map[uint64]*CQ

	desc [8]byte // WaitUntil's event: here, so that it does not escape per call
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if c == nil {
		return nil, errNil("CreateCompChannel", "Context")
	}
	if c.closed.Load() {
		return nil, closedContext("uverbs CreateCompChannel")
	}
	var req abi.CreateCompChannel
	var resp abi.CreateCompChannelResp
	req.Response = sys.PointerTo(abi.Bytes(&resp))
	if err := c.fd.Command("uverbs CreateCompChannel: CREATE_COMP_CHANNEL", abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, abi.Bytes(&req), abi.Bytes(&resp)); err != nil {
		return nil, err
	}
	ch := &CompChannel{raw: int(resp.FD), cqs: map[uint64]*CQ{}}
	ch.resource = resource{ctx: c, kind: "CompChannel", closer: ch.closeFd}
	c.track(&ch.resource)
	return ch, nil
}

func (ch *CompChannel) closeFd() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var err error
	if ch.f != nil {
		err = ch.f.Close() // wakes a waiting Wait
	} else if ch.raw >= 0 {
		err = sys.RawClose(ch.raw)
	}
	ch.raw = -1
	if err != nil {
		return &sys.Error{Op: "uverbs CompChannel.Close", Err: err}
	}
	return nil
}

// file registers the fd with the poller on first use.
func (ch *CompChannel) file() (*evfd.File, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.raw < 0 {
		return nil, &sys.Error{Op: "uverbs CompChannel.Wait", Err: ErrClosed}
	}
	if ch.f == nil {
		f, err := evfd.New(ch.raw, "uverbs completion channel")
		if err != nil {
			ch.raw = -1 // New closed it
			return nil, err
		}
		ch.f = f
	}
	return ch.f, nil
}

// SyscallConn is the channel's fd as a syscall.RawConn registered with
// the runtime poller, the Go way to use it in one's own loop (Fd gives
// the bare number): Control runs a function with the fd while it is
// open, Read waits for readiness without holding a thread. It fails
// after Close.
func (ch *CompChannel) SyscallConn() (syscall.RawConn, error) {
	if ch == nil {
		return nil, errNil("CompChannel.SyscallConn", "CompChannel")
	}
	f, err := ch.file()
	if err != nil {
		return nil, err
	}
	return f.SyscallConn(), nil
}

// Close closes the channel (ibv_destroy_comp_channel); it fails with
// EBUSY while CQs use it.
func (ch *CompChannel) Close() error {
	if ch == nil {
		return errNil("CompChannel.Close", "CompChannel")
	}
	return ch.closeAs("CompChannel")
}

// Fd is the channel's file descriptor, for a caller's own epoll loop: it
// is readable when Wait would return at once. Valid until Close; -1
// after, and for a nil CompChannel.
func (ch *CompChannel) Fd() int {
	if ch == nil {
		return -1
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.raw
}

// Wait blocks until an armed CQ on the channel has a completion event and
// returns that CQ (ibv_get_cq_event). Re-arm it with RequestNotify before
// polling it empty, so no completion goes unreported. Wait returns
// ctx.Err() when ctx ends first and ErrClosed after Close.
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	if ch == nil {
		return nil, errNil("CompChannel.Wait", "CompChannel")
	}
	if ctx == nil {
		return nil, errNil("CompChannel.Wait", "context.Context")
	}
	f, err := ch.file()
	if err != nil {
		return nil, err
	}
	for {
		var desc [8]byte // struct ib_uverbs_comp_event_desc
		n, err := f.Read(ctx, desc[:])
		if err != nil {
			return nil, err
		}
		if cq, err := ch.event(desc[:n]); cq != nil || err != nil {
			return cq, err
		}
	}
}

// event takes an event read from the channel: its CQ, or nil for a CQ
// destroyed after the event was queued.
func (ch *CompChannel) event(desc []byte) (*CQ, error) {
	if len(desc) != 8 {
		return nil, &sys.Error{Op: "uverbs CompChannel.Wait", Err: fmt.Errorf("%d bytes, want 8", len(desc))}
	}
	ch.mu.Lock()
	cq := ch.cqs[binary.NativeEndian.Uint64(desc)]
	ch.mu.Unlock()
	if cq != nil {
		cq.events.Add(1)
		if e, ok := cq.q.(provider.CQEventer); ok {
			e.Event()
		}
	}
	return cq, nil
}

func (ch *CompChannel) add(handle uint64, cq *CQ) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.cqs[handle] = cq
}

func (ch *CompChannel) removeCQ(cq *CQ) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for h, c := range ch.cqs {
		if c == cq {
			delete(ch.cqs, h)
		}
	}
}
