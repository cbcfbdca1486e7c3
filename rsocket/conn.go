package rsocket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/spin"
	"github.com/purerdma/rdma/uverbs"
)

// Conn is one rsocket stream connection: a net.Conn over an RC queue
// pair, speaking librdmacm's rsockets protocol. See the package
// documentation for what is safe to share between goroutines.
type Conn struct {
	id    *rdmacm.ID
	qp    *uverbs.QP
	cq    *uverbs.CQ
	ch    *uverbs.CompChannel
	buf   *uverbs.Buffer
	smr   *uverbs.MR // send buffer, control slots and (iWARP) message words: local
	tmr   *uverbs.MR // the target SGL the peer writes buffer updates into
	rmr   *uverbs.MR // the receive buffer the peer writes data into
	laddr *net.TCPAddr
	raddr *net.TCPAddr

	// Sizes, fixed at connect.
	sq, rq      int
	sbufSize    int
	rbufSize    int
	inline      int
	peerCredits uint16 // the peer's receive queue: the most credits it grants
	swap        bool   // the peer's byte order differs: SGEs are written swapped
	// msgSend is rsocket.c's RS_OPT_MSG_SEND, on iWARP devices, which
	// have no immediate data: a message is a 4-byte SEND, after the
	// plain RDMA WRITE of its data when it has data.
	msgSend bool
	// quiet holds back an accepting iWARP side's first message until the
	// connecting side's first one arrives: MPA lets the initiator send
	// first only, and siw fails a connect whose MPA reply arrives with
	// data behind it ("peer sent extra data").
	quiet      bool
	msgWRs     int // send WQEs a message with data takes: 1, or 2 with msgSend
	nrecv      int // receives kept posted: rq, and ctrlSlots more with msgSend
	pollTime   time.Duration
	busyPoll   bool
	rspin      *spin.Waiter // BusyPoll's pacing of Read's and of Write's loops
	wspin      *spin.Waiter
	sbuf, ctrl []byte // views of buf
	tgt, rbuf  []byte
	iotab      []byte // view of buf: the table the peer writes its mappings into (ioMapLen each)
	mword      []byte // msgSend: view of buf, the message a SEND carries (sent inline)
	rslots     []byte // msgSend: view of buf, each posted receive's message (sendMsgLen each)
	rslotAddr  uint64 // rslots' address

	rmu sync.Mutex // one Read at a time
	wmu sync.Mutex // one Write at a time

	closing atomic.Bool
	life    context.Context // ends at Close: user waits and the watcher
	endLife context.CancelFunc
	watched chan struct{} // closed when the rdma_cm watcher has returned

	mu sync.Mutex // everything below
	st state

	// The connecting side on iWARP sends its first credit update again
	// (nudge) until a message from the peer shows the peer is reading:
	// siw can leave that first message unread (nudgeDelays says why).
	heard  bool        // a message from the peer arrived
	nudger *time.Timer // pending nudge; nil once none is to come
	// The connecting side on iWARP (dialed) writes nothing to the peer
	// once, when it first hears from it (flushDue until posted): what it
	// sent before may lie unread at the peer (nudgeDelays), and by then
	// the peer's socket is the QP's, so a frame arriving behind makes siw
	// read them all. A peer that answers at once (C's rsocket grants
	// credits first thing) stops the nudges before they could help.
	dialed   bool
	flushDue bool
	flushes  int // writes of nothing posted, for the tests
	nudges   int // nudges sent
	hide     int // test hook (hideFirstSends): SENDs still to post as zero-length WRITEs

	// Send side (rsocket.c's names in comments).
	sqeAvail  int    // sqe_avail: send WQEs for data
	sbufAvail int    // sbuf_bytes_avail
	sOff      int    // ssgl[0].addr: the send ring's head
	sseqNo    uint16 // sseq_no: data messages sent
	sseqComp  uint16 // sseq_comp: the peer's credit limit
	targetSGE int    // target_sge: which of the peer's halves is written
	ctrlSeq   uint32 // ctrl_seqno
	ctrlMax   uint32 // ctrl_max_seqno

	// Receive side.
	rmsg      []uint32 // lengths of data messages not yet read: rq+1 slots
	rHead     int
	rTail     int
	rOff      int    // rbuf_offset: the next byte to read
	rAvail    int    // rbuf_bytes_avail: read and not yet granted again
	rFreeOff  int    // rbuf_free_offset: the half to grant next
	rseqNo    uint16 // rseq_no: data messages read
	rseqComp  uint16 // rseq_comp: when to grant credits without a half
	remoteSGE int    // remote_sge: the peer's target SGL entry written next
	remoteSGL sge    // remote_sgl
	granted   int    // bytes of rbuf the peer may write and has not reported
	rcvSeq    uint16 // data and iomap messages received
	rcvLimit  uint16 // the credit limit last granted: rcvSeq may not pass it

	// iomap: the peer's mappings (what its IOMAP_SGL messages
	// announced, by index; Length 0 is none) and this side's (by index
	// in the peer's table, whose size the peer advertised).
	peerMaps  []ioMapping
	maps      []*ioMap
	peerIOTab sge // remote_iomap: the peer's table (Length: entries)

	// Waiting: one goroutine waits on the completion channel (until its
	// deadline, or an Interrupt), the others (followers) on wake, which
	// is closed (and replaced) when there is news for them.
	armed     bool
	chWaiter  bool
	followers int
	wake      chan struct{}
	rdl, wdl  time.Time

	rslot int // msgSend: the slot of the next receive posted (rbuf_msg_index)

	swr  uverbs.SendWR
	ssgl [2]uverbs.SGE
	mwr  uverbs.SendWR // msgSend: a message's SEND
	msge [1]uverbs.SGE // mwr's: mword
	rwr  uverbs.RecvWR
	rsge [1]uverbs.SGE // msgSend: rwr's, the slot
	wcs  [32]uverbs.WorkCompletion
}

