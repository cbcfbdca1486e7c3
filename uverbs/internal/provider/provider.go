// Package provider is the interface between package uverbs and the
// device providers, one package per driver (uverbs/internal/rxe,
// uverbs/internal/mlx5): libibverbs' provider interface, compiled in.
//
// uverbs owns the objects, the control path (create, modify, query,
// destroy through internal/sys) and the checks every device shares; a
// provider adds the driver data of the create commands and owns the
// fast-path queues: how work requests become the device's WQEs, how the
// doorbell rings and how completions are read.
//
// The providers see uverbs' public work requests and completions through
// views (SendWR, RecvWR, WC and what they point to): types of the same
// layout, generated from uverbs' declarations (zviews.go, by
// internal/cmd/genviews), so that a post or a poll converts a pointer
// and copies nothing. uverbs' TestProviderViews checks every field of
// every pair.
//
// A create command runs in three steps: the provider prepares its driver
// data (XXDriverData: a provider whose device reads queues from user
// memory, like mlx5, allocates the buffers and doorbell records here and
// names them in the request), the command runs, and NewXX takes the
// driver response (a provider whose kernel allocates the queues, like
// rxe, maps them now). When the command or NewXX fails, the request's
// Release frees what the preparation allocated.
package provider

import (
	"sync"
	"sync/atomic"
)

// Provider is one device's provider, made for a context when it opens.
type Provider interface {
	Name() string
	// ContextDriverData is GET_CONTEXT's driver request and the size of
	// its driver response; ContextCreated takes the response (mlx5 maps
	// its doorbell pages here). An error fails Open.
	ContextDriverData() (in []byte, outLen int)
	ContextCreated(out []byte) error
	CQDriverData(size int) (DriverReq, error)
	NewCQ(cq *CQ, req DriverReq, driverOut []byte) (CQQueue, error)
	QPDriverData(cfg *QPConfig) (DriverReq, error)
	NewQP(qp *QP, req DriverReq, driverOut []byte) (QPQueues, error)
	// SRQDriverData may round cfg's sizes: the command asks for those.
	SRQDriverData(cfg *SRQConfig) (DriverReq, error)
	NewSRQ(srq *SRQ, req DriverReq, driverOut []byte) (SRQQueue, error)
	AHDriverOutLen() int
	// AHCreated takes CREATE_AH's driver response and fills ah; an
	// error fails CreateAH (the AH is destroyed).
	AHCreated(ah *AH, attr *AHAttr, driverOut []byte) error
	// Close releases what the provider holds, after every object of the
	// context was destroyed.
	Close()
}

// DriverReq is a create command's driver data, prepared before the
// command runs.
type DriverReq struct {
	In     []byte // UHW_IN: the driver's request
	OutLen int    // UHW_OUT: the driver response's size
	// Size, when non-zero, replaces the queue size the command asks for
	// (a CQ's entries: mlx5 rounds them as libmlx5 does).
	Size int
	// State is what the provider prepared (buffers, doorbell records),
	// handed back to NewXX; Release frees it when the object is not
	// created. Both are nil for rxe.
	State   any
	Release func()
}

// Abort releases what a preparation allocated, once.
func (r *DriverReq) Abort() {
	if r.Release != nil {
		r.Release()
		r.Release = nil
	}
}

// CQ is what a provider knows of a completion queue.
type CQ struct {
	Handle uint32
	// Lock is held by uverbs around Poll, and must be taken by a
	// provider touching the CQ's ring from elsewhere (an event, a QP's
	// cleaning); nil for a CQ with a thread domain, which has none.
	Lock sync.Locker
}

// QPConfig is what a QP's driver data is prepared from.
type QPConfig struct {
	Type   QPType
	Cap    QPCap
	HasSRQ bool
}

