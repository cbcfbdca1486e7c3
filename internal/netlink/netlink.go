// Package netlink is the project's one netlink codec: the message header,
// attributes (with nesting and 4-byte alignment), the kernel's error and
// done messages (with extended ACKs), and the request/ACK/dump exchange
// over a socket (conn_linux.go). RDMA netlink (internal/rdmanl) and the
// test VM's rtnetlink set-up (testenv/vm) are written on top of it.
//
// This file makes no system calls and builds everywhere, so every encoder
// and decoder here is testable on any host and fuzzable.
package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Constants from <linux/netlink.h>, spelled out so that this file builds
// everywhere; only syscall.Errno is borrowed.
const (
	HeaderLen     = 16 // sizeof(struct nlmsghdr)
	AttrHeaderLen = 4  // sizeof(struct nlattr)
	errorLen      = 4  // sizeof(int) before the echoed header in struct nlmsgerr

	TypeNoop    = 0x1 // NLMSG_NOOP
	TypeError   = 0x2 // NLMSG_ERROR
	TypeDone    = 0x3 // NLMSG_DONE
	TypeOverrun = 0x4 // NLMSG_OVERRUN

	FlagRequest  = 0x01  // NLM_F_REQUEST
	FlagMulti    = 0x02  // NLM_F_MULTI
	FlagAck      = 0x04  // NLM_F_ACK
	FlagDumpIntr = 0x10  // NLM_F_DUMP_INTR
	FlagDump     = 0x300 // NLM_F_DUMP = NLM_F_ROOT|NLM_F_MATCH
	FlagCapped   = 0x100 // NLM_F_CAPPED (on NLMSG_ERROR)
	FlagAckTLVs  = 0x200 // NLM_F_ACK_TLVS (on NLMSG_ERROR)
	FlagReplace  = 0x100 // NLM_F_REPLACE (on a new-object request)
	FlagExcl     = 0x200 // NLM_F_EXCL (on a new-object request)
	FlagCreate   = 0x400 // NLM_F_CREATE (on a new-object request)

	AttrTypeMask = 0x3fff // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)

	AttrExtAckMsg = 1 // NLMSGERR_ATTR_MSG, in an extended ACK
)

// Align rounds n up to the 4-byte netlink alignment (NLMSG_ALIGN, NLA_ALIGN).
func Align(n int) int { return (n + 3) &^ 3 }

// Header is struct nlmsghdr.
type Header struct {
	Len   uint32
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
}

// Message is one decoded netlink message; Data aliases the receive buffer.
type Message struct {
	Header Header
	Data   []byte
}

// Attr is one netlink attribute; Data aliases the message buffer.
type Attr struct {
	Type uint16 // with the NLA_F_* flag bits masked off
	Data []byte
}

// ErrShort is wrapped by the decoders' errors for a message or attribute
// cut short.
var ErrShort = errors.New("short netlink message")

// Encoder builds one netlink request.
type Encoder struct {
	b     []byte
	nests []int
}

// NewRequest starts a request with a header whose length is set by
// Finish.
func NewRequest(typ, flags uint16, seq uint32) *Encoder {
	e := &Encoder{b: make([]byte, HeaderLen, 64)}
	ne := binary.NativeEndian
	ne.PutUint16(e.b[4:], typ)
	ne.PutUint16(e.b[6:], flags)
	ne.PutUint32(e.b[8:], seq)
	// nlmsg_pid stays 0: the kernel fills in the sender's port id.
	return e
}

// Fixed appends a family's fixed header (struct ifinfomsg, rtmsg, ...),
// padded to 4 bytes.
func (e *Encoder) Fixed(b []byte) {
	e.b = append(e.b, b...)
	e.pad()
}

func (e *Encoder) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// Attr appends one attribute, padded to 4 bytes with zeros.
func (e *Encoder) Attr(typ uint16, data []byte) {
	n := AttrHeaderLen + len(data)
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(n))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, data...)
	e.pad()
}

// String appends a NUL-terminated string attribute (NLA_NUL_STRING
// policies reject strings without the NUL).
func (e *Encoder) String(typ uint16, s string) {
	e.Attr(typ, append([]byte(s), 0))
}