// ioMap is one of this side's mappings (riomap): memory the peer may
// write with IOWrite.
type ioMap struct {
	mr     *uverbs.MR
	buf    []byte
	offset uint64
}

// state is the connection's state word.
type state struct {
	readable  bool  // the peer may still send: no SHUTDOWN or DISCONNECT from it
	writable  bool  // this side may still send: no CloseWrite or Close
	connected bool  // control messages may be sent
	peerEOF   bool  // the peer closed cleanly (SHUTDOWN or DISCONNECT received)
	peerGone  bool  // rdma_cm reported the connection's end
	err       error // what ended the connection, if it did not end cleanly
	closed    bool
}

// Linger is how long Close waits for the data already written to be
// acknowledged by the peer before it disconnects.
const Linger = 5 * time.Second

// ErrProtocol is what a peer that breaks the rsockets protocol gets its
// connection ended with: errors.Is(err, rsocket.ErrProtocol), and it matches
// syscall.ECONNRESET too.
var ErrProtocol = errors.New("rsocket: protocol violation by the peer")

// protocolError ends the connection for a peer's misbehaviour.
type protocolError struct{ what string }

func (e *protocolError) Error() string {
	return "rsocket: protocol violation by the peer: " + e.what + ": connection reset"
}
func (e *protocolError) Is(target error) bool {
	return target == ErrProtocol || target == sys.ErrConnReset
}

// resetError is a connection the peer or the network ended.
type resetError struct {
	why string
	err error
}

func (e *resetError) Error() string {
	s := "connection reset: " + e.why
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}
func (e *resetError) Is(target error) bool { return target == sys.ErrConnReset }
func (e *resetError) Unwrap() error        { return e.err }

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "rsocket", Source: c.laddr, Addr: c.raddr, Err: err}
}

// setup makes the endpoint of id: its CQ and channel, QP, buffers and
// posted receives, with cfg's sizes. The caller closes id on error.
// testHooks are set by tests only (export_test.go), before the
// connections they apply to are made.
var testHooks struct {
	msgSend        bool // rsockets' iWARP form (RS_OPT_MSG_SEND) on any device
	hideFirstSends int  // Dial: the first SENDs that go as zero-length WRITEs, which the peer never sees
}

func setup(id *rdmacm.ID, cfg Config) (*Conn, error) {
	vctx, err := id.Context()
	if err != nil {
		return nil, err
	}
	attr, err := vctx.QueryDevice()
	if err != nil {
		return nil, err
	}
	c := &Conn{id: id, wake: make(chan struct{}), msgWRs: 1}
	dev := vctx.Device()
	// iWARP has no RDMA WRITE WITH IMMEDIATE: messages are SENDs, which
	// iWARP cannot retry when the peer has no receive posted (it has no
	// RNR retry), so ctrlSlots receives more than the credits cover are
	// kept posted for the control messages that come outside them.
	c.msgSend = dev.Transport == uverbs.TransportIWARP || testHooks.msgSend
	extra := 0
	if c.msgSend {
		c.msgWRs, extra = 2, ctrlSlots
		cfg.Inline = max(cfg.Inline, sendMsgLen)
	}
	c.sq = clampQueue(cfg.SendQueue, attr.MaxQPWR)
	c.rq = clampQueue(cfg.RecvQueue, attr.MaxQPWR-extra)
	c.nrecv = c.rq + extra
	c.sbufSize, c.rbufSize = cfg.SendBuffer, cfg.RecvBuffer
	c.pollTime, c.busyPoll = cfg.PollTime, cfg.BusyPoll
	if c.busyPoll {
		c.rspin, c.wspin = spin.New(nil, spin.DefaultInterval), spin.New(nil, spin.DefaultInterval)
	}
	ok := false
	defer func() {
		if !ok {
			c.freeVerbs()
		}
	}()
	if c.ch, err = vctx.CreateCompChannel(); err != nil {
		return nil, err
	}
	if c.cq, err = vctx.CreateCQ(uverbs.CQConfig{Size: c.sq + c.nrecv, Channel: c.ch}); err != nil {
		return nil, err
	}
	if c.qp, err = id.CreateQP(nil, uverbs.QPConfig{
		Type:      uverbs.QPTypeRC,
		SendCQ:    c.cq,
		RecvCQ:    c.cq,
		SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: uint32(c.sq), MaxRecvWR: uint32(c.nrecv), MaxSendSGE: 2, MaxRecvSGE: 1,
			MaxInlineData: uint32(cfg.Inline)},
	}); err != nil {
		return nil, err
	}
	c.inline = int(c.qp.Cap().MaxInlineData)
	if c.msgSend && c.inline < sendMsgLen {
		// rs_create_ep's ENOTSUP: a message's SEND goes inline.
		return nil, fmt.Errorf("rsocket: %s sends %d bytes inline, an iWARP message needs %d: %w", dev.Name, c.inline, sendMsgLen, sys.ErrNotSupported)
	}

	// One mapping: the send ring, ctrlSlots control slots, with msgSend
	// the word a message's SEND carries and the receives' message slots,
	// then the target SGL and iomap table, the receive ring (each part
	// 64-byte aligned).
	ctrlOff := align(c.sbufSize, 64)
	msgOff := ctrlOff + ctrlSlots*sgeLen
	slotsOff := msgOff
	tgtOff := msgOff
	if c.msgSend {
		slotsOff = msgOff + sendMsgLen
		tgtOff = align(slotsOff+c.nrecv*sendMsgLen, 64)
	}
	ioOff := tgtOff + sglSize*sgeLen
	rOff := align(ioOff+cfg.IOMapSize*ioMapLen, 64)
	if c.buf, err = uverbs.AllocBuffer(rOff + c.rbufSize); err != nil {
		return nil, err
	}
	b := c.buf.Bytes()
	c.sbuf, c.ctrl = b[:c.sbufSize], b[ctrlOff:msgOff]
	c.tgt, c.rbuf = b[tgtOff:ioOff], b[rOff:rOff+c.rbufSize]
	c.iotab = b[ioOff : ioOff+cfg.IOMapSize*ioMapLen]
	c.peerMaps = make([]ioMapping, cfg.IOMapSize)
	pd := id.PD()
	var local uverbs.Access // the send side is only read by the device
	if c.msgSend {
		local = uverbs.AccessLocalWrite // the receives write their slots
		c.mword, c.rslots = b[msgOff:slotsOff], b[slotsOff:slotsOff+c.nrecv*sendMsgLen]
	}
	if c.smr, err = pd.RegMR(b[:tgtOff], local); err != nil {
		return nil, err
	}
	if c.msgSend {
		c.msge[0] = uverbs.SGE{Addr: c.smr.Addr() + uint64(msgOff), Length: sendMsgLen, LKey: c.smr.LKey()}
		c.rslotAddr = c.smr.Addr() + uint64(slotsOff)
		c.rwr.SGL = c.rsge[:]
	}
	remote := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	if c.tmr, err = pd.RegMR(b[tgtOff:ioOff+len(c.iotab)], remote); err != nil {
		return nil, err
	}
	if c.rmr, err = pd.RegMR(c.rbuf, remote); err != nil {
		return nil, err
	}
	c.rmsg = make([]uint32, c.rq+1)
	c.sbufAvail = c.sbufSize
	c.rFreeOff, c.rAvail = c.rbufSize/2, c.rbufSize/2
	c.granted = c.rbufSize / 2
	c.sqeAvail = c.sq - ctrlSlots
	c.ctrlMax = ctrlSlots
	c.rseqComp = uint16(c.rq / 2)
	c.rcvLimit = uint16(c.rq) // the credits of the connect data
	c.rwr.WRID = wrRecv
	for range c.nrecv {
		if err := c.postRecv(); err != nil {
			return nil, err
		}
	}
	if err := c.cq.RequestNotify(false); err != nil {
		return nil, err
	}
	c.armed = true
	ok = true
	return c, nil
}

