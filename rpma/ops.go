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

// Operation names, as errors carry them.
const (
	opRead         = "read"
	opWrite        = "write"
	opWriteWithImm = "write with imm"
	opAtomicWrite  = "atomic write"
	opFlush        = "flush"
	opSend         = "send"
	opSendWithImm  = "send with imm"
	opRecv         = "recv"
)

// busy are the preallocated ErrAgain errors of a full queue, so a
// caller retrying in a loop allocates nothing.
var busy = func() map[string]error {
	m := map[string]error{}
	for _, op := range []string{opRead, opWrite, opWriteWithImm, opAtomicWrite, opFlush, opSend, opSendWithImm} {
		m[op] = &Error{Op: op, Class: ErrAgain, Err: fmt.Errorf("send queue full: %w", uverbs.ErrBusy)}
	}
	m[opRecv] = &Error{Op: opRecv, Class: ErrAgain, Err: fmt.Errorf("receive queue full: %w", uverbs.ErrBusy)}
	return m
}()

func checkFlags(op string, f CompletionFlags) error {
	if f == 0 || f&^CompletionAlways != 0 {
		return invalid(op, "completion flags %#x: CompletionOnError or CompletionAlways", int(f))
	}
	return nil
}

func sendFlags(f CompletionFlags) uverbs.SendFlags {
	if f&completionOnSuccess != 0 {
		return uverbs.SendSignaled
	}
	return 0
}

func checkLen(op string, length int) error {
	if length < 0 || length > math.MaxUint32 {
		return invalid(op, "length %d: 0 to 2^32-1", length)
	}
	return nil
}

// localWritable: the region was registered with local write access.
const localWritable = UsageReadDst | UsageWriteSrc | UsageWriteDst | UsageRecv

// postSend posts c.swr, prepared by the caller. Read, Write and Flush
// write it out (a call less per operation).
func (c *Conn) postSend(op string) error {
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(op, err)
	}
	return nil
}

// postFailed is the error of a post that uverbs refused.
func postFailed(op string, err error) error {
	if errors.Is(err, uverbs.ErrBusy) {
		return busy[op]
	}
	return provider(op, err)
}

// The work request c.swr is reused, not cleared: each operation sets
// every field its opcode reads (uverbs ignores the others: SendWR), so
// what an earlier operation left in the others does no harm.

// remoteOp describes a read or a write for prepRemote.
type remoteOp struct {
	name                  string
	opcode                uverbs.WROpcode
	needLocal, needRemote Usage
}

var (
	readOp         = &remoteOp{opRead, uverbs.WRRDMARead, localWritable, readable}
	writeOp        = &remoteOp{opWrite, uverbs.WRRDMAWrite, 0, UsageWriteDst}
	writeWithImmOp = &remoteOp{opWriteWithImm, uverbs.WRRDMAWriteWithImm, 0, UsageWriteDst}
)

// prepRemote checks a read or write and fills c.swr with it; the
// caller adds what is left and posts. Both regions nil with zero
// offsets and length is a zero-byte operation, as librpma allows.
//
// Every check of prepRemoteSlow is made here first as one condition
// (unsigned comparisons fold the negative cases in); only when one fails,
// or for the zero-byte case, prepRemoteSlow runs them again one by one
// for the error. The operation's checks cost a few instructions each
// that way, with no call.
func (c *Conn) prepRemote(o *remoteOp, local *MR, localOff int, remote *RemoteMR, remoteOff int, length int,
	flags CompletionFlags, opContext uint64) error {
	if c == nil || c.closed.Load() || uint(flags-1) > uint(CompletionAlways-1) || uint64(length) > math.MaxUint32 ||
		local == nil || remote == nil ||
		uint(localOff) > uint(len(local.buf)) || uint(length) > uint(len(local.buf)-localOff) ||
		uint64(remoteOff) > remote.Len || uint64(length) > remote.Len-uint64(remoteOff) ||
		(o.needLocal != 0 && local.usage&o.needLocal == 0) || remote.Usage&o.needRemote == 0 {
		return c.prepRemoteSlow(o, local, localOff, remote, remoteOff, length, flags, opContext)
	}
	c.sge[0] = uverbs.SGE{Addr: local.mr.Addr() + uint64(localOff), Length: uint32(length), LKey: local.mr.LKey()}
	w := &c.swr
	w.WRID, w.Opcode, w.Flags = opContext, o.opcode, sendFlags(flags)
	w.RemoteAddr, w.RKey = remote.Addr+uint64(remoteOff), remote.RKey
	c.setSGL()
	return nil
}

