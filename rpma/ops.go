package rpma

import (
	"errors"
	"fmt"
	"math"

	"github.com/purerdma/rdma/uverbs"
)

// CompletionFlags say when an operation reports a completion
// (RPMA_F_COMPLETION_*). One of the two is required.
type CompletionFlags int

const (
	// CompletionOnError reports a completion only if the operation
	// fails (an unsignaled work request: its failure still completes).
	CompletionOnError CompletionFlags = 1 << 0
	// CompletionAlways reports a completion whatever the result.
	CompletionAlways CompletionFlags = 1<<1 | CompletionOnError
)

const completionOnSuccess = CompletionAlways &^ CompletionOnError

// FlushType is what a flush guarantees (enum rpma_flush_type).
type FlushType int

const (
	// FlushPersistent makes the data persistent at the other side. It
	// needs a remote peer configuration with direct write to PMem and
	// a remote region with UsageFlushPersistent.
	FlushPersistent FlushType = 0
	// FlushVisibility makes the data visible to the other side's CPUs.
	// It needs a remote region with UsageFlushVisibility.
	FlushVisibility FlushType = 1
)

func (t FlushType) String() string {
	switch t {
	case FlushPersistent:
		return "persistent"
	case FlushVisibility:
		return "visibility"
	}
	return "FlushType(?)"
}

// AtomicWriteAlignment is the alignment AtomicWrite's destination
// offset needs (RPMA_ATOMIC_WRITE_ALIGNMENT).
const AtomicWriteAlignment = 8

// An op is an operation that posts a work request. Its row of ops
// names it in errors and says what it needs; busy holds its full-queue
// error.
type op uint8

const (
	opRead op = iota
	opWrite
	opWriteWithImm
	opAtomicWrite
	opFlush
	opSend
	opSendWithImm
	opRecv
	opSRQRecv
	opConnReqRecv
	numOps
)

// opRow is an operation's row of ops.
type opRow struct {
	name   string          // as errors carry it: "rpma: <name>: ..."
	opcode uverbs.WROpcode // what it posts (Flush and AtomicWrite: when native; receives: none)
	local  Usage           // the local region needs one of these usages (0: any)
	remote Usage           // a read's or write's remote region needs one of these (Flush: by its type)
	recv   bool            // it posts to a receive queue
}

var ops = [numOps]opRow{
	opRead:         {"read", uverbs.WRRDMARead, localWritable, readable, false},
	opWrite:        {"write", uverbs.WRRDMAWrite, 0, UsageWriteDst, false},
	opWriteWithImm: {"write with imm", uverbs.WRRDMAWriteWithImm, 0, UsageWriteDst, false},
	opAtomicWrite:  {"atomic write", uverbs.WRAtomicWrite, 0, UsageWriteDst, false},
	opFlush:        {"flush", uverbs.WRFlush, 0, 0, false},
	opSend:         {"send", uverbs.WRSend, 0, 0, false},
	opSendWithImm:  {"send with imm", uverbs.WRSendWithImm, 0, 0, false},
	opRecv:         {"recv", 0, localWritable, 0, true},
	opSRQRecv:      {"srq recv", 0, 0, 0, true},
	opConnReqRecv:  {"conn_req recv", 0, 0, 0, true},
}

func (o op) String() string { return ops[o].name }

// busy are the ErrAgain errors of a full queue, one per operation, made
// once so that a caller retrying in a loop allocates nothing. Every
// entry is set here, so a full queue is never a nil error.
var busy = func() (b [numOps]error) {
	for o := range numOps {
		q := "send"
		if ops[o].recv {
			q = "receive"
		}
		b[o] = &Error{Op: o.String(), Class: ErrAgain, Err: fmt.Errorf("%s queue full: %w", q, uverbs.ErrBusy)}
	}
	return b
}()

// postFailed is the error of a post that uverbs refused.
func postFailed(o op, err error) error {
	if errors.Is(err, uverbs.ErrBusy) {
		return busy[o]
	}
	return provider(o.String(), err)
}