// expired reports whether deadline d is set and has passed.
func expired(d time.Time) bool { return !d.IsZero() && !time.Now().Before(d) }

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

// localData is this side's connect data.
func (c *Conn) localData() []byte {
	d := connData{
		Version:         1,
		Flags:           flagIOMap, // as C: the iomap table follows the target SGL
		Credits:         uint16(c.rq),
		TargetIOMapSize: valueToScale(len(c.peerMaps)),
		TargetSGL:       sge{Addr: c.tmr.Addr(), Key: c.tmr.RKey(), Length: sglSize},
		DataBuf:         sge{Addr: c.rmr.Addr(), Key: c.rmr.RKey(), Length: uint32(c.rbufSize / 2)},
	}
	if hostBigEndian {
		d.Flags |= flagNet
	}
	b := make([]byte, connDataLen)
	d.marshal(b)
	return b
}

// hostBigEndian is rs_host_is_net().
var hostBigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// start takes the peer's connect data and starts the connection.
func (c *Conn) start(peer connData) error {
	c.remoteSGL = peer.TargetSGL
	c.remoteSGE = 1
	c.swap = (peer.Flags&flagNet != 0) != hostBigEndian
	c.setTarget(0, peer.DataBuf)
	c.sseqComp = peer.Credits
	c.peerCredits = peer.Credits
	if peer.Flags&flagIOMap != 0 {
		n := scaleToValue(peer.TargetIOMapSize)
		c.peerIOTab = sge{Addr: peer.TargetSGL.Addr + uint64(peer.TargetSGL.Length)*sgeLen, Key: peer.TargetSGL.Key,
			Length: uint32(n)}
		c.maps = make([]*ioMap, n)
	}
	c.st = state{readable: true, writable: true, connected: true}
	if a, err := c.id.LocalAddr(); err == nil {
		c.laddr = net.TCPAddrFromAddrPort(a)
	}
	if a, err := c.id.RemoteAddr(); err == nil {
		c.raddr = net.TCPAddrFromAddrPort(a)
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.watched = make(chan struct{})
	go c.watch()
	return nil
}

// target reads entry i of the target SGL: the peer writes it (in this
// host's byte order) when it grants a buffer half.
func (c *Conn) target(i int) sge { return getSGE(c.tgt[i*sgeLen:], binary.NativeEndian) }

func (c *Conn) setTarget(i int, s sge) { putSGE(c.tgt[i*sgeLen:], s, binary.NativeEndian) }

// watch waits on the connection's rdma_cm channel: a peer that dies or
// disconnects without a DISCONNECT message (a killed process, a removed
// device) is seen there and nowhere else, since with an infinite retry
// count the QP never reports it. It moves the QP to ERR, which flushes
// the receives and wakes the completion channel.
func (c *Conn) watch() {
	defer close(c.watched)
	ch := c.id.Channel()
	for {
		ev, err := ch.Next(c.life)
		if err != nil {
			return // Close
		}
		switch ev.Type {
		case rdmacm.EventDisconnected, rdmacm.EventDeviceRemoval, rdmacm.EventTimewaitExit:
		default:
			continue
		}
		c.mu.Lock()
		// What the peer sent before it went (its DISCONNECT message, the
		// last data) is in the CQ already: take it first.
		c.progress()
		if c.st.connected && !c.st.closed {
			c.fail(&resetError{why: "the peer disconnected without closing (rdma_cm " + ev.Type.String() + ")"})
		}
		c.st.connected, c.st.peerGone = false, true
		c.mu.Unlock()
		// Flush what is posted: sends to a peer that is gone would be
		// retried for ever; a blocked Read or Close wakes on the flush.
		c.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
		c.mu.Lock()
		c.kick()
		c.mu.Unlock()
	}
}

// postFailed ends the connection after a post failed. siw refuses a
// post to a QP that the kernel moved to ERR when the peer went: what the
// peer sent before, its DISCONNECT or SHUTDOWN among it, is in the CQ
// and is taken first, so that a peer that closed cleanly reads as one.
func (c *Conn) postFailed(why string, err error) {
	c.st.connected = false // no more posts, receives included
	c.drain()
	c.fail(&resetError{why: why, err: err})
}

// drain handles what the CQ holds, posting nothing.
func (c *Conn) drain() {
	for {
		n, err := c.cq.Poll(c.wcs[:])
		if err != nil {
			return
		}
		for i := range n {
			c.handle(&c.wcs[i])
		}
		if n < len(c.wcs) {
			return
		}
	}
}

// fail ends the connection with err (the first error stays).
func (c *Conn) fail(err error) {
	if c.st.err == nil && !c.st.peerEOF {
		c.st.err = err
	}
	c.st.connected, c.st.writable = false, false
}

// kick wakes every waiter: the channel waiter by interrupting its wait,
// the followers through wake.
func (c *Conn) kick() {
	if c.chWaiter {
		c.ch.Interrupt()
	}
	c.wakeFollowers()
}

// wakeFollowers wakes the goroutines waiting for the channel waiter;
// with none (one goroutine at a time in Read or Write) it allocates
// nothing.
func (c *Conn) wakeFollowers() {
	if c.followers > 0 {
		close(c.wake)
		c.wake = make(chan struct{})
	}
}

// progress polls the CQ and handles what it finds, granting credits
// before and after as C's rs_process_cq does.
func (c *Conn) progress() {
	c.updateCredits()
	for {
		n, err := c.cq.Poll(c.wcs[:])
		if err != nil {
			c.fail(&resetError{why: "poll", err: err})
			return
		}
		reposts := 0
		for i := range n {
			reposts += c.handle(&c.wcs[i])
		}
		for ; reposts > 0 && c.st.connected; reposts-- {
			if err := c.postRecv(); err != nil {
				c.postFailed("post receive", err)
			}
		}
		if n < len(c.wcs) {
			break
		}
	}
	c.flushPeer()
	c.updateCredits()
}

// flushPeer posts the zero-length RDMA WRITE to the peer's target SGL
// that flushDue asks for: it reaches no receive and makes no completion
// at the peer, so the peer's protocol sees nothing. It takes a control
// slot, whose completion gives it back.
func (c *Conn) flushPeer() {
	if !c.flushDue || !c.st.connected || c.ctrlSeq == c.ctrlMax {
		return
	}
	c.flushDue = false
	c.ctrlSeq++
	c.swr = uverbs.SendWR{WRID: uint64(msg(opCtrl, 0)), Opcode: uverbs.WRRDMAWrite,
		RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
	if err := c.qp.PostSend(&c.swr); err != nil {
		c.postFailed("post a write of nothing", err)
		return
	}
	c.flushes++
}

// handle takes one completion; it returns 1 for a receive to post again.
func (c *Conn) handle(wc *uverbs.WorkCompletion) int {
	if wc.WRID&wrRecv == 0 {
		m := uint32(wc.WRID)
		switch msgOp(m) {
		case opSGL, opCtrl:
			c.ctrlMax++
		case opIOMapSG:
			c.sqeAvail++
			if wc.WRID&wrMsgSend == 0 { // the entry's WRITE, not its SEND
				c.sbufAvail += ioMapLen
			}
		default: // a DATA or iomap WRITE, or a DATA message's SEND (0 bytes)
			c.sqeAvail++
			c.sbufAvail += int(msgData(m))
		}
		if wc.Status != uverbs.WCSuccess && c.st.connected {
			c.fail(&resetError{why: "a write to the peer failed", err: wc.Status})
		}
		return 0
	}
	if wc.Status != uverbs.WCSuccess {
		if c.st.connected {
			c.fail(&resetError{why: "receive failed", err: wc.Status})
		}
		return 0
	}
	if !c.heard && c.dialed {
		c.flushDue = true
	}
	c.quiet, c.heard = false, true
	var imm uint32
	switch {
	case c.msgSend:
		// The SEND's 4 bytes, in the slot this receive was posted with
		// (receives complete in the order they were posted).
		i := int(uint32(wc.WRID))
		m, err := sendMsg(c.rslots[i*sendMsgLen:(i+1)*sendMsgLen], wc.ByteLen, wc.Flags&uverbs.WCWithImm != 0)
		if err != nil {
			c.violation(err.Error())
			return 1
		}
		imm = m
	case wc.Flags&uverbs.WCWithImm == 0:
		c.violation("a message without immediate data")
		return 1
	default:
		imm = wc.Imm
	}
	switch op, data := msgOp(imm), msgData(imm); op {
	case opData:
		if c.rcvSeq == c.rcvLimit {
			c.violation(fmt.Sprintf("data message %d past the credit limit %d granted", c.rcvSeq+1, c.rcvLimit))
			return 1
		}
		c.rcvSeq++
		if next := (c.rTail + 1) % len(c.rmsg); next == c.rHead {
			c.violation(fmt.Sprintf("more data messages than the %d credits granted (%d unread)", c.rq, len(c.rmsg)-1))
			return 1
		}
		if int(data) > c.granted {
			c.violation(fmt.Sprintf("%d bytes of data where %d were granted", data, c.granted))
			return 1
		}
		c.granted -= int(data)
		c.rmsg[c.rTail] = data
		c.rTail = (c.rTail + 1) % len(c.rmsg)
	case opSGL:
		comp := uint16(data)
		if int16(comp-c.sseqComp) < 0 {
			c.violation(fmt.Sprintf("credit limit moved back from %d to %d", c.sseqComp, comp))
			return 1
		}
		if comp-c.sseqNo > c.peerCredits {
			c.violation(fmt.Sprintf("credit limit %d is %d past the %d messages sent, more than its receive queue of %d", comp, comp-c.sseqNo, c.sseqNo, c.peerCredits))
			return 1
		}
		c.sseqComp = comp
	case opCtrl:
		switch data {
		case ctrlDisconnect:
			c.st.readable, c.st.writable, c.st.connected, c.st.peerEOF = false, false, false, true
		case ctrlShutdown:
			if c.st.writable {
				c.st.readable, c.st.peerEOF = false, true
			} else {
				c.st.readable, c.st.connected, c.st.peerEOF = false, false, true
			}
		case ctrlKeepalive:
		default:
			c.violation(fmt.Sprintf("control message %d", data))
		}
	case opIOMapSG:
		switch {
		case len(c.peerMaps) == 0:
			c.violation("an iomap entry, though no iomap was offered")
			return 1
		case int(data) >= len(c.peerMaps):
			c.violation(fmt.Sprintf("an iomap entry at index %d of a table of %d", data, len(c.peerMaps)))
			return 1
		case c.rcvSeq == c.rcvLimit:
			c.violation(fmt.Sprintf("iomap message %d past the credit limit %d granted", c.rcvSeq+1, c.rcvLimit))
			return 1
		}
		c.rcvSeq++ // it took one of the sender's credits
		m := getIOMap(c.iotab[int(data)*ioMapLen:], binary.NativeEndian)
		if m.Length > 0 && m.Offset+uint64(m.Length-1) < m.Offset {
			c.violation(fmt.Sprintf("iomap entry %d: offset %#x and length %d pass 2^64", data, m.Offset, m.Length))
			return 1
		}
		c.peerMaps[data] = m
	default:
		c.violation(fmt.Sprintf("message opcode %d", op))
	}
	return 1
}

func (c *Conn) violation(what string) {
	c.fail(&protocolError{what})
	c.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
}

// updateCredits is rs_update_credits: grant a free half of the receive
// buffer, or credits alone once half the granted messages were read.
func (c *Conn) updateCredits() {
	half := c.rbufSize / 2
	// With msgSend, an update with a buffer half is two requests and
	// takes two control slots; C asks for two free for any update
	// (rs_2ctrl_avail).
	if !c.st.connected || c.quiet || c.ctrlMax-c.ctrlSeq < uint32(c.msgWRs) ||
		!(c.rAvail >= half || int16(c.rseqNo-c.rseqComp) >= 0) {
		return
	}
	c.ctrlSeq++
	c.rseqComp = c.rseqNo + uint16(c.rq/2)
	c.rcvLimit = c.rseqNo + uint16(c.rq)
	imm := msg(opSGL, uint32(c.rseqNo)+uint32(c.rq))
	var err error
	if c.rAvail >= half {
		if c.msgSend {
			c.ctrlSeq++ // the SEND after the WRITE
		}
		slot := int(c.ctrlSeq%ctrlSlots) * sgeLen
		putSGE(c.ctrl[slot:], sge{Addr: c.rmr.Addr() + uint64(c.rFreeOff), Key: c.rmr.RKey(), Length: uint32(half)}, c.peerOrder())
		c.ssgl[0] = uverbs.SGE{Addr: c.smr.Addr() + uint64(len(c.sbuf)+slot), Length: sgeLen, LKey: c.smr.LKey()}
		c.swr = uverbs.SendWR{WRID: uint64(imm), SGL: c.ssgl[:1],
			RemoteAddr: c.remoteSGL.Addr + uint64(c.remoteSGE*sgeLen), RKey: c.remoteSGL.Key}
		if c.inline >= sgeLen {
			c.swr.Flags = uverbs.SendInline
		}
		c.rAvail -= half
		c.rFreeOff = (c.rFreeOff + half) % c.rbufSize
		c.remoteSGE = (c.remoteSGE + 1) % int(c.remoteSGL.Length)
		c.granted += half
		err = c.postWriteMsg(imm)
	} else {
		err = c.postMsg(imm)
	}
	if err != nil {
		c.postFailed("post a credit update", err)
	}
}

// peerOrder is the byte order of what this side writes into the peer's
// memory: the peer's.
func (c *Conn) peerOrder() binary.ByteOrder {
	if c.swap {
		return otherEndian()
	}
	return binary.NativeEndian
}

// postWriteMsg posts c.swr, the RDMA WRITE of a message's data, with
// message m (rs_post_write_msg): as WRITE WITH IMMEDIATE m, or with
// msgSend as a plain WRITE and the SEND of m chained after it. c.swr's
// WRID is m, which its completion gives back.
func (c *Conn) postWriteMsg(m uint32) error {
	if !c.msgSend {
		c.swr.Opcode, c.swr.Imm = uverbs.WRRDMAWriteWithImm, m
		return c.qp.PostSend(&c.swr)
	}
	c.swr.Opcode = uverbs.WRRDMAWrite
	// The SEND's id is m's opcode with no value (its completion returns
	// no send buffer), marked as a message's SEND.
	c.setMsgSend(m, uint64(msg(msgOp(m), 0))|wrMsgSend)
	c.swr.Next = &c.mwr
	err := c.qp.PostSend(&c.swr)
	c.swr.Next = nil
	return err
}

// postMsg posts message m, which has no data (rs_post_msg): a
// zero-length WRITE WITH IMMEDIATE m, or with msgSend the SEND of m.
func (c *Conn) postMsg(m uint32) error {
	if !c.msgSend {
		// C leaves a zero-length write's address and key unset (which
		// the verbs allow); this side sends the peer's target SGL.
		c.swr = uverbs.SendWR{WRID: uint64(m), Opcode: uverbs.WRRDMAWriteWithImm, Imm: m,
			RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
		return c.qp.PostSend(&c.swr)
	}
	c.setMsgSend(m, uint64(m))
	return c.qp.PostSend(&c.mwr)
}

// setMsgSend makes c.mwr the SEND of message m with id wrID: 4 bytes,
// inline (copied when posted), in the peer's byte order.
func (c *Conn) setMsgSend(m uint32, wrID uint64) {
	c.peerOrder().PutUint32(c.mword, m)
	c.mwr = uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: c.msge[:]}
	if c.hide > 0 {
		// The test hook: a WRITE of nothing to the peer's target SGL
		// completes here as the SEND would, and the peer sees nothing.
		c.hide--
		c.mwr = uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRRDMAWrite, RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
	}
}

// nudgeDelays are the waits, after Dial and after each nudge, before
// the connecting side on iWARP sends its credit limit again while no
// message from the peer has arrived. siw (Linux 6.1 and 6.12) sends the
// MPA reply in siw_accept before it hands the socket's data-ready
// callback to the QP (siw_qp_socket_assoc); a message that arrives in
// between stays in the socket, unread until more data comes. The
// accepting side says nothing before it has read the connecting side's
// first message (quiet), so a connection whose client waits for the
// server would wait for ever. A second message makes siw read both.
// The repeat is idempotent (the same credit limit, no buffer) and takes
// one of the ctrlSlots receives the peer keeps beyond the credits: the
// first update, two nudges and the DISCONNECT fit in them while the peer
// reads nothing.
var nudgeDelays = [...]time.Duration{50 * time.Millisecond, time.Second}

// nudge is the timer's function: it takes what the CQ holds and, if the
// peer is still not heard from, sends the credit limit again.
func (c *Conn) nudge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nudger == nil {
		return // stopped
	}
	c.progress()
	if c.heard || !c.st.connected || c.st.closed {
		c.kick() // what progress found may be what a waiter wants
		c.nudger = nil
		return
	}
	if c.ctrlSeq == c.ctrlMax {
		// Every control slot is in flight: look again after the same wait.
		c.nudger.Reset(nudgeDelays[c.nudges])
		return
	}
	c.ctrlSeq++
	if err := c.postMsg(msg(opSGL, uint32(c.rcvLimit))); err != nil {
		c.postFailed("post a credit update", err)
		c.kick()
		c.nudger = nil
		return
	}
	if c.nudges++; c.nudges == len(nudgeDelays) {
		c.nudger = nil
		return
	}
	c.nudger.Reset(nudgeDelays[c.nudges])
}

// stopNudges ends the nudges; the caller holds mu.
func (c *Conn) stopNudges() {
	if c.nudger != nil {
		c.nudger.Stop()
		c.nudger = nil
	}
}

// postRecv posts a receive: of nothing, or with msgSend into the next
// message slot, whose index is its id's low bits (rs_post_recv).
func (c *Conn) postRecv() error {
	if c.msgSend {
		c.rwr.WRID = wrRecv | uint64(c.rslot)
		c.rsge[0] = uverbs.SGE{Addr: c.rslotAddr + uint64(c.rslot*sendMsgLen), Length: sendMsgLen, LKey: c.smr.LKey()}
		if c.rslot++; c.rslot == c.nrecv {
			c.rslot = 0
		}
	}
	return c.qp.PostRecv(&c.rwr)
}

func otherEndian() binary.ByteOrder {
	if hostBigEndian {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// postCtrl sends a control message (SHUTDOWN, DISCONNECT); the caller
// checked a control slot is free.
func (c *Conn) postCtrl(v uint32) error {
	c.ctrlSeq++
	return c.postMsg(msg(opCtrl, v))
}

// canSend is rs_can_send: a message with data may go (with msgSend it
// takes two send WQEs).
func (c *Conn) canSend() bool {
	return !c.quiet && c.sqeAvail >= c.msgWRs && c.sbufAvail >= sendLowWater && c.sseqNo != c.sseqComp &&
		c.target(c.targetSGE).Length != 0
}

func (c *Conn) haveData() bool { return c.rHead != c.rTail }

func (c *Conn) ctrlAvail() bool { return !c.quiet && c.ctrlSeq != c.ctrlMax }

func (c *Conn) allSendsDone() bool {
	return int(c.ctrlMax-c.ctrlSeq)+c.sqeAvail == c.sq
}

// await makes progress until cond holds. A user wait (Read, Write)
// ends on its deadline (*dl, read under mu each time) and on Close; an
// internal one (Close's own) only on its deadline. The caller holds mu.
func (c *Conn) await(cond func() bool, dl *time.Time, user bool) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var polled time.Time // when polling began
	for {
		c.progress()
		if cond() {
			return nil
		}
		if user && c.st.closed {
			return net.ErrClosed
		}
		d := *dl
		if expired(d) {
			return os.ErrDeadlineExceeded
		}
		// Poll a while before blocking (polling_time), or for ever with
		// BusyPoll, letting the other direction in between.
		if c.busyPoll && user {
			w := c.wspin
			if dl == &c.rdl {
				w = c.rspin
			}
			c.mu.Unlock()
			w.Spin()
			c.mu.Lock()
			continue
		}
		if c.pollTime > 0 {
			now := time.Now()
			if polled.IsZero() {
				polled = now
			}
			if now.Sub(polled) < c.pollTime {
				c.mu.Unlock()
				c.mu.Lock()
				continue
			}
		}
		if !c.armed {
			if err := c.cq.RequestNotify(false); err != nil {
				c.fail(&resetError{why: "arm the CQ", err: err})
				return c.st.err
			}
			c.armed = true
			continue // a completion may have come before the arming
		}
		if !c.chWaiter {
			// Wait for a completion event until the deadline; a new
			// deadline, Close or the watcher interrupts the wait (kick),
			// and the loop looks again.
			c.chWaiter = true
			c.mu.Unlock()
			_, err := c.ch.WaitUntil(d)
			c.mu.Lock()
			c.chWaiter = false
			switch {
			case err == nil:
				c.cq.AckEvents(1)
				c.armed = false
			case errors.Is(err, uverbs.ErrInterrupted), errors.Is(err, os.ErrDeadlineExceeded):
			default:
				c.fail(&resetError{why: "wait for completions", err: err})
			}
			c.wakeFollowers() // poll again, or take over the channel
			continue
		}
		w := c.wake
		c.followers++
		var tc <-chan time.Time
		if !d.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(d))
			} else {
				timer.Reset(time.Until(d))
			}
			tc = timer.C
		}
		c.mu.Unlock()
		select {
		case <-w:
		case <-tc:
		}
		c.mu.Lock()
		c.followers--
	}
}