// QP is what a provider knows of a queue pair. NewQP may lower or raise
// Cap to what the queues hold: the QP reports it.
type QP struct {
	Handle uint32
	Num    uint32
	Type   QPType
	Cap    QPCap
	// SignalAll: every send request completes, as if SendSignaled.
	SignalAll bool
	SendCQ    CQQueue
	RecvCQ    CQQueue
	SRQ       SRQQueue // nil: the QP has its own receive queue
	// State is the QP's state word, which uverbs keeps here: the
	// QPState in the low byte, ErrSeen above it once an error was seen
	// (so a marked state compares greater than StateErr).
	State atomic.Uint32
	// CapsEx are the device's extended capability flags
	// (IB_UVERBS_DEVICE_*), for CheckSend's FLUSH and ATOMIC_WRITE.
	CapsEx uint64
}

// StateErr is QPStateErr, the state from which a QP flushes its work
// requests.
const StateErr = 6

// SRQConfig is the size of a shared receive queue.
type SRQConfig struct {
	MaxWR  uint32
	MaxSGE uint32
}

// SRQ is what a provider knows of a shared receive queue. NewSRQ sets
// Num (the SRQ number, where the device reports one) and MaxWR (the
// receives the queue takes at once); Modified sets MaxWR after a resize.
type SRQ struct {
	Handle uint32
	MaxSGE uint32
	MaxWR  uint32
	Num    uint32
	Lock   sync.Locker // as CQ.Lock
}

// AH is what the providers keep of an address handle: the first field
// of uverbs.AH, so a work request's AH is seen as this.
type AH struct {
	Num  uint32 // rxe: the kernel's AH index, carried in UD send WQEs
	Data any    // mlx5: the address vector a UD send copies
}

// AHAttr is the address an AH was created for (uverbs.AHAttr).
type AHAttr struct {
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     bool
	PortNum      uint8
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	// Ethernet: the port's link layer is Ethernet (RoCE), not
	// InfiniBand.
	Ethernet bool
}

// MW is the first field of uverbs.MW: its current rkey, which a posted
// bind changes.
type MW struct {
	RKey atomic.Uint32
}

// MR is the first field of uverbs.MR: its keys (Rereg changes them).
type MR struct {
	LKey, RKey uint32
}

// CQQueue polls a CQ's completions without system calls.
type CQQueue interface {
	Poll(wc []WC) int
	// ResizeDriverOutLen and Resized: RESIZE_CQ's driver response.
	ResizeDriverOutLen() int
	Resized(driverOut []byte) error
	Unmap() error
}

// QPQueues posts to a QP's send and receive queues.
type QPQueues interface {
	PostSend(wr *SendWR) error
	PostRecv(wr *RecvWR) error
	Unmap() error
}

// SRQQueue posts to a shared receive queue.
type SRQQueue interface {
	PostRecv(wr *RecvWR) error
	// ModifyDriverData is MODIFY_SRQ's driver request and the memory
	// the kernel writes through it; Modified remaps after a resize.
	ModifyDriverData() (in, out []byte)
	Modified(resized bool) error
	Unmap() error
}

// Optional queue methods, for providers whose device user space drives
// directly (mlx5):
//
//   - CQArmer: RequestNotify arms the CQ in user space instead of
//     REQ_NOTIFY_CQ; CQEventer hears of each completion event.
//   - CQResizer: RESIZE_CQ needs driver data (mlx5: a new buffer);
//     ResizeReq prepares it, and reports same when the CQ has the size
//     asked for already (no command). The request's Size is the cqe
//     count the command passes, and its Release undoes the preparation
//     when the command fails; CQQueue.Resized finishes after it succeeds.
//   - QPResetter: the QP went to RESET: its rings start over.
//   - MRDriverData (a Provider's): REG_MR's driver request and the size
//     of its driver response (siw's stag key); without it REG_MR has
//     none.
//   - FixedSize: the queue cannot be resized (CQ.Resize and an SRQ's
//     MaxWR are refused before any kernel call); the text says why.
type (
	CQArmer interface {
		Arm(solicitedOnly bool) error
	}
	CQEventer interface{ Event() }
	CQResizer interface {
		ResizeReq(size int) (req DriverReq, same bool, err error)
	}
	QPResetter   interface{ Reset() }
	MRDriverData interface {
		RegMRDriverData() (in []byte, outLen int)
	}
	FixedSize interface{ FixedSize() string }
)