// post posts c.swr, built by the operation o. Read, Write, Flush and
// Send write it out (a call less per operation).
func (c *Conn) post(o op) error {
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// A fault is the first check an operation failed, faultNone if none:
// an operation makes its checks once, in the order their errors take,
// and only when one failed makes the error from the fault (opError).
// The unsigned comparisons fold the negative cases in.
type fault uint8

const (
	faultNone        fault = iota
	faultConn              // a nil or closed connection
	faultFlags             // completion flags neither CompletionOnError nor CompletionAlways
	faultLen               // a length outside 0 to 2^32-1
	faultRegions           // a read or write with a nil region (fine for a zero-byte one without regions)
	faultNoSrc             // a send without a region (fine for an empty message)
	faultLocalRange        // outside the local region
	faultRemoteRange       // outside the remote region, or a negative remote offset
	faultLocalUsage        // the local region's usage does not allow the operation
	faultRemoteUsage       // the remote region's usage does not allow it
	faultNoDst             // AtomicWrite or Flush without a remote region
	faultDstRange          // AtomicWrite or Flush outside the remote region
)

// usable: the connection is there and open.
func (c *Conn) usable() bool { return c != nil && !c.closed.Load() }

// flagsOK: CompletionOnError or CompletionAlways.
func flagsOK(f CompletionFlags) bool { return uint(f-1) <= uint(CompletionAlways-1) }

// lenOK: the length of one work request's data.
func lenOK(length int) bool { return uint64(length) <= math.MaxUint32 }

// checkDst is the checks AtomicWrite and Flush share, in the order
// their errors take: the connection, the region, the flags, the range.
func (c *Conn) checkDst(dst *RemoteMR, off, length int, flags CompletionFlags) fault {
	switch {
	case !c.usable():
		return faultConn
	case dst == nil:
		return faultNoDst
	case !flagsOK(flags):
		return faultFlags
	case !dst.inRange(uint64(off), uint64(length)):
		return faultDstRange
	}
	return faultNone
}

// opArgs are the arguments a check saw, for its error.
type opArgs struct {
	local     *MR
	localOff  int
	remote    *RemoteMR
	remoteOff int
	length    int
	flags     CompletionFlags
}

// opError is the error of the operation r whose check failed with f.
func (c *Conn) opError(r *opRow, f fault, a opArgs) error {
	name := r.name
	switch f {
	case faultConn:
		return c.dead(name)
	case faultFlags:
		return invalid(name, "completion flags %#x: CompletionOnError or CompletionAlways", int(a.flags))
	case faultLen:
		return invalid(name, "length %d: 0 to 2^32-1", a.length)
	case faultRegions:
		return invalid(name, "a local and a remote region, or neither with offsets and length 0")
	case faultNoSrc:
		return invalid(name, "no region, but offset %d and length %d", a.localOff, a.length)
	case faultLocalRange:
		return a.local.rangeErr(name, a.localOff, a.length)
	case faultRemoteRange:
		if a.remoteOff < 0 {
			return invalid(name, "remote offset %d", a.remoteOff)
		}
		return a.remote.rangeErr(name, uint64(a.remoteOff), uint64(a.length))
	case faultLocalUsage:
		return invalid(name, "the local region's usage %v does not allow it (want one of %v)", a.local.usage, r.local)
	case faultRemoteUsage:
		return invalid(name, "the remote region's usage %v does not allow it (want one of %v)", a.remote.Usage, r.remote)
	case faultNoDst:
		return invalid(name, "nil remote region")
	case faultDstRange:
		if a.remoteOff < 0 || a.length < 0 {
			return invalid(name, "offset %d, length %d", a.remoteOff, a.length)
		}
		return a.remote.rangeErr(name, uint64(a.remoteOff), uint64(a.length))
	}
	return invalid(name, "check %d failed", f)
}

// The connection's one work request c.swr is reused: every operation
// writes every field that an operation of this package writes (setWR;
// the others are never written and stay zero), so nothing an earlier
// operation left can reach a later one, whatever its opcode. The SGE
// list is c.sge, set once and kept (setSGL: a pointer store and its
// write barrier stay off the operations' path): an operation without
// data zeroes the entry (FLUSH and ATOMIC_WRITE do not read it); only a
// zero-byte read or write and an empty message have no list.

// setWR writes c.swr's fields but the SGE list: the opcode, the flags,
// the WRID, imm (0 but for the *_WITH_IMM opcodes), the remote address
// and key (0 for a send); AtomicWrite and the flush fields are zeroed,
// for native AtomicWrite and Flush to set after it.
func (c *Conn) setWR(opcode uverbs.WROpcode, flags CompletionFlags, opContext uint64, imm uint32, raddr uint64, rkey uint32) {
	w := &c.swr
	w.WRID, w.Opcode, w.Flags, w.Imm = opContext, opcode, sendFlags(flags), imm
	w.RemoteAddr, w.RKey = raddr, rkey
	clear(w.AtomicWrite[:])
	w.FlushType, w.FlushLevel, w.FlushLength = 0, 0, 0
}

// sendFlags is the work request's flags: signaled for CompletionAlways.
// completionOnSuccess is uverbs.SendSignaled's bit (asserted below), so
// it is one AND.
func sendFlags(f CompletionFlags) uverbs.SendFlags {
	return uverbs.SendFlags(f & completionOnSuccess)
}

var _ = [1]struct{}{}[completionOnSuccess-CompletionFlags(uverbs.SendSignaled)]

// setSGE makes c.sge[0] length bytes at off of m.
func (c *Conn) setSGE(m *MR, off, length int) {
	c.sge[0] = uverbs.SGE{Addr: m.mr.Addr() + uint64(off), Length: uint32(length), LKey: m.mr.LKey()}
}

// setSGL points c.swr at c.sge. The list is set only when it is not
// already (it is nil only before the first operation with data and
// after one without a region), so the pointer store and its write
// barrier stay off the operations' path.
func (c *Conn) setSGL() {
	if c.swr.SGL == nil {
		c.swr.SGL = c.sge[:]
	}
}

// noData is the SGE list of an operation without data (native FLUSH and
// ATOMIC_WRITE): the list stays, its entry zeroed.
func (c *Conn) noData() {
	c.sge[0] = uverbs.SGE{}
	c.setSGL()
}

// prepRemote checks the read or write r and makes c.swr of it; the
// caller posts. Every check is made once, in the order their errors
// take; the first that fails says which (a fault) to remoteRest, which
// makes the error.
func (c *Conn) prepRemote(r *opRow, local *MR, localOff int, remote *RemoteMR, remoteOff, length int, flags CompletionFlags, opContext uint64) error {
	var f fault
	switch {
	case !c.usable():
		f = faultConn
	case !flagsOK(flags):
		f = faultFlags
	case !lenOK(length):
		f = faultLen
	case local == nil || remote == nil:
		f = faultRegions
	case !local.inRange(localOff, length):
		f = faultLocalRange
	case !remote.inRange(uint64(remoteOff), uint64(length)):
		f = faultRemoteRange
	case r.local != 0 && local.usage&r.local == 0:
		f = faultLocalUsage
	case remote.Usage&r.remote == 0:
		f = faultRemoteUsage
	default:
		c.setSGE(local, localOff, length)
		c.setWR(r.opcode, flags, opContext, 0, remote.Addr+uint64(remoteOff), remote.RKey)
		c.setSGL()
		return nil
	}
	return c.remoteRest(r, f, local, localOff, remote, remoteOff, length, flags, opContext)
}

// remoteRest is a read or write whose check f failed: a zero-byte one
// without regions, as librpma allows, is made (nil error); anything
// else is the check's error.
func (c *Conn) remoteRest(r *opRow, f fault, local *MR, localOff int, remote *RemoteMR, remoteOff, length int, flags CompletionFlags, opContext uint64) error {
	if f == faultRegions && local == nil && remote == nil && localOff == 0 && remoteOff == 0 && length == 0 {
		c.setWR(r.opcode, flags, opContext, 0, 0, 0)
		c.swr.SGL = nil
		return nil
	}
	return c.opError(r, f, opArgs{local: local, localOff: localOff, remote: remote, remoteOff: remoteOff, length: length, flags: flags})
}

// localWritable: the region was registered with local write access.
const localWritable = UsageReadDst | UsageWriteSrc | UsageWriteDst | UsageRecv

// readable are the usages registered with remote read access.
const readable = UsageReadSrc | UsageFlushVisibility | UsageFlushPersistent

// Read reads length bytes at srcOffset of the remote region src into
// dst at dstOffset (rpma_read). The completion reports with opContext
// as its WRID, as flags say. A full send queue fails at once with
// ErrAgain (matching uverbs.ErrBusy too); nothing was posted then.
func (c *Conn) Read(dst *MR, dstOffset int, src *RemoteMR, srcOffset int, length int, flags CompletionFlags, opContext uint64) error {
	const o = opRead
	if err := c.prepRemote(&ops[o], dst, dstOffset, src, srcOffset, length, flags, opContext); err != nil {
		return err
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// Write writes length bytes at srcOffset of src to the remote region
// dst at dstOffset (rpma_write). The data is placed in order but is
// neither visible nor persistent at the other side until a Flush.
func (c *Conn) Write(dst *RemoteMR, dstOffset int, src *MR, srcOffset int, length int, flags CompletionFlags, opContext uint64) error {
	const o = opWrite
	if err := c.prepRemote(&ops[o], src, srcOffset, dst, dstOffset, length, flags, opContext); err != nil {
		return err
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// WriteWithImm is Write that also delivers imm to the other side, where
// it consumes a receive and completes it with the immediate data
// (rpma_write_with_imm).
func (c *Conn) WriteWithImm(dst *RemoteMR, dstOffset int, src *MR, srcOffset int, length int, flags CompletionFlags, imm uint32, opContext uint64) error {
	const o = opWriteWithImm
	if err := c.prepRemote(&ops[o], src, srcOffset, dst, dstOffset, length, flags, opContext); err != nil {
		return err
	}
	c.swr.Imm = imm
	return c.post(o)
}

// AtomicWrite writes the 8 bytes of src to the remote region dst at
// dstOffset as one atomic store (rpma_atomic_write); dstOffset must be a
// multiple of AtomicWriteAlignment. It is a native ATOMIC_WRITE when
// this side's device has it and the remote peer's applied configuration
// (ApplyRemotePeerCfg) says the other side's device executes it
// (PeerCfg.SetNativeAtomicWrite); otherwise an 8-byte inline RDMA WRITE
// fenced behind earlier reads (so an emulated flush before it finishes
// first), librpma's emulation.
func (c *Conn) AtomicWrite(dst *RemoteMR, dstOffset int, src [8]byte, flags CompletionFlags, opContext uint64) error {
	const o = opAtomicWrite
	if f := c.checkDst(dst, dstOffset, 8, flags); f != faultNone {
		return c.opError(&ops[o], f, opArgs{remote: dst, remoteOff: dstOffset, length: 8, flags: flags})
	}
	if dstOffset%AtomicWriteAlignment != 0 {
		return invalid(o.String(), "offset %d: must be a multiple of %d", dstOffset, AtomicWriteAlignment)
	}
	if dst.Usage&ops[o].remote == 0 {
		return invalid(o.String(), "the remote region's usage %v does not allow it (want WRITE_DST)", dst.Usage)
	}
	raddr := dst.Addr + uint64(dstOffset)
	if c.peer.atomicWrite && c.remoteAtomic.Load() {
		c.setWR(ops[o].opcode, flags, opContext, 0, raddr, dst.RKey)
		c.swr.AtomicWrite = src
		c.noData()
	} else {
		copy(c.flushBuf.Bytes()[8:16], src[:])
		c.sge[0] = uverbs.SGE{Addr: c.flushAddr + 8, Length: 8}
		c.setWR(uverbs.WRRDMAWrite, flags, opContext, 0, raddr, dst.RKey)
		c.swr.Flags |= uverbs.SendInline | uverbs.SendFence
		c.setSGL()
	}
	return c.post(o)
}

// Flush makes what was written to [dstOffset, dstOffset+length) of the
// remote region dst visible or persistent at the other side
// (rpma_flush). FlushPersistent needs the other side's configuration
// (ApplyRemotePeerCfg) to say it writes to PMem directly, and the
// region to have UsageFlushPersistent; FlushVisibility needs
// UsageFlushVisibility: otherwise ErrNotSupported. The method follows
// the ConnCfg's FlushMethod: native RDMA FLUSH, or an 8-byte RDMA READ
// of the region, which completes only after the writes before it.
func (c *Conn) Flush(dst *RemoteMR, dstOffset, length int, typ FlushType, flags CompletionFlags, opContext uint64) error {
	const o = opFlush
	if f := c.checkDst(dst, dstOffset, length, flags); f != faultNone {
		return c.opError(&ops[o], f, opArgs{remote: dst, remoteOff: dstOffset, length: length, flags: flags})
	}
	var need Usage
	var native uverbs.FlushType
	switch typ {
	case FlushPersistent:
		if !c.direct.Load() {
			logf(LogError, "Connection does not support flush to persistency. Check if the remote node supports direct write to persistent memory.")
			return errNoDirectWrite
		}
		need, native = UsageFlushPersistent, uverbs.FlushPersistent
	case FlushVisibility:
		need, native = UsageFlushVisibility, uverbs.FlushGlobal
	default:
		return invalid(o.String(), "flush type %d", int(typ))
	}
	if dst.Usage&need == 0 {
		return newErr(o.String(), ErrNotSupported, errors.New("the remote region was not registered for flushing to "+typ.String()))
	}
	useNative, err := c.nativeFlush()
	if err != nil {
		return err
	}
	raddr := dst.Addr + uint64(dstOffset)
	if useNative {
		c.setWR(ops[o].opcode, flags, opContext, 0, raddr, dst.RKey)
		w := &c.swr
		w.FlushType, w.FlushLevel, w.FlushLength = native, uverbs.FlushRange, uint64(length)
		c.noData()
	} else {
		n := min(8, dst.Len-uint64(dstOffset))
		c.sge[0] = uverbs.SGE{Addr: c.flushAddr, Length: uint32(n), LKey: c.flushLKey}
		c.setWR(uverbs.WRRDMARead, flags, opContext, 0, raddr, dst.RKey)
		c.setSGL()
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

var (
	errNoDirectWrite   = &Error{Op: opFlush.String(), Class: ErrNotSupported, Err: errors.New("the remote peer does not write to PMem directly (apply its configuration with ApplyRemotePeerCfg)")}
	errNoNativeFlushHW = &Error{Op: opFlush.String(), Class: ErrNotSupported, Err: errors.New("FlushNative: the device does not execute FLUSH of both types")}
)

// nativeFlush decides the method of the next flush.
func (c *Conn) nativeFlush() (bool, error) {
	switch c.res.cfg.flushMethod {
	case FlushNative:
		if !c.peer.flush {
			return false, errNoNativeFlushHW
		}
		return true, nil
	case FlushAuto:
		return c.peer.flush && c.remoteNative.Load(), nil
	}
	return false, nil
}

// NativeFlushUsed reports which method the next Flush will use.
func (c *Conn) NativeFlushUsed() bool {
	n, err := c.nativeFlush()
	return n && err == nil
}

// Send sends length bytes at offset of src as a message (rpma_send); the
// other side must have a receive posted. A nil src with offset and
// length 0 sends an empty message.
func (c *Conn) Send(src *MR, offset, length int, flags CompletionFlags, opContext uint64) error {
	const o = opSend
	if err := c.prepSend(&ops[o], src, offset, length, flags, opContext); err != nil {
		return err
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(o, err)
	}
	return nil
}

// SendWithImm is Send with immediate data (rpma_send_with_imm).
func (c *Conn) SendWithImm(src *MR, offset, length int, flags CompletionFlags, imm uint32, opContext uint64) error {
	const o = opSendWithImm
	if err := c.prepSend(&ops[o], src, offset, length, flags, opContext); err != nil {
		return err
	}
	c.swr.Imm = imm
	return c.post(o)
}

// prepSend checks the send r and makes c.swr of it, as prepRemote.
func (c *Conn) prepSend(r *opRow, src *MR, offset, length int, flags CompletionFlags, opContext uint64) error {
	var f fault
	switch {
	case !c.usable():
		f = faultConn
	case !flagsOK(flags):
		f = faultFlags
	case !lenOK(length):
		f = faultLen
	case src == nil:
		f = faultNoSrc
	case !src.inRange(offset, length):
		f = faultLocalRange
	default:
		c.setSGE(src, offset, length)
		c.setWR(r.opcode, flags, opContext, 0, 0, 0)
		c.setSGL()
		return nil
	}
	return c.sendRest(r, f, src, offset, length, flags, opContext)
}

// sendRest is a send whose check f failed: an empty message without a
// region is made (nil error); anything else is the check's error.
func (c *Conn) sendRest(r *opRow, f fault, src *MR, offset, length int, flags CompletionFlags, opContext uint64) error {
	if f == faultNoSrc && offset == 0 && length == 0 {
		c.setWR(r.opcode, flags, opContext, 0, 0, 0)
		c.swr.SGL = nil
		return nil
	}
	return c.opError(r, f, opArgs{local: src, localOff: offset, length: length, flags: flags})
}

// Recv posts a receive of up to length bytes into dst at offset
// (rpma_recv); its completion has opContext as WRID, the length
// received, and, for a message with immediate data, the data. A nil dst
// with offset and length 0 takes a message without data. A full receive
// queue fails at once with ErrAgain.
func (c *Conn) Recv(dst *MR, offset, length int, opContext uint64) error {
	const o = opRecv
	if !c.usable() {
		return c.dead(o.String())
	}
	if dst != nil && dst.usage&ops[o].local == 0 {
		return invalid(o.String(), "the region's usage %v does not allow receiving into it", dst.usage)
	}
	c.rwr = uverbs.RecvWR{WRID: opContext}
	if err := recvSGE(o, dst, offset, length, &c.rsge, &c.rwr); err != nil {
		return err
	}
	if err := c.qp.PostRecv(&c.rwr); err != nil {
		return postFailed(opRecv, err)
	}
	return nil
}