// Read reads data the peer wrote, as net.Conn's Read: it blocks until
// some is there, the peer closes its side (io.EOF once all data is
// read), the connection fails (an error matching sys.ErrConnReset),
// the read deadline passes (os.ErrDeadlineExceeded) or Close
// (net.ErrClosed).
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.closed {
		return 0, c.opError("read", net.ErrClosed)
	}
	if expired(c.rdl) {
		return 0, c.opError("read", os.ErrDeadlineExceeded)
	}
	for !c.haveData() {
		if c.progress(); c.haveData() {
			break
		}
		if !c.st.readable || c.st.err != nil {
			if c.st.err != nil {
				return 0, c.opError("read", c.st.err)
			}
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		err := c.await(func() bool { return c.haveData() || !c.st.readable || c.st.err != nil }, &c.rdl, true)
		if err != nil {
			return 0, c.opError("read", err)
		}
	}
	n := 0
	for n < len(p) && c.haveData() {
		m := int(c.rmsg[c.rHead])
		take := min(m, len(p)-n)
		if take < m {
			c.rmsg[c.rHead] -= uint32(take)
		} else {
			c.rseqNo++
			c.rHead = (c.rHead + 1) % len(c.rmsg)
		}
		for take > 0 {
			k := min(take, c.rbufSize-c.rOff)
			copy(p[n:n+k], c.rbuf[c.rOff:c.rOff+k])
			n, take, c.rAvail = n+k, take-k, c.rAvail+k
			if c.rOff += k; c.rOff == c.rbufSize {
				c.rOff = 0
			}
		}
	}
	c.updateCredits()
	return n, nil
}

