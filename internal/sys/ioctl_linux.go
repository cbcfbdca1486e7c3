package sys

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
)

// maxAttrs bounds one method call; the kernel's largest core methods
// (QP create) take about 15.
const maxAttrs = 32

// ioctlBuf is the RDMA_VERBS_IOCTL argument: the header and its attribute
// array, contiguous as the kernel reads them.
type ioctlBuf struct {
	hdr   abi.IoctlHdr
	attrs [maxAttrs]abi.Attr
}

// Method builds one uverbs ioctl method call. Attributes are mandatory
// unless marked Optional. A Method is used once.
//
// The call is built in the Method and copied at Exec into a Scratch
// block outside the Go heap: the header, the attributes, and every
// buffer longer than 8 bytes, so the kernel's addresses need no pinning
// and the Method allocates nothing of its own (the buffers the caller
// passes still move to the heap: escape analysis sees the Method keep
// them). Exec copies Out buffers back. Buffers that do not fit the block
// go to a pinned heap copy.
type Method struct {
	op   string
	buf  ioctlBuf
	data [maxAttrs][]byte // the caller's buffer of each attribute, or nil
	out  [maxAttrs]bool   // data[i] is written by the kernel
	n    int
	err  error
}

// NewMethod starts a call of method on object. op names it in errors.
func NewMethod(op string, object, method uint16) *Method {
	m := &Method{op: op}
	m.buf.hdr.ObjectID = object
	m.buf.hdr.MethodID = method
	return m
}

// Op is the name NewMethod was given, for errors about the call made
// before it reaches the kernel.
func (m *Method) Op() string { return m.op }

// Attr is the index of an attribute in a Method, for reading results.
type Attr int

func (m *Method) next(id uint16) (*abi.Attr, Attr) {
	if m.n == maxAttrs {
		m.err = fmt.Errorf("more than %d attributes", maxAttrs)
		return new(abi.Attr), -1
	}
	a := &m.buf.attrs[m.n]
	a.AttrID = id
	a.Flags = abi.UVERBS_ATTR_F_MANDATORY
	m.n++
	return a, Attr(m.n - 1)
}

// Optional clears the mandatory flag of the last attribute: a kernel that
// does not know it ignores it instead of failing.
func (m *Method) Optional() *Method {
	if m.n > 0 {
		m.buf.attrs[m.n-1].Flags &^= abi.UVERBS_ATTR_F_MANDATORY
	}
	return m
}

func (m *Method) setLen(a *abi.Attr, n int) bool {
	if n > 0xffff {
		m.err = fmt.Errorf("attribute %d is %d bytes, more than 65535", a.AttrID, n)
		return false
	}
	a.Len = uint16(n)
	return true
}

// In adds a PTR_IN attribute: up to 8 bytes go inline, longer ones by
// pointer.
func (m *Method) In(id uint16, b []byte) Attr {
	a, i := m.next(id)
	if i < 0 || !m.setLen(a, len(b)) { // one attribute too many: m.err says so
		return i
	}
	if len(b) <= 8 {
		setInline(a, b)
	} else {
		m.data[i] = b
	}
	return i
}

// setInline puts up to 8 bytes into the attribute itself.
func setInline(a *abi.Attr, b []byte) {
	var inline [8]byte
	copy(inline[:], b)
	*a.Data.Data() = binary.NativeEndian.Uint64(inline[:])
}

// InUint64 adds an integer PTR_IN / CONST_IN attribute of size bytes.
func (m *Method) InUint(id uint16, v uint64, size int) Attr {
	var b [8]byte
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.NativeEndian.PutUint16(b[:], uint16(v))
	case 4:
		binary.NativeEndian.PutUint32(b[:], uint32(v))
	default:
		binary.NativeEndian.PutUint64(b[:], v)
		size = 8
	}
	a, i := m.next(id)
	a.Len = uint16(size)
	setInline(a, b[:size])
	return i
}

// Out adds a PTR_OUT attribute the kernel fills.
func (m *Method) Out(id uint16, b []byte) Attr {
	a, i := m.next(id)
	if i >= 0 && m.setLen(a, len(b)) && len(b) > 0 {
		m.data[i], m.out[i] = b, true
	}
	return i
}

// Handle adds an IDR attribute naming an existing object.
func (m *Method) Handle(id uint16, handle uint32) Attr {
	a, i := m.next(id)
	*a.Data.Data() = uint64(handle)
	return i
}

// NewHandle adds an IDR attribute for the object the method creates; read
// it with Result after Exec.
func (m *Method) NewHandle(id uint16) Attr { return m.Handle(id, 0) }

