package rpma

import (
	"sync/atomic"
	"time"
)

// Defaults of ConnCfg and SRQCfg, as librpma's.
const (
	DefaultTimeout   = 1000 * time.Millisecond // RPMA_DEFAULT_TIMEOUT_MS
	DefaultQueueSize = 10                      // CQ, SQ, RQ and SRQ sizes
)

// FlushMethod is how Conn.Flush makes writes visible or persistent.
type FlushMethod int32

const (
	// FlushAuto flushes natively when this device executes FLUSH of
	// both types and the remote peer's configuration, applied with
	// ApplyRemotePeerCfg, says its regions take it (a purerdma peer
	// with SetNativeFlush); otherwise it emulates. C librpma peers
	// always get the emulation.
	FlushAuto FlushMethod = iota
	// FlushEmulated is librpma's read-after-write: an 8-byte RDMA READ
	// of the flushed region, which completes only after the writes
	// before it are placed. It works with every peer.
	FlushEmulated
	// FlushNative posts RDMA FLUSH. The device must execute it and the
	// remote region must be registered with the FLUSH access rights
	// (purerdma peers on such devices do; C librpma 1.2 does not).
	FlushNative
)

func (m FlushMethod) String() string {
	switch m {
	case FlushAuto:
		return "auto"
	case FlushEmulated:
		return "emulated"
	case FlushNative:
		return "native"
	}
	return "FlushMethod(?)"
}

// ConnCfg configures connections (struct rpma_conn_cfg): the
// establishment timeout, queue sizes, whether the CQ and the receive CQ
// share one completion channel, an SRQ, and how to flush. One ConnCfg
// may serve many connections; it is safe for concurrent use, and a
// connection reads it when its request is made.
type ConnCfg struct {
	timeout     atomic.Int64 // ns
	cq, rcq     atomic.Uint32
	sq, rq      atomic.Uint32
	shared      atomic.Bool
	srq         atomic.Pointer[SRQ]
	flushMethod atomic.Int32
}

// NewConnCfg returns a configuration with librpma's defaults
// (rpma_conn_cfg_new): timeout 1 s, CQ, SQ and RQ of 10, no receive CQ
// (receives complete on the CQ), no shared channel, no SRQ, FlushAuto.
func NewConnCfg() *ConnCfg {
	c := &ConnCfg{}
	c.timeout.Store(int64(DefaultTimeout))
	c.cq.Store(DefaultQueueSize)
	c.sq.Store(DefaultQueueSize)
	c.rq.Store(DefaultQueueSize)
	return c
}

var defaultConnCfg = NewConnCfg()

func cfgOrDefault(c *ConnCfg) *ConnCfg {
	if c == nil {
		return defaultConnCfg
	}
	return c
}

// SetTimeout sets how long an outgoing request may take to resolve the
// address and route (rpma_conn_cfg_set_timeout); it must be positive.
// A context deadline shorter than it wins.
func (c *ConnCfg) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return invalid("conn_cfg set timeout", "timeout %v: must be positive", d)
	}
	c.timeout.Store(int64(d))
	return nil
}

// Timeout reads the timeout (rpma_conn_cfg_get_timeout).
func (c *ConnCfg) Timeout() time.Duration { return time.Duration(c.timeout.Load()) }

// SetCQSize sets the size of the main CQ (rpma_conn_cfg_set_cq_size):
// send completions, and receive completions too when there is no
// receive CQ.
func (c *ConnCfg) SetCQSize(n uint32) { c.cq.Store(n) }

// CQSize reads it (rpma_conn_cfg_get_cq_size).
func (c *ConnCfg) CQSize() uint32 { return c.cq.Load() }

// SetRCQSize sets the size of a separate receive CQ
// (rpma_conn_cfg_set_rcq_size); 0, the default, means none.
func (c *ConnCfg) SetRCQSize(n uint32) { c.rcq.Store(n) }

// RCQSize reads it (rpma_conn_cfg_get_rcq_size).
func (c *ConnCfg) RCQSize() uint32 { return c.rcq.Load() }