// Write writes p to the peer, as net.Conn's Write: it returns when all
// of p is posted (copied into the send buffer), or with the count
// written so far and an error: the write deadline (os.ErrDeadlineExceeded;
// what was counted was sent), a failed connection (sys.ErrConnReset),
// CloseWrite (sys.ErrPipe), Close (net.ErrClosed).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writeErr(); err == nil && expired(c.wdl) {
		return 0, c.opError("write", os.ErrDeadlineExceeded)
	}
	n, olen := 0, olapStart
	for {
		if err := c.writeErr(); err != nil {
			return n, c.opError("write", err)
		}
		if n == len(p) {
			return n, nil
		}
		if !c.canSend() {
			err := c.await(func() bool { return c.canSend() || c.writeErr() != nil }, &c.wdl, true)
			if err != nil {
				return n, c.opError("write", err)
			}
			continue
		}
		x := len(p) - n
		if olen < x {
			x = olen
			if olen < maxTransfer {
				olen <<= 1
			}
		}
		tgt := c.target(c.targetSGE)
		x = min(x, c.sbufAvail, int(tgt.Length))
		if err := c.postData(p[n:n+x], tgt); err != nil {
			c.postFailed("post a write", err)
			return n, c.opError("write", c.writeErr())
		}
		n += x
	}
}