// setSGL points c.swr at c.sge. The list is set only when it is not
// already (it is nil only after an operation without data), so the
// pointer store and its write barrier stay off the operations' path.
func (c *Conn) setSGL() {
	if c.swr.SGL == nil {
		c.swr.SGL = c.sge[:]
	}
}

// prepRemoteSlow is prepRemote's checks one by one, each with its error.
func (c *Conn) prepRemoteSlow(o *remoteOp, local *MR, localOff int, remote *RemoteMR, remoteOff int, length int,
	flags CompletionFlags, opContext uint64) error {
	op := o.name
	if err := c.alive(op); err != nil {
		return err
	}
	if err := checkFlags(op, flags); err != nil {
		return err
	}
	if err := checkLen(op, length); err != nil {
		return err
	}
	w := &c.swr
	if local == nil || remote == nil {
		if local != nil || remote != nil || localOff != 0 || remoteOff != 0 || length != 0 {
			return invalid(op, "a local and a remote region, or neither with offsets and length 0")
		}
		w.WRID, w.Opcode, w.Flags, w.SGL, w.RemoteAddr, w.RKey = opContext, o.opcode, sendFlags(flags), nil, 0, 0
		return nil
	}
	if err := local.checkRange(op, localOff, length); err != nil {
		return err
	}
	if remoteOff < 0 {
		return invalid(op, "remote offset %d", remoteOff)
	}
	if err := remote.checkRange(op, uint64(remoteOff), uint64(length)); err != nil {
		return err
	}
	if o.needLocal != 0 && local.usage&o.needLocal == 0 {
		return invalid(op, "the local region's usage %v does not allow it (want one of %v)", local.usage, o.needLocal)
	}
	if remote.Usage&o.needRemote == 0 {
		return invalid(op, "the remote region's usage %v does not allow it (want one of %v)", remote.Usage, o.needRemote)
	}
	c.sge[0] = uverbs.SGE{Addr: local.mr.Addr() + uint64(localOff), Length: uint32(length), LKey: local.mr.LKey()}
	w.WRID, w.Opcode, w.Flags = opContext, o.opcode, sendFlags(flags)
	w.RemoteAddr, w.RKey = remote.Addr+uint64(remoteOff), remote.RKey
	c.setSGL()
	return nil
}

// readable are the usages registered with remote read access.
const readable = UsageReadSrc | UsageFlushVisibility | UsageFlushPersistent

// Read reads length bytes at srcOffset of the remote region src into
// dst at dstOffset (rpma_read). The completion reports with opContext
// as its WRID, as flags say. A full send queue fails at once with
// ErrAgain (matching uverbs.ErrBusy too); nothing was posted then.
func (c *Conn) Read(dst *MR, dstOffset int, src *RemoteMR, srcOffset int, length int, flags CompletionFlags, opContext uint64) error {
	if err := c.prepRemote(readOp, dst, dstOffset, src, srcOffset, length, flags, opContext); err != nil {
		return err
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(opRead, err)
	}
	return nil
}

// Write writes length bytes at srcOffset of src to the remote region
// dst at dstOffset (rpma_write). The data is placed in order but is
// neither visible nor persistent at the other side until a Flush.
func (c *Conn) Write(dst *RemoteMR, dstOffset int, src *MR, srcOffset int, length int, flags CompletionFlags, opContext uint64) error {
	if err := c.prepRemote(writeOp, src, srcOffset, dst, dstOffset, length, flags, opContext); err != nil {
		return err
	}
	if err := c.qp.PostSend(&c.swr); err != nil {
		return postFailed(opWrite, err)
	}
	return nil
}