// SetSQSize sets the send queue size (rpma_conn_cfg_set_sq_size).
func (c *ConnCfg) SetSQSize(n uint32) { c.sq.Store(n) }

// SQSize reads it (rpma_conn_cfg_get_sq_size).
func (c *ConnCfg) SQSize() uint32 { return c.sq.Load() }

// SetRQSize sets the receive queue size (rpma_conn_cfg_set_rq_size);
// ignored with an SRQ.
func (c *ConnCfg) SetRQSize(n uint32) { c.rq.Store(n) }

// RQSize reads it (rpma_conn_cfg_get_rq_size).
func (c *ConnCfg) RQSize() uint32 { return c.rq.Load() }

// SetCompletionChannel makes the CQ and the receive CQ of a connection
// share one completion channel (rpma_conn_cfg_set_compl_channel): wait
// on it with Conn.Wait instead of CQ.Wait.
func (c *ConnCfg) SetCompletionChannel(shared bool) { c.shared.Store(shared) }

// CompletionChannel reads it (rpma_conn_cfg_get_compl_channel).
func (c *ConnCfg) CompletionChannel() bool { return c.shared.Load() }

// SetSRQ makes connections take their receives from srq
// (rpma_conn_cfg_set_srq); nil for none.
func (c *ConnCfg) SetSRQ(srq *SRQ) { c.srq.Store(srq) }

// SRQ reads it (rpma_conn_cfg_get_srq).
func (c *ConnCfg) SRQ() *SRQ { return c.srq.Load() }

// SetFlushMethod chooses how connections flush (a purerdma addition;
// default FlushAuto).
func (c *ConnCfg) SetFlushMethod(m FlushMethod) error {
	if m < FlushAuto || m > FlushNative {
		return invalid("conn_cfg set flush method", "method %d", int(m))
	}
	c.flushMethod.Store(int32(m))
	return nil
}

// FlushMethod reads it.
func (c *ConnCfg) FlushMethod() FlushMethod { return FlushMethod(c.flushMethod.Load()) }

// connCfgSnapshot is one consistent read of a ConnCfg.
type connCfgSnapshot struct {
	timeout     time.Duration
	cq, rcq     uint32
	sq, rq      uint32
	shared      bool
	srq         *SRQ
	flushMethod FlushMethod
}

func (c *ConnCfg) snapshot() connCfgSnapshot {
	return connCfgSnapshot{timeout: c.Timeout(), cq: c.CQSize(), rcq: c.RCQSize(), sq: c.SQSize(), rq: c.RQSize(),
		shared: c.CompletionChannel(), srq: c.SRQ(), flushMethod: c.FlushMethod()}
}

// SRQCfg configures a shared receive queue (struct rpma_srq_cfg). It
// is safe for concurrent use.
type SRQCfg struct {
	rq, rcq atomic.Uint32
}

// NewSRQCfg returns librpma's defaults (rpma_srq_cfg_new): a receive
// queue of 10 and a receive CQ of 10.
func NewSRQCfg() *SRQCfg {
	c := &SRQCfg{}
	c.rq.Store(DefaultQueueSize)
	c.rcq.Store(DefaultQueueSize)
	return c
}

// SetRQSize sets the SRQ's size (rpma_srq_cfg_set_rq_size).
func (c *SRQCfg) SetRQSize(n uint32) { c.rq.Store(n) }

// RQSize reads it (rpma_srq_cfg_get_rq_size).
func (c *SRQCfg) RQSize() uint32 { return c.rq.Load() }

// SetRCQSize sets the size of the SRQ's own receive CQ
// (rpma_srq_cfg_set_rcq_size); 0 means none: receives then complete on
// each connection's CQ or receive CQ.
func (c *SRQCfg) SetRCQSize(n uint32) { c.rcq.Store(n) }

// RCQSize reads it (rpma_srq_cfg_get_rcq_size).
func (c *SRQCfg) RCQSize() uint32 { return c.rcq.Load() }