// FD adds an FD attribute naming an existing file descriptor.
func (m *Method) FD(id uint16, fd int) Attr {
	a, i := m.next(id)
	*a.Data.DataS64() = int64(fd)
	return i
}

// Enum adds an ENUM_IN attribute: elem selects the variant, b its data.
func (m *Method) Enum(id uint16, elem uint8, b []byte) Attr {
	i := m.In(id, b)
	if i >= 0 {
		m.buf.attrs[i].AttrData.EnumData().ElemID = elem
	}
	return i
}

// Result reads an attribute's data after Exec: a new handle or fd.
func (m *Method) Result(i Attr) uint64 {
	if i < 0 {
		return 0
	}
	return *m.buf.attrs[i].Data.Data()
}

// OutLen is how many bytes the kernel wrote to an Out attribute, or -1 if
// it did not mark the output valid (an older kernel that lacks it).
func (m *Method) OutLen(i Attr) int {
	if i < 0 || m.buf.attrs[i].Flags&abi.UVERBS_ATTR_F_VALID_OUTPUT == 0 {
		return -1
	}
	return int(m.buf.attrs[i].Len)
}

// Exec issues the call on f with the device's driver id.
func (m *Method) Exec(f *FD, driverID uint32) error {
	if m.err != nil {
		return m.fail(m.err)
	}
	s, err := GetScratch()
	if err != nil {
		return m.fail(err)
	}
	defer s.Release()
	var pin pinner
	defer pin.Unpin()
	var at [maxAttrs][]byte // the kernel's copy of each buffer
	buf := m.encode(s.Bytes(), driverID, &pin, &at)
	err = f.Do(func(raw int) error {
		if fk := f.faked(); fk != nil {
			return fakeIoctl(fk, raw, abi.RDMA_VERBS_IOCTL, unsafe.Pointer(buf))
		}
		return ioctl(raw, abi.RDMA_VERBS_IOCTL, unsafe.Pointer(buf))
	})
	m.decode(buf, &at)
	return m.fail(err)
}

// encode lays the call out in mem, a Scratch block: the header and the
// attributes at its start, then every buffer, 8-byte aligned; one that
// does not fit goes to a copy pinned by pin (a large GID table). at gets
// the kernel's copy of each buffer. Out buffers are copied in as well:
// bytes the kernel does not write must read back as the caller's own,
// not as what an earlier call left in the block.
func (m *Method) encode(mem []byte, driverID uint32, pin *pinner, at *[maxAttrs][]byte) *ioctlBuf {
	m.buf.hdr.NumAttrs = uint16(m.n)
	m.buf.hdr.Length = uint16(abi.OffsetofIoctlHdrAttrs + m.n*int(unsafe.Sizeof(abi.Attr{})))
	m.buf.hdr.DriverID = driverID
	off := (int(m.buf.hdr.Length) + 7) &^ 7
	for i := range m.n {
		b := m.data[i]
		if b == nil {
			continue
		}
		if off+len(b) <= len(mem) {
			at[i] = mem[off : off+len(b)]
			*m.buf.attrs[i].Data.Data() = uint64(PointerTo(at[i]))
			off = (off + len(b) + 7) &^ 7
		} else {
			at[i] = make([]byte, len(b))
			*m.buf.attrs[i].Data.Data() = uint64(pin.bytes(at[i]))
		}
		copy(at[i], b)
	}
	copy(mem[:m.buf.hdr.Length], unsafe.Slice((*byte)(unsafe.Pointer(&m.buf)), m.buf.hdr.Length))
	return (*ioctlBuf)(unsafe.Pointer(&mem[0]))
}

// decode takes back what the kernel wrote into buf, the block encode
// laid out: new handles, output lengths and flags from the attributes,
// and Out data from at.
func (m *Method) decode(buf *ioctlBuf, at *[maxAttrs][]byte) {
	for i := range m.n {
		k := &buf.attrs[i]
		if m.out[i] {
			copy(m.data[i], at[i])
		}
		m.buf.attrs[i].Flags, m.buf.attrs[i].Len = k.Flags, k.Len
		if m.data[i] == nil {
			m.buf.attrs[i].Data = k.Data
		}
	}
}

// fail names the call in err. The name is copied: were m.op itself to
// reach the heap, escape analysis would move every buffer the Method
// holds (the caller's requests and responses) to the heap with it.
func (m *Method) fail(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: strings.Clone(m.op), Err: err}
}
