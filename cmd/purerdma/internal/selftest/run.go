package selftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// Case is one check in progress: its objects, closed when it
// ends, newest first.
type Case struct {
	ctx     context.Context
	env     *Env
	name    string
	closers []func() error
	pdv     *uverbs.PD
	wcs     []uverbs.WorkCompletion
}

// Bounds of the waits. A provider that loses a completion fails its row
// after pollWait instead of hanging; quietWait is how long a
// check watches a CQ that must stay empty.
var (
	pollWait  = 5 * time.Second
	quietWait = 20 * time.Millisecond
)

// tamper, when set (by a test), sees the bytes a check is about
// to compare with what it expects, under the check's name, and may change
// them: the way to prove that a wrong result fails the row.
var tamper func(check string, got []byte)

// udQKey is the Q_Key of the UD checks.
const udQKey = 0x11111111

// firstPSN is every QP's first packet sequence number.
const firstPSN = 0x1234

func (r *Case) onClose(f func() error) { r.closers = append(r.closers, f) }

func (r *Case) close() error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		if err := r.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	r.closers = nil
	return errors.Join(errs...)
}

// pd is the check's protection domain, allocated on first use.
func (r *Case) pd() (*uverbs.PD, error) {
	if r.pdv != nil {
		return r.pdv, nil
	}
	pd, err := r.env.ctx.AllocPD()
	if err != nil {
		return nil, err
	}
	r.onClose(pd.Close)
	r.pdv = pd
	return pd, nil
}

func (r *Case) cq(size int, ch *uverbs.CompChannel) (*uverbs.CQ, error) {
	cq, err := r.env.ctx.CreateCQ(uverbs.CQConfig{Size: size, Channel: ch})
	if err != nil {
		return nil, err
	}
	r.onClose(cq.Close)
	return cq, nil
}

// memory registers size bytes of page-aligned memory outside the Go
// heap with access.
func (r *Case) memory(size int, access uverbs.Access) (*uverbs.MR, error) {
	pd, err := r.pd()
	if err != nil {
		return nil, err
	}
	b, err := uverbs.AllocBuffer(size)
	if err != nil {
		return nil, err
	}
	r.onClose(b.Close)
	mr, err := pd.RegBuffer(b, access)
	if err != nil {
		return nil, err
	}
	r.onClose(mr.Close)
	return mr, nil
}

// stAccess is what the checks' QPs and memory grant.
const stAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

// stEnd is one QP of a check with its CQs and memory.
type stEnd struct {
	qp       *uverbs.QP
	scq, rcq *uverbs.CQ
	mr       *uverbs.MR
	buf      []byte
	// cfg is the QP's configuration: on iWARP the QP is created by its
	// rdma_cm ID when the pair connects (cmConnect), not by end.
	cfg uverbs.QPConfig
}

// sge is bytes [off, off+n) of the end's memory.
func (e *stEnd) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}
}

// stEndConfig shapes an end.
type stEndConfig struct {
	typ       uverbs.QPType
	sendWR    uint32 // default 16
	recvWR    uint32 // default 16
	inline    uint32
	srq       *uverbs.SRQ
	channel   *uverbs.CompChannel // on the receive CQ
	access    uverbs.Access       // of the memory; default stAccess
	memSize   int                 // default 64 KiB
	signalAll bool
}

// end creates a QP with a send CQ, a receive CQ and registered memory.
func (r *Case) end(c stEndConfig) (*stEnd, error) {
	if c.sendWR == 0 {
		c.sendWR = 16
	}
	if c.recvWR == 0 {
		c.recvWR = 16
	}
	if c.access == 0 {
		c.access = stAccess
	}
	if c.memSize == 0 {
		c.memSize = 64 << 10
	}
	pd, err := r.pd()
	if err != nil {
		return nil, err
	}
	e := &stEnd{}
	if e.scq, err = r.cq(int(c.sendWR)+1, nil); err != nil {
		return nil, fmt.Errorf("send CQ: %w", err)
	}
	if e.rcq, err = r.cq(int(c.recvWR)+1, c.channel); err != nil {
		return nil, fmt.Errorf("receive CQ: %w", err)
	}
	cfg := uverbs.QPConfig{Type: c.typ, SendCQ: e.scq, RecvCQ: e.rcq, SRQ: c.srq, SignalAll: c.signalAll,
		Cap: uverbs.QPCap{MaxSendWR: c.sendWR, MaxRecvWR: c.recvWR, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: c.inline}}
	if c.srq != nil {
		cfg.Cap.MaxRecvWR, cfg.Cap.MaxRecvSGE = 0, 0
	}
	e.cfg = cfg
	if !r.env.iwarp {
		if e.qp, err = pd.CreateQP(cfg); err != nil {
			return nil, fmt.Errorf("%v QP: %w", c.typ, err)
		}
		r.onClose(e.qp.Close)
	}
	if e.mr, err = r.memory(c.memSize, c.access); err != nil {
		return nil, err
	}
	e.buf = e.mr.Bytes()
	return e, nil
}