// writeErr is why no more can be written, or nil.
func (c *Conn) writeErr() error {
	switch {
	case c.st.closed:
		return net.ErrClosed
	case c.st.err != nil:
		return c.st.err
	case !c.st.writable && c.st.peerEOF && !c.st.readable && !c.st.connected:
		return &resetError{why: "the peer closed the connection"}
	case !c.st.writable:
		return sys.ErrPipe
	}
	return nil
}

// postData copies b into the send ring and writes it into the peer's
// current target half with a DATA message (rs_write_data).
func (c *Conn) postData(b []byte, tgt sge) error {
	x := len(b)
	nsge := c.toRing(b)
	c.sseqNo++
	c.sqeAvail -= c.msgWRs
	c.sbufAvail -= x
	tgt.Addr += uint64(x)
	tgt.Length -= uint32(x)
	addr, key := tgt.Addr-uint64(x), tgt.Key
	c.setTarget(c.targetSGE, tgt)
	if tgt.Length == 0 {
		c.targetSGE = (c.targetSGE + 1) % sglSize
	}
	imm := msg(opData, uint32(x))
	c.swr = uverbs.SendWR{WRID: uint64(imm), SGL: c.ssgl[:nsge], RemoteAddr: addr, RKey: key}
	if x <= c.inline {
		c.swr.Flags = uverbs.SendInline
	}
	return c.postWriteMsg(imm)
}