// WriteWithImm is Write that also delivers imm to the other side, where
// it consumes a receive and completes it with the immediate data
// (rpma_write_with_imm).
func (c *Conn) WriteWithImm(dst *RemoteMR, dstOffset int, src *MR, srcOffset int, length int, flags CompletionFlags, imm uint32, opContext uint64) error {
	if err := c.prepRemote(writeWithImmOp, src, srcOffset, dst, dstOffset, length, flags, opContext); err != nil {
		return err
	}
	c.swr.Imm = imm
	return c.postSend(opWriteWithImm)
}

// prepDst checks what AtomicWrite and Flush share, the connection, the
// flags and [off, off+length) of dst, and starts c.swr at that range:
// the caller sets the opcode and what it reads.
func (c *Conn) prepDst(op string, dst *RemoteMR, off, length int, flags CompletionFlags, opContext uint64) error {
	// As in prepRemote: every check as one condition first.
	if c == nil || c.closed.Load() || dst == nil || uint(flags-1) > uint(CompletionAlways-1) ||
		uint64(off) > dst.Len || uint64(length) > dst.Len-uint64(off) {
		return c.dstError(op, dst, off, length, flags)
	}
	w := &c.swr
	w.WRID, w.Flags, w.RemoteAddr, w.RKey = opContext, sendFlags(flags), dst.Addr+uint64(off), dst.RKey
	return nil
}

// dstError is prepDst's checks one by one, each with its error.
func (c *Conn) dstError(op string, dst *RemoteMR, off, length int, flags CompletionFlags) error {
	if err := c.alive(op); err != nil {
		return err
	}
	if dst == nil {
		return invalid(op, "nil remote region")
	}
	if err := checkFlags(op, flags); err != nil {
		return err
	}
	if off < 0 || length < 0 {
		return invalid(op, "offset %d, length %d", off, length)
	}
	if err := dst.checkRange(op, uint64(off), uint64(length)); err != nil {
		return err
	}
	return invalid(op, "prepDst: no check failed") // unreachable: prepDst found one
}

// AtomicWrite writes the 8 bytes of src to the remote region dst at
// dstOffset as one atomic store (rpma_atomic_write); dstOffset must be a
// multiple of AtomicWriteAlignment. On a device with native ATOMIC_WRITE
// it is one; otherwise an 8-byte inline RDMA WRITE fenced behind earlier
// reads (so an emulated flush before it finishes first), as librpma
// does.
func (c *Conn) AtomicWrite(dst *RemoteMR, dstOffset int, src [8]byte, flags CompletionFlags, opContext uint64) error {
	const op = opAtomicWrite
	if err := c.prepDst(op, dst, dstOffset, 8, flags, opContext); err != nil {
		return err
	}
	if dstOffset%AtomicWriteAlignment != 0 {
		return invalid(op, "offset %d: must be a multiple of %d", dstOffset, AtomicWriteAlignment)
	}
	if dst.Usage&UsageWriteDst == 0 {
		return invalid(op, "the remote region's usage %v does not allow it (want WRITE_DST)", dst.Usage)
	}
	w := &c.swr
	if c.peer.atomicWrite {
		w.Opcode, w.AtomicWrite = uverbs.WRAtomicWrite, src
	} else {
		copy(c.flushBuf.Bytes()[8:16], src[:])
		c.sge[0] = uverbs.SGE{Addr: c.flushMR.Addr() + 8, Length: 8}
		w.Opcode = uverbs.WRRDMAWrite
		c.setSGL()
		w.Flags |= uverbs.SendInline | uverbs.SendFence
	}
	return c.postSend(op)
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
	const op = opFlush
	if err := c.prepDst(op, dst, dstOffset, length, flags, opContext); err != nil {
		return err
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
		return invalid(op, "flush type %d", int(typ))
	}
	if dst.Usage&need == 0 {
		return newErr(op, ErrNotSupported, errors.New("the remote region was not registered for flushing to "+typ.String()))
	}
	w := &c.swr
	useNative, err := c.nativeFlush()
	if err != nil {
		return err
	}
	if useNative {
		w.Opcode, w.FlushType, w.FlushLevel, w.FlushLength = uverbs.WRFlush, native, uverbs.FlushRange, uint64(length)
	} else {
		n := min(8, dst.Len-uint64(dstOffset))
		c.sge[0] = uverbs.SGE{Addr: c.flushAddr, Length: uint32(n), LKey: c.flushLKey}
		w.Opcode = uverbs.WRRDMARead
		c.setSGL()
	}
	if err := c.qp.PostSend(w); err != nil {
		return postFailed(op, err)
	}
	return nil
}