// pair creates two ends connected to each other: on InfiniBand and
// RoCE by moving their QPs through INIT, RTR and RTS (connect), on
// iWARP through the rdma_cm (cmConnect).
func (r *Case) pair(a, b stEndConfig) (*stEnd, *stEnd, error) {
	ea, err := r.end(a)
	if err != nil {
		return nil, nil, err
	}
	eb, err := r.end(b)
	if err != nil {
		return nil, nil, err
	}
	if r.env.iwarp {
		if err := r.cmConnect(ea, eb); err != nil {
			return nil, nil, err
		}
		return ea, eb, nil
	}
	if err := r.connect(ea.qp, eb.qp.Num()); err != nil {
		return nil, nil, err
	}
	if err := r.connect(eb.qp, ea.qp.Num()); err != nil {
		return nil, nil, err
	}
	return ea, eb, nil
}

// rcPair is two connected RC QPs with the default shape.
func (r *Case) rcPair() (*stEnd, *stEnd, error) {
	return r.pair(stEndConfig{typ: uverbs.QPTypeRC}, stEndConfig{typ: uverbs.QPTypeRC})
}

// ahAttr is the address of the device's own port.
func (e *Env) ahAttr() uverbs.AHAttr {
	if e.gidIndex < 0 {
		return uverbs.AHAttr{DLID: e.portAttr.LID, PortNum: e.port}
	}
	return uverbs.AHAttr{IsGlobal: true, PortNum: e.port,
		GRH: uverbs.GlobalRoute{DGID: e.gid, SGIDIndex: e.gidIndex, HopLimit: 64}}
}

// connect moves qp through INIT and RTR to RTS, towards QP remote on the
// same port.
func (r *Case) connect(qp *uverbs.QP, remote uint32) error {
	e := r.env
	typ := qp.Type()
	attr := &uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: e.port, QKey: udQKey, AccessFlags: stAccess}
	mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
	if typ == uverbs.QPTypeUD {
		mask |= uverbs.QPAttrQKey
	} else {
		mask |= uverbs.QPAttrAccessFlags
	}
	if err := qp.Modify(attr, mask); err != nil {
		return fmt.Errorf("%v QP to INIT: %w", typ, err)
	}
	attr = &uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: e.portAttr.ActiveMTU, DestQPNum: remote, RQPSN: firstPSN,
		MaxDestRdAtomic: e.destRdAtomic, MinRNRTimer: 1, AHAttr: e.ahAttr()}
	mask = uverbs.QPAttrState
	switch typ {
	case uverbs.QPTypeRC:
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
			uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	case uverbs.QPTypeUC:
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
	}
	if err := qp.Modify(attr, mask); err != nil {
		return fmt.Errorf("%v QP to RTR: %w", typ, err)
	}
	attr = &uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: firstPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		MaxRdAtomic: e.rdAtomic}
	mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
	if typ == uverbs.QPTypeRC {
		mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
	}
	if err := qp.Modify(attr, mask); err != nil {
		return fmt.Errorf("%v QP to RTS: %w", typ, err)
	}
	return nil
}

