package rpma

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/purerdma/rdma/uverbs"
)

// Usage says what a memory region is for (RPMA_MR_USAGE_*); it decides
// the access rights it is registered with, and travels in its
// descriptor so the other side knows what it may do.
type Usage uint8

// The usages of librpma, with its bit values.
const (
	UsageReadSrc         Usage = 1 << 0 // the remote side reads from it
	UsageReadDst         Usage = 1 << 1 // local reads land in it
	UsageWriteSrc        Usage = 1 << 2 // local writes come from it
	UsageWriteDst        Usage = 1 << 3 // the remote side writes to it
	UsageFlushVisibility Usage = 1 << 4 // the remote side may flush it to global visibility
	UsageFlushPersistent Usage = 1 << 5 // the remote side may flush it to persistence
	UsageSend            Usage = 1 << 6 // messages are sent from it
	UsageRecv            Usage = 1 << 7 // messages are received into it
)

var usageNames = [...]string{"READ_SRC", "READ_DST", "WRITE_SRC", "WRITE_DST", "FLUSH_TYPE_VISIBILITY",
	"FLUSH_TYPE_PERSISTENT", "SEND", "RECV"}

func (u Usage) String() string {
	if u == 0 {
		return "0"
	}
	var parts []string
	for i, n := range usageNames {
		if u&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// MR is a local memory region registered for rpma operations (struct
// rpma_mr_local). Its methods are safe for concurrent use; Close must
// not race operations that use it.
type MR struct {
	peer  *Peer
	mr    *uverbs.MR
	buf   []byte
	usage Usage
}

// RegMR registers buf for usage (rpma_mr_reg). buf must not be empty
// and must stay in place (see uverbs.MR: Go heap memory, a
// uverbs.Buffer, a mapped PMem file). If the device refuses the
// registration as not supported and has on-demand paging, it is
// retried with ODP, as librpma does.
func (p *Peer) RegMR(buf []byte, usage Usage) (*MR, error) {
	const op = "mr reg"
	if err := p.alive(op); err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return nil, invalid(op, "empty buffer")
	}
	if usage == 0 {
		return nil, invalid(op, "usage 0: say what the region is for")
	}
	mr, err := p.register(op, buf, usage)
	if err != nil {
		return nil, err
	}
	return &MR{peer: p, mr: mr, buf: buf[:len(buf):len(buf)], usage: usage}, nil
}

// Close deregisters the region (rpma_mr_dereg). Operations posted with
// it must have completed.
func (m *MR) Close() error {
	if m == nil {
		return invalid("mr dereg", "nil MR")
	}
	if err := m.mr.Close(); err != nil {
		return provider("mr dereg", err)
	}
	return nil
}

// Bytes is the registered memory (rpma_mr_get_ptr).
func (m *MR) Bytes() []byte { return m.buf }

// Size is the registered length (rpma_mr_get_size).
func (m *MR) Size() int { return len(m.buf) }

// Usage is what the region was registered for.
func (m *MR) Usage() Usage { return m.usage }

// NativeFlush reports whether the other side may flush this region with
// native RDMA FLUSH for every flush usage it has: the device executes
// FLUSH and granted the region the FLUSH rights. The device grants
// FLUSH to persistence only on persistent memory, so a region of
// ordinary memory with UsageFlushPersistent says false. A server tells
// clients with PeerCfg.SetNativeFlush(mr.NativeFlush()) for the region
// it sends; false for a region without a flush usage.
func (m *MR) NativeFlush() bool {
	if m == nil || !m.peer.flush || m.usage&(UsageFlushVisibility|UsageFlushPersistent) == 0 {
		return false
	}
	a := m.mr.Access()
	if m.usage&UsageFlushVisibility != 0 && a&uverbs.AccessFlushGlobal == 0 {
		return false
	}
	return m.usage&UsageFlushPersistent == 0 || a&uverbs.AccessFlushPersistent != 0
}

// Verbs is the uverbs region underneath, for verbs a program mixes in.
func (m *MR) Verbs() *uverbs.MR { return m.mr }

// Advise gives the device advice about [offset, offset+length) of the
// region (rpma_mr_advise, ibv_advise_mr): useful for on-demand paging
// regions only. A device without ODP fails with ErrNotSupported.
func (m *MR) Advise(offset, length int, advice uverbs.MRAdvice, flags uverbs.AdviseFlags) error {
	const op = "mr advise"
	if m == nil {
		return invalid(op, "nil MR")
	}
	if err := m.checkRange(op, offset, length); err != nil {
		return err
	}
	if length == 0 || length > 1<<32-1 {
		return invalid(op, "length %d: must be 1 to 2^32-1", length)
	}
	sge := []uverbs.SGE{{Addr: m.mr.Addr() + uint64(offset), Length: uint32(length), LKey: m.mr.LKey()}}
	if err := m.peer.pd.AdviseMR(advice, flags, sge); err != nil {
		return provider(op, err)
	}
	return nil
}

// inRange reports whether [offset, offset+length) lies in the region:
// offset and length not negative (the unsigned comparisons fold those
// cases in), offset+length at most its size.
func (m *MR) inRange(offset, length int) bool {
	return uint(offset) <= uint(len(m.buf)) && uint(length) <= uint(len(m.buf)-offset)
}

func (m *MR) checkRange(op string, offset, length int) error {
	if m.inRange(offset, length) {
		return nil
	}
	return m.rangeErr(op, offset, length)
}

// rangeErr is the error of a range outside the region. No formatting
// here: the message is made when it is read.
func (m *MR) rangeErr(op string, offset, length int) error {
	return &Error{Op: op, Class: ErrInvalid, Err: &rangeError{off: int64(offset), len: int64(length), size: uint64(len(m.buf))}}
}

// rangeError is a range outside a region; the message is made only when
// asked for.
type rangeError struct {
	remote   bool
	off, len int64 // local ranges: may be negative
	roff     uint64
	rlen     uint64
	size     uint64
}

func (e *rangeError) Error() string {
	if e.remote {
		return fmt.Sprintf("remote range [%d, %d+%d) outside the %d-byte region", e.roff, e.roff, e.rlen, e.size)
	}
	return fmt.Sprintf("range [%d, %d+%d) outside the %d-byte region", e.off, e.off, e.len, e.size)
}

// MRDescriptorSize is the length of a memory region's descriptor
// (rpma_mr_get_descriptor_size): address, length, rkey, usage.
const MRDescriptorSize = 21

// Descriptor encodes the region for the other side
// (rpma_mr_get_descriptor): the address and length as little-endian
// 64-bit numbers, the rkey as a little-endian 32-bit number, and the
// usage byte, 21 bytes as C librpma writes them.
func (m *MR) Descriptor() []byte {
	return m.AppendDescriptor(make([]byte, 0, MRDescriptorSize))
}

// AppendDescriptor appends the descriptor to b.
func (m *MR) AppendDescriptor(b []byte) []byte {
	return appendMRDescriptor(b, m.mr.Addr(), uint64(len(m.buf)), m.mr.RKey(), m.usage)
}

func appendMRDescriptor(b []byte, addr, size uint64, rkey uint32, u Usage) []byte {
	b = binary.LittleEndian.AppendUint64(b, addr)
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint32(b, rkey)
	return append(b, byte(u))
}

// RemoteMR is a memory region of the other side, from its descriptor
// (struct rpma_mr_remote). It is a plain value: there is nothing to
// close (rpma_mr_remote_delete has no counterpart).
type RemoteMR struct {
	Addr  uint64 // the region's address at the other side
	Len   uint64 // its length
	RKey  uint32
	Usage Usage
}

// RemoteMRFromDescriptor decodes a descriptor from the other side
// (rpma_mr_remote_from_descriptor). It needs at least MRDescriptorSize
// bytes (more are ignored, as in C), a usage other than 0 and a region
// that does not wrap around the address space.
func RemoteMRFromDescriptor(desc []byte) (*RemoteMR, error) {
	const op = "mr remote from descriptor"
	if len(desc) < MRDescriptorSize {
		return nil, invalid(op, "%d-byte descriptor, want at least %d", len(desc), MRDescriptorSize)
	}
	r := &RemoteMR{
		Addr:  binary.LittleEndian.Uint64(desc[0:]),
		Len:   binary.LittleEndian.Uint64(desc[8:]),
		RKey:  binary.LittleEndian.Uint32(desc[16:]),
		Usage: Usage(desc[20]),
	}
	if r.Usage == 0 {
		return nil, invalid(op, "usage type of memory is not set")
	}
	if r.Addr+r.Len < r.Addr {
		return nil, invalid(op, "region at %#x of %d bytes wraps around", r.Addr, r.Len)
	}
	logf(LogDebug, "new RemoteMR {addr=%#x, size=%d, rkey=%#x, usage=%v}", r.Addr, r.Len, r.RKey, r.Usage)
	return r, nil
}

// Descriptor encodes the remote region again, byte for byte as it
// arrived (the first MRDescriptorSize bytes).
func (r *RemoteMR) Descriptor() []byte {
	return appendMRDescriptor(make([]byte, 0, MRDescriptorSize), r.Addr, r.Len, r.RKey, r.Usage)
}

// Size is the remote region's length (rpma_mr_remote_get_size).
func (r *RemoteMR) Size() uint64 { return r.Len }

// FlushType is the flush usages of the remote region
// (rpma_mr_remote_get_flush_type): UsageFlushVisibility and
// UsageFlushPersistent, or 0.
func (r *RemoteMR) FlushType() Usage {
	return r.Usage & (UsageFlushVisibility | UsageFlushPersistent)
}

func (r *RemoteMR) String() string {
	return fmt.Sprintf("remote MR %#x+%d rkey %#x %v", r.Addr, r.Len, r.RKey, r.Usage)
}

// inRange reports whether [offset, offset+length) lies in the region.
func (r *RemoteMR) inRange(offset, length uint64) bool {
	return offset <= r.Len && length <= r.Len-offset
}

func (r *RemoteMR) checkRange(op string, offset uint64, length uint64) error {
	if r.inRange(offset, length) {
		return nil
	}
	return r.rangeErr(op, offset, length)
}

// rangeErr is the error of a range outside the region.
func (r *RemoteMR) rangeErr(op string, offset, length uint64) error {
	return &Error{Op: op, Class: ErrInvalid, Err: &rangeError{remote: true, roff: offset, rlen: length, size: r.Len}}
}
