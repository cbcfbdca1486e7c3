package sys

import (
	"encoding/binary"
	"fmt"
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
// unless marked Optional. Buffers passed in stay pinned until Exec
// returns. A Method is used once.
type Method struct {
	op  string
	buf *ioctlBuf
	n   int
	err error
	pin pinner
}

// NewMethod starts a call of method on object. op names it in errors.
func NewMethod(op string, object, method uint16) *Method {
	m := &Method{op: op, buf: new(ioctlBuf)}
	m.buf.hdr.ObjectID = object
	m.buf.hdr.MethodID = method
	return m
}

// Attr is the index of an attribute in a Method, for reading results.
type Attr int

func (m *Method) next(id uint16) (*abi.Attr, Attr) {
	if m.n == maxAttrs {
		m.err = fmt.Errorf("%s: more than %d attributes", m.op, maxAttrs)
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
		m.err = fmt.Errorf("%s: attribute %d is %d bytes, more than 65535", m.op, a.AttrID, n)
		return false
	}
	a.Len = uint16(n)
	return true
}

// In adds a PTR_IN attribute: up to 8 bytes go inline, longer ones by
// pointer.
func (m *Method) In(id uint16, b []byte) Attr {
	a, i := m.next(id)
	if !m.setLen(a, len(b)) {
		return i
	}
	if len(b) <= 8 {
		var inline [8]byte
		copy(inline[:], b)
		*a.Data.Data() = binary.NativeEndian.Uint64(inline[:])
	} else {
		*a.Data.Data() = uint64(m.pin.bytes(b))
	}
	return i
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
	return m.In(id, b[:size])
}

// Out adds a PTR_OUT attribute the kernel fills.
func (m *Method) Out(id uint16, b []byte) Attr {
	a, i := m.next(id)
	if m.setLen(a, len(b)) {
		*a.Data.Data() = uint64(m.pin.bytes(b))
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
	defer m.pin.Unpin()
	if m.err != nil {
		return m.err
	}
	m.buf.hdr.NumAttrs = uint16(m.n)
	m.buf.hdr.Length = uint16(abi.OffsetofIoctlHdrAttrs + m.n*int(unsafe.Sizeof(abi.Attr{})))
	m.buf.hdr.DriverID = driverID
	m.pin.Pin(m.buf)
	return f.Do(func(raw int) error {
		return errnoErr(m.op, ioctl(raw, abi.RDMA_VERBS_IOCTL, unsafe.Pointer(m.buf)))
	})
}