// cmConnect connects ends a and b through the rdma_cm, the only way an
// iWARP QP reaches RTS: an ID of b listens on the device's address, an
// ID of a connects to it from the same address (loopback through the
// device), and each ID creates its end's QP on the check's PD with the
// end's CQs (and SRQ). The IDs own the QPs and close before the CQs and
// memory; the listener closes when the pair is connected.
func (r *Case) cmConnect(a, b *stEnd) error {
	e := r.env
	ctx, cancel := context.WithTimeout(r.ctx, pollWait)
	defer cancel()
	pd, err := r.pd()
	if err != nil {
		return err
	}
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return fmt.Errorf("rdma_cm: %w", err)
	}
	defer l.Close()
	if err := l.Bind(netip.AddrPortFrom(e.cmAddr, 0)); err != nil {
		return fmt.Errorf("rdma_cm: bind the listener to %v: %w", e.cmAddr, err)
	}
	if err := l.Listen(1); err != nil {
		return fmt.Errorf("rdma_cm: listen on %v: %w", e.cmAddr, err)
	}
	dst, err := l.LocalAddr()
	if err != nil {
		return fmt.Errorf("rdma_cm: the listener's address: %w", err)
	}
	c, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return fmt.Errorf("rdma_cm: %w", err)
	}
	r.onClose(c.Close)
	if err := c.Resolve(ctx, netip.AddrPortFrom(e.cmAddr, 0), dst); err != nil {
		return fmt.Errorf("rdma_cm: %w", err)
	}
	if d, ok := c.Device(); !ok || d.Name != e.report.Device {
		return fmt.Errorf("rdma_cm: %v resolved to device %q, not %s", dst, d.Name, e.report.Device)
	}
	if a.qp, err = c.CreateQP(pd, a.cfg); err != nil {
		return fmt.Errorf("rdma_cm: %v QP: %w", a.cfg.Type, err)
	}
	if err := c.Connect(nil); err != nil {
		return fmt.Errorf("rdma_cm: connect to %v: %w", dst, err)
	}
	req, err := l.GetRequest(ctx)
	if err != nil {
		return fmt.Errorf("rdma_cm: the connect request: %w", err)
	}
	s := req.ID
	r.onClose(s.Close)
	if b.qp, err = s.CreateQP(pd, b.cfg); err != nil {
		return fmt.Errorf("rdma_cm: %v QP: %w", b.cfg.Type, err)
	}
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		return fmt.Errorf("rdma_cm: accept: %w", err)
	}
	ev, err := c.Channel().Next(ctx)
	if err != nil {
		return fmt.Errorf("rdma_cm: connect to %v: %w", dst, err)
	}
	if ev.Type != rdmacm.EventEstablished {
		return fmt.Errorf("rdma_cm: connect to %v: %v, want ESTABLISHED", dst, ev)
	}
	return nil
}

// poll waits for n completions on cq, at most pollWait from the
// last one that arrived.
func (r *Case) poll(cq *uverbs.CQ, n int, what string) ([]uverbs.WorkCompletion, error) {
	if cap(r.wcs) < n {
		r.wcs = make([]uverbs.WorkCompletion, n)
	}
	wcs := r.wcs[:n]
	got := 0
	deadline := time.Now().Add(pollWait)
	for spins := 0; got < n; spins++ {
		k, err := cq.Poll(wcs[got:])
		if err != nil {
			return wcs[:got], fmt.Errorf("%s: poll: %w", what, err)
		}
		if k > 0 {
			got += k
			spins = 0
			deadline = time.Now().Add(pollWait)
			continue
		}
		if spins%64 == 63 {
			if err := r.ctx.Err(); err != nil {
				return wcs[:got], fmt.Errorf("%s: %w", what, err)
			}
			if time.Now().After(deadline) {
				return wcs[:got], fmt.Errorf("%s: %d of %d completions, then none for %v", what, got, n, pollWait)
			}
		}
		runtime.Gosched()
	}
	return wcs, nil
}

// poll1 waits for one completion.
func (r *Case) poll1(cq *uverbs.CQ, what string) (uverbs.WorkCompletion, error) {
	wcs, err := r.poll(cq, 1, what)
	if err != nil {
		return uverbs.WorkCompletion{}, err
	}
	return wcs[0], nil
}