var (
	errNoDirectWrite   = &Error{Op: opFlush, Class: ErrNotSupported, Err: errors.New("the remote peer does not write to PMem directly (apply its configuration with ApplyRemotePeerCfg)")}
	errNoNativeFlushHW = &Error{Op: opFlush, Class: ErrNotSupported, Err: errors.New("FlushNative: the device does not execute FLUSH of both types")}
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
	if err := c.prepSend(opSend, src, offset, length, flags, uverbs.WRSend, opContext); err != nil {
		return err
	}
	return c.postSend(opSend)
}

// SendWithImm is Send with immediate data (rpma_send_with_imm).
func (c *Conn) SendWithImm(src *MR, offset, length int, flags CompletionFlags, imm uint32, opContext uint64) error {
	if err := c.prepSend(opSendWithImm, src, offset, length, flags, uverbs.WRSendWithImm, opContext); err != nil {
		return err
	}
	c.swr.Imm = imm
	return c.postSend(opSendWithImm)
}

func (c *Conn) prepSend(op string, src *MR, offset, length int, flags CompletionFlags, opcode uverbs.WROpcode, opContext uint64) error {
	if err := c.alive(op); err != nil {
		return err
	}
	if err := checkFlags(op, flags); err != nil {
		return err
	}
	if err := checkLen(op, length); err != nil {
		return err
	}
	w := &c.swr
	if src == nil {
		if offset != 0 || length != 0 {
			return invalid(op, "no region, but offset %d and length %d", offset, length)
		}
		w.WRID, w.Opcode, w.Flags, w.SGL = opContext, opcode, sendFlags(flags), nil
		return nil
	}
	if err := src.checkRange(op, offset, length); err != nil {
		return err
	}
	c.sge[0] = uverbs.SGE{Addr: src.mr.Addr() + uint64(offset), Length: uint32(length), LKey: src.mr.LKey()}
	w.WRID, w.Opcode, w.Flags = opContext, opcode, sendFlags(flags)
	c.setSGL()
	return nil
}

// Recv posts a receive of up to length bytes into dst at offset
// (rpma_recv); its completion has opContext as WRID, the length
// received, and, for a message with immediate data, the data. A nil dst
// with offset and length 0 takes a message without data. A full receive
// queue fails at once with ErrAgain.
func (c *Conn) Recv(dst *MR, offset, length int, opContext uint64) error {
	const op = opRecv
	if err := c.alive(op); err != nil {
		return err
	}
	if dst != nil && dst.usage&localWritable == 0 {
		return invalid(op, "the region's usage %v does not allow receiving into it", dst.usage)
	}
	c.rwr = uverbs.RecvWR{WRID: opContext}
	if err := recvSGE(op, dst, offset, length, &c.rsge, &c.rwr); err != nil {
		return err
	}
	if err := c.qp.PostRecv(&c.rwr); err != nil {
		if errors.Is(err, uverbs.ErrBusy) {
			return busy[op]
		}
		return provider(op, err)
	}
	return nil
}