// toRing copies b into the send ring at its head and points ssgl at it;
// it returns how many of ssgl's entries it used (2 when b wraps).
func (c *Conn) toRing(b []byte) int {
	x := len(b)
	nsge := 1
	if end := c.sbufSize - c.sOff; x <= end {
		copy(c.sbuf[c.sOff:], b)
		c.ssgl[0] = uverbs.SGE{Addr: c.smr.Addr() + uint64(c.sOff), Length: uint32(x), LKey: c.smr.LKey()}
		c.sOff += x
	} else {
		copy(c.sbuf[c.sOff:], b[:end])
		copy(c.sbuf, b[end:])
		c.ssgl[0] = uverbs.SGE{Addr: c.smr.Addr() + uint64(c.sOff), Length: uint32(end), LKey: c.smr.LKey()}
		c.ssgl[1] = uverbs.SGE{Addr: c.smr.Addr(), Length: uint32(x - end), LKey: c.smr.LKey()}
		c.sOff = x - end
		nsge = 2
	}
	if c.sOff == c.sbufSize {
		c.sOff = 0
	}
	return nsge
}

// CloseWrite shuts down the writing side (rshutdown SHUT_WR): the peer
// reads io.EOF once it has read what was written; this side can still
// read.
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.closed {
		return c.opError("close", net.ErrClosed)
	}
	if !c.st.writable {
		return nil
	}
	c.st.writable = false
	if !c.st.connected {
		return nil
	}
	v := uint32(ctrlShutdown)
	if !c.st.readable {
		v = ctrlDisconnect
	}
	return c.sendCtrl(v, time.Now().Add(Linger))
}