// quiet checks that cq gets no completion for quietWait.
func (r *Case) quiet(cq *uverbs.CQ, what string) error {
	var wc [1]uverbs.WorkCompletion
	deadline := time.Now().Add(quietWait)
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return fmt.Errorf("%s: poll: %w", what, err)
		}
		if n > 0 {
			return fmt.Errorf("%s: unexpected completion %s", what, stFmtWC(wc[0]))
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// wcWant is what a completion must hold. Fields a completion of its kind
// leaves undefined are not checked: byte_len of a send, the opcode of an
// error.
type wcWant struct {
	wrid    uint64
	status  uverbs.WCStatus
	opcode  uverbs.WCOpcode
	qpn     uint32
	byteLen int // -1: not checked
	imm     bool
	immVal  uint32
	srcQP   uint32 // UD receives only
	grh     bool   // UD receives only
	ud      bool
}

// recv reports whether the completion is of a receive.
func (w wcWant) recv() bool { return w.opcode == uverbs.WCRecv || w.opcode == uverbs.WCRecvRDMAWithImm }

func stFmtWC(wc uverbs.WorkCompletion) string {
	return fmt.Sprintf("{wr_id %#x status %v opcode %v byte_len %d qp_num %#x src_qp %#x flags %v imm %#x}",
		wc.WRID, wc.Status, wc.Opcode, wc.ByteLen, wc.QPNum, wc.SrcQP, wc.Flags, wc.Imm)
}

// check compares a completion with what it must hold.
func (w wcWant) check(what string, wc uverbs.WorkCompletion) error {
	var bad []string
	if wc.Status != w.status {
		bad = append(bad, fmt.Sprintf("status %v, want %v", wc.Status, w.status))
	}
	if wc.WRID != w.wrid {
		bad = append(bad, fmt.Sprintf("wr_id %#x, want %#x", wc.WRID, w.wrid))
	}
	if wc.QPNum != w.qpn {
		bad = append(bad, fmt.Sprintf("qp_num %#x, want %#x", wc.QPNum, w.qpn))
	}
	if w.status == uverbs.WCSuccess {
		if wc.Opcode != w.opcode {
			bad = append(bad, fmt.Sprintf("opcode %v, want %v", wc.Opcode, w.opcode))
		}
		if w.byteLen >= 0 && wc.ByteLen != uint32(w.byteLen) {
			bad = append(bad, fmt.Sprintf("byte_len %d, want %d", wc.ByteLen, w.byteLen))
		}
		// wc_flags are defined for receives only (rxe sets WITH_IMM on
		// the sender's completion of a send with immediate too).
		if got := wc.Flags&uverbs.WCWithImm != 0; w.recv() && got != w.imm {
			bad = append(bad, fmt.Sprintf("WITH_IMM flag %v, want %v", got, w.imm))
		} else if w.imm && wc.Imm != w.immVal {
			bad = append(bad, fmt.Sprintf("imm %#x, want %#x", wc.Imm, w.immVal))
		}
		if w.ud {
			if wc.SrcQP != w.srcQP {
				bad = append(bad, fmt.Sprintf("src_qp %#x, want %#x", wc.SrcQP, w.srcQP))
			}
			if got := wc.Flags&uverbs.WCWithGRH != 0; got != w.grh {
				bad = append(bad, fmt.Sprintf("GRH flag %v, want %v", got, w.grh))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s completion %s: %s", what, stFmtWC(wc), strings.Join(bad, ", "))
}

// sendWant is a successful send-queue completion; byte_len is checked
// only where the verbs define it (reads and atomics).
func sendWant(qp *uverbs.QP, wrid uint64, op uverbs.WCOpcode) wcWant {
	return wcWant{wrid: wrid, opcode: op, qpn: qp.Num(), byteLen: -1}
}

// recvWant is a successful receive of n bytes.
func recvWant(qp *uverbs.QP, wrid uint64, n int) wcWant {
	return wcWant{wrid: wrid, opcode: uverbs.WCRecv, qpn: qp.Num(), byteLen: n}
}

// wantBytes compares got, the bytes an operation produced, with want.
func (r *Case) wantBytes(what string, want, got []byte) error {
	if tamper != nil {
		tamper(r.name, got)
	}
	if bytes.Equal(want, got) {
		return nil
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return fmt.Errorf("%s: %d bytes differ from byte %d on (got %s, want %s)", what, stDiffCount(want, got), i,
		stExcerpt(got, i), stExcerpt(want, i))
}

func stDiffCount(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func stExcerpt(b []byte, at int) string {
	end := min(at+8, len(b))
	if at >= end {
		return "nothing"
	}
	return fmt.Sprintf("% x", b[at:end])
}

// pattern fills b with bytes that depend on seed and the position, so
// that a misplaced or stale byte shows.
func stPattern(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}