// Uint32 appends a 32-bit attribute in host byte order.
func (e *Encoder) Uint32(typ uint16, v uint32) {
	e.Attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// Begin opens a nested attribute of type typ (without NLA_F_NESTED, as
// iproute2 sends them); End closes the innermost open one.
func (e *Encoder) Begin(typ uint16) {
	e.nests = append(e.nests, len(e.b))
	e.b = binary.NativeEndian.AppendUint16(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
}

// End closes the nested attribute Begin opened last.
func (e *Encoder) End() {
	start := e.nests[len(e.nests)-1]
	e.nests = e.nests[:len(e.nests)-1]
	binary.NativeEndian.PutUint16(e.b[start:], uint16(len(e.b)-start))
}

// Bytes returns the request so far (without its final length).
func (e *Encoder) Bytes() []byte { return e.b }

// Finish sets nlmsg_len and returns the request bytes. Nested attributes
// must all be closed.
func (e *Encoder) Finish() []byte {
	if len(e.nests) != 0 {
		panic("netlink: Finish with an open nested attribute")
	}
	binary.NativeEndian.PutUint32(e.b[0:], uint32(len(e.b)))
	return e.b
}

// ParseMessages splits a datagram into netlink messages. It checks every
// length against the buffer and never panics.
func ParseMessages(b []byte) ([]Message, error) {
	var msgs []Message
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < HeaderLen {
			return msgs, fmt.Errorf("%w: %d trailing bytes, want a %d-byte header", ErrShort, len(b), HeaderLen)
		}
		h := Header{
			Len:   ne.Uint32(b[0:]),
			Type:  ne.Uint16(b[4:]),
			Flags: ne.Uint16(b[6:]),
			Seq:   ne.Uint32(b[8:]),
			PID:   ne.Uint32(b[12:]),
		}
		if h.Len < HeaderLen || uint64(h.Len) > uint64(len(b)) {
			return msgs, fmt.Errorf("%w: nlmsg_len %d with %d bytes left", ErrShort, h.Len, len(b))
		}
		msgs = append(msgs, Message{Header: h, Data: b[HeaderLen:h.Len:h.Len]})
		next := Align(int(h.Len))
		if next > len(b) {
			// The last message may omit its padding.
			next = len(b)
		}
		b = b[next:]
	}
	return msgs, nil
}

// ParseAttrs splits a message payload (after any fixed header) into
// attributes.
func ParseAttrs(b []byte) ([]Attr, error) {
	var attrs []Attr
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < AttrHeaderLen {
			return attrs, fmt.Errorf("%w: %d trailing attribute bytes", ErrShort, len(b))
		}
		n := int(ne.Uint16(b[0:]))
		if n < AttrHeaderLen || n > len(b) {
			return attrs, fmt.Errorf("%w: attribute length %d with %d bytes left", ErrShort, n, len(b))
		}
		attrs = append(attrs, Attr{Type: ne.Uint16(b[2:]) & AttrTypeMask, Data: b[AttrHeaderLen:n:n]})
		next := Align(n)
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return attrs, nil
}

// Uint8 decodes a 1-byte attribute.
func (a Attr) Uint8() (uint8, error) {
	if len(a.Data) != 1 {
		return 0, a.sizeError(1)
	}
	return a.Data[0], nil
}

// Uint32 decodes a 4-byte attribute in host byte order.
func (a Attr) Uint32() (uint32, error) {
	if len(a.Data) != 4 {
		return 0, a.sizeError(4)
	}
	return binary.NativeEndian.Uint32(a.Data), nil
}

// Uint64 decodes an 8-byte attribute in host byte order.
func (a Attr) Uint64() (uint64, error) {
	if len(a.Data) != 8 {
		return 0, a.sizeError(8)
	}
	return binary.NativeEndian.Uint64(a.Data), nil
}

// String returns a string attribute up to its first NUL.
func (a Attr) String() string {
	s := string(a.Data)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

func (a Attr) sizeError(want int) error {
	return fmt.Errorf("netlink attribute %d: %d bytes, want %d", a.Type, len(a.Data), want)
}

// KernelError is a decoded NLMSG_ERROR (or an NLMSG_DONE that carries an
// error). Errno is 0 for a plain acknowledgement.
type KernelError struct {
	Errno   syscall.Errno
	Message string // NLMSGERR_ATTR_MSG, the extended ACK text, if any
}

func (e KernelError) Error() string {
	if e.Message == "" {
		return e.Errno.Error()
	}
	return e.Errno.Error() + " (" + e.Message + ")"
}

func (e KernelError) Unwrap() error { return e.Errno }

// ParseError decodes the payload of an NLMSG_ERROR message: struct
// nlmsgerr (an int error and the echoed request header, followed by the
// request payload unless NLM_F_CAPPED), then the extended ACK attributes
// when NLM_F_ACK_TLVS is set.
func ParseError(m Message) (KernelError, error) {
	d := m.Data
	if len(d) < errorLen {
		return KernelError{}, fmt.Errorf("%w: NLMSG_ERROR payload of %d bytes", ErrShort, len(d))
	}
	ke := KernelError{Errno: errnoFrom(int32(binary.NativeEndian.Uint32(d)))}
	if m.Header.Flags&FlagAckTLVs == 0 {
		return ke, nil
	}
	// Skip the echoed request to reach the TLVs.
	off := errorLen + HeaderLen
	if len(d) < off {
		return ke, nil // the TLVs cannot be found; keep the errno
	}
	if m.Header.Flags&FlagCapped == 0 {
		echoed := int(binary.NativeEndian.Uint32(d[errorLen:]))
		if echoed < HeaderLen || errorLen+Align(echoed) > len(d) {
			return ke, nil
		}
		off = errorLen + Align(echoed)
	}
	ke.Message = extAckMessage(d[off:])
	return ke, nil
}

// ParseDone decodes the payload of NLMSG_DONE: an optional int error
// (negative when the dump failed) followed by extended ACK attributes when
// NLM_F_ACK_TLVS is set.
func ParseDone(m Message) KernelError {
	d := m.Data
	if len(d) < errorLen {
		return KernelError{}
	}
	ke := KernelError{Errno: errnoFrom(int32(binary.NativeEndian.Uint32(d)))}
	if m.Header.Flags&FlagAckTLVs != 0 {
		ke.Message = extAckMessage(d[errorLen:])
	}
	return ke
}

// errnoFrom turns the kernel's negative error code into an Errno. Positive
// values are not errors; they are mapped to 0.
func errnoFrom(code int32) syscall.Errno {
	if code >= 0 {
		return 0
	}
	return syscall.Errno(-int64(code))
}

// extAckMessage returns NLMSGERR_ATTR_MSG from extended ACK attributes, or
// "" when absent or malformed.
func extAckMessage(b []byte) string {
	attrs, _ := ParseAttrs(b) // a partial list is still useful
	for _, a := range attrs {
		if a.Type == AttrExtAckMsg {
			return strings.TrimSpace(a.String())
		}
	}
	return ""
}

// checkReply checks that a reply belongs to the request with sequence
// number seq sent from port id pid. It returns errStale for a reply to an
// earlier request, which the caller drops.
func checkReply(h Header, seq, pid uint32) error {
	if h.Seq != seq {
		if int32(seq-h.Seq) > 0 {
			return errStale
		}
		return fmt.Errorf("netlink reply has sequence number %d, want %d", h.Seq, seq)
	}
	// The kernel addresses every reply, ACK and NLMSG_DONE to the
	// requesting socket's port id.
	if h.PID != pid {
		return fmt.Errorf("netlink reply is for port id %d, want %d", h.PID, pid)
	}
	return nil
}

var errStale = errors.New("stale netlink reply")

// Exchange collects the replies to one request.
type Exchange struct {
	Dump     bool   // the request is a dump, ended by NLMSG_DONE
	Seq, PID uint32 // the request's sequence number and our port id
	Replies  []Message
}

// Handle takes the messages of one datagram. It reports done once the
// request is complete: at the ACK of a plain request, at NLMSG_DONE of a
// dump. A kernel error is returned as a KernelError.
func (x *Exchange) Handle(msgs []Message) (done bool, err error) {
	for _, m := range msgs {
		if err := checkReply(m.Header, x.Seq, x.PID); err != nil {
			if errors.Is(err, errStale) {
				continue
			}
			return false, err
		}
		switch m.Header.Type {
		case TypeNoop:
		case TypeOverrun:
			return false, KernelError{Errno: syscall.ENOBUFS, Message: "netlink overrun"}
		case TypeError:
			ke, err := ParseError(m)
			if err != nil {
				return false, err
			}
			if ke.Errno != 0 {
				return false, ke
			}
			if !x.Dump {
				return true, nil // the ACK ends a plain request
			}
		case TypeDone:
			if ke := ParseDone(m); ke.Errno != 0 {
				return false, ke
			}
			return true, nil
		default:
			if m.Header.Flags&FlagDumpIntr != 0 {
				return false, KernelError{Errno: syscall.EINTR, Message: "the object list changed during the dump; retry"}
			}
			x.Replies = append(x.Replies, m)
		}
	}
	return false, nil
}