// sendCtrl waits for a control slot until dl, then sends v.
func (c *Conn) sendCtrl(v uint32, dl time.Time) error {
	if !c.ctrlAvail() {
		if err := c.await(func() bool { return c.ctrlAvail() || !c.st.connected }, &dl, false); err != nil {
			return c.opError("close", err)
		}
	}
	if !c.st.connected {
		return nil
	}
	if v == ctrlDisconnect {
		c.st.connected = false
	}
	if err := c.postCtrl(v); err != nil {
		if c.postFailed("post a control message", err); c.st.err != nil {
			return c.opError("close", c.st.err)
		}
	}
	return nil
}

// Close sends DISCONNECT (rclose), waits up to Linger for what was
// written to be acknowledged, disconnects and frees the connection's
// resources. A blocked Read or Write returns net.ErrClosed at once.
func (c *Conn) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		return c.opError("close", net.ErrClosed)
	}
	c.mu.Lock()
	c.st.closed = true
	c.stopNudges()
	c.kick()
	c.mu.Unlock()
	c.rmu.Lock()
	c.wmu.Lock()
	defer c.rmu.Unlock()
	defer c.wmu.Unlock()

	// The watcher goes on until the DISCONNECT is sent and acknowledged:
	// a peer that went meanwhile ends the wait through it.
	c.mu.Lock()
	c.progress() // the peer's DISCONNECT may be waiting: then none is sent
	dl := time.Now().Add(Linger)
	if c.st.connected {
		c.st.readable, c.st.writable = false, false
		c.sendCtrl(ctrlDisconnect, dl)
		c.await(func() bool { return c.allSendsDone() || c.st.err != nil || c.st.peerGone }, &dl, false)
	}
	c.mu.Unlock()
	c.endLife()
	<-c.watched
	c.id.Disconnect()
	// The QP (the ID's), then the MRs and the CQ, then the ID, which
	// may release the device context they all belong to.
	var errs []error
	if err := c.freeVerbs(); err != nil {
		errs = append(errs, err)
	}
	if err := c.id.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// freeVerbs frees what setup made, children first, except the QP, which
// the ID owns (CreateQP).
func (c *Conn) freeVerbs() error {
	var errs []error
	closeIt := func(x io.Closer) {
		if err := x.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.qp != nil {
		if err := c.id.DestroyQP(); err != nil {
			errs = append(errs, err)
		}
		c.qp = nil
	}
	for i, m := range c.maps {
		if m != nil {
			closeIt(m.mr)
			c.maps[i] = nil
		}
	}
	for _, mr := range []*uverbs.MR{c.rmr, c.tmr, c.smr} {
		if mr != nil {
			closeIt(mr)
		}
	}
	if c.buf != nil {
		closeIt(c.buf)
	}
	if c.cq != nil {
		if n := c.cq.Unacked(); n > 0 {
			c.cq.AckEvents(n)
		}
		closeIt(c.cq)
	}
	if c.ch != nil {
		closeIt(c.ch)
	}
	return errors.Join(errs...)
}

// LocalAddr is this side's address, a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr is the peer's address, a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines; a zero time clears
// them. A blocked Read or Write sees a new deadline at once.
func (c *Conn) SetDeadline(t time.Time) error {
	return c.setDeadline(t, true, true)
}

// SetReadDeadline sets the read deadline (see SetDeadline).
func (c *Conn) SetReadDeadline(t time.Time) error { return c.setDeadline(t, true, false) }

// SetWriteDeadline sets the write deadline (see SetDeadline).
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.setDeadline(t, false, true) }

func (c *Conn) setDeadline(t time.Time, r, w bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.closed {
		return c.opError("set deadline", net.ErrClosed)
	}
	if r {
		c.rdl = t
	}
	if w {
		c.wdl = t
	}
	c.kick()
	return nil
}
