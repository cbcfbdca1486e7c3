package rdmanl

// This file holds the pure netlink encoder and decoder: no syscalls, so
// every function here is testable on any host and fuzzable.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Netlink constants from <linux/netlink.h>. They are spelled out here, not
// taken from x/sys/unix, so that this file makes no system calls and builds
// everywhere; only syscall.Errno is borrowed.
const (
	netlinkRDMA = 20 // NETLINK_RDMA

	headerLen = 16 // sizeof(struct nlmsghdr)
	attrHdr   = 4  // sizeof(struct nlattr)
	errorLen  = 4  // sizeof(int) before the echoed header in struct nlmsgerr

	typeNoop    = 0x1 // NLMSG_NOOP
	typeError   = 0x2 // NLMSG_ERROR
	typeDone    = 0x3 // NLMSG_DONE
	typeOverrun = 0x4 // NLMSG_OVERRUN

	flagRequest  = 0x01  // NLM_F_REQUEST
	flagMulti    = 0x02  // NLM_F_MULTI
	flagAck      = 0x04  // NLM_F_ACK
	flagDumpIntr = 0x10  // NLM_F_DUMP_INTR
	flagDump     = 0x300 // NLM_F_DUMP = NLM_F_ROOT|NLM_F_MATCH
	flagCapped   = 0x100 // NLM_F_CAPPED (on NLMSG_ERROR)
	flagAckTLVs  = 0x200 // NLM_F_ACK_TLVS (on NLMSG_ERROR)

	attrTypeMask = 0x3fff // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)

	extAckMsg = 1 // NLMSGERR_ATTR_MSG
)

// RDMA netlink constants from <rdma/rdma_netlink.h>.
const (
	clientNLDEV = 5 // RDMA_NL_NLDEV

	cmdGet     = 1  // RDMA_NLDEV_CMD_GET
	cmdNewLink = 3  // RDMA_NLDEV_CMD_NEWLINK
	cmdDelLink = 4  // RDMA_NLDEV_CMD_DELLINK
	cmdPortGet = 5  // RDMA_NLDEV_CMD_PORT_GET
	cmdSysGet  = 6  // RDMA_NLDEV_CMD_SYS_GET
	cmdChardev = 15 // RDMA_NLDEV_CMD_GET_CHARDEV

	attrDevIndex      = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	attrDevName       = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	attrPortIndex     = 3  // RDMA_NLDEV_ATTR_PORT_INDEX, u32
	attrFWVersion     = 5  // RDMA_NLDEV_ATTR_FW_VERSION, string
	attrNodeGUID      = 6  // RDMA_NLDEV_ATTR_NODE_GUID, u64
	attrSysImageGUID  = 7  // RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, u64
	attrPortState     = 12 // RDMA_NLDEV_ATTR_PORT_STATE, u8
	attrPortPhysState = 13 // RDMA_NLDEV_ATTR_PORT_PHYS_STATE, u8
	attrDevNodeType   = 14 // RDMA_NLDEV_ATTR_DEV_NODE_TYPE, u8
	attrNdevIndex     = 50 // RDMA_NLDEV_ATTR_NDEV_INDEX, u32
	attrNdevName      = 51 // RDMA_NLDEV_ATTR_NDEV_NAME, string
	attrLinkType      = 65 // RDMA_NLDEV_ATTR_LINK_TYPE, string
	attrDevProtocol   = 67 // RDMA_NLDEV_ATTR_DEV_PROTOCOL, string
	attrChardevType   = 69 // RDMA_NLDEV_ATTR_CHARDEV_TYPE, string
	attrChardevName   = 70 // RDMA_NLDEV_ATTR_CHARDEV_NAME, string
	attrChardevABI    = 71 // RDMA_NLDEV_ATTR_CHARDEV_ABI, u64
	attrChardev       = 72 // RDMA_NLDEV_ATTR_CHARDEV, u64 (dev_t)
	attrUverbsDriver  = 73 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, u32
	attrSysCopyOnFork = 93 // RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, u8
)

// nldevType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func nldevType(op uint16) uint16 { return clientNLDEV<<10 + op }

// cmdName names an nldev command for error messages.
func cmdName(op uint16) string {
	switch op {
	case cmdGet:
		return "GET"
	case cmdNewLink:
		return "NEWLINK"
	case cmdDelLink:
		return "DELLINK"
	case cmdPortGet:
		return "PORT_GET"
	case cmdChardev:
		return "GET_CHARDEV"
	case cmdSysGet:
		return "SYS_GET"
	case cmdResGet:
		return "RES_GET"
	case cmdResQPGet:
		return "RES_QP_GET"
	case cmdResCMIDGet:
		return "RES_CM_ID_GET"
	case cmdResCQGet:
		return "RES_CQ_GET"
	case cmdResMRGet:
		return "RES_MR_GET"
	case cmdResPDGet:
		return "RES_PD_GET"
	case cmdResCtxGet:
		return "RES_CTX_GET"
	case cmdResSRQGet:
		return "RES_SRQ_GET"
	case cmdStatGet:
		return "STAT_GET"
	}
	return fmt.Sprintf("command %d", op)
}

// align rounds n up to the 4-byte netlink alignment (NLMSG_ALIGN, NLA_ALIGN).
func align(n int) int { return (n + 3) &^ 3 }

// header is struct nlmsghdr.
type header struct {
	Len   uint32
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
}

// message is one decoded netlink message; Data aliases the receive buffer.
type message struct {
	Header header
	Data   []byte
}

// attr is one netlink attribute; Data aliases the message buffer.
type attr struct {
	Type uint16 // with the NLA_F_* flag bits masked off
	Data []byte
}

var errShort = errors.New("short netlink message")

// encoder builds one netlink request.
type encoder struct {
	b []byte
}

// newRequest starts a request with a header whose length is fixed up by
// finish.
func newRequest(typ, flags uint16, seq uint32) *encoder {
	e := &encoder{b: make([]byte, headerLen, 64)}
	ne := binary.NativeEndian
	ne.PutUint16(e.b[4:], typ)
	ne.PutUint16(e.b[6:], flags)
	ne.PutUint32(e.b[8:], seq)
	// nlmsg_pid stays 0: the kernel fills in the sender's port id.
	return e
}

// attr appends one attribute, padded to 4 bytes with zeros.
func (e *encoder) attr(typ uint16, data []byte) {
	n := attrHdr + len(data)
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(n))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, data...)
	for i := n; i < align(n); i++ {
		e.b = append(e.b, 0)
	}
}

// string appends a NUL-terminated string attribute (the kernel's nldev
// policy uses NLA_NUL_STRING, which rejects strings without the NUL).
func (e *encoder) string(typ uint16, s string) {
	e.attr(typ, append([]byte(s), 0))
}

func (e *encoder) uint32(typ uint16, v uint32) {
	e.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// finish sets nlmsg_len and returns the request bytes.
func (e *encoder) finish() []byte {
	binary.NativeEndian.PutUint32(e.b[0:], uint32(len(e.b)))
	return e.b
}

// parseMessages splits a datagram into netlink messages. It checks every
// length against the buffer and never panics.
func parseMessages(b []byte) ([]message, error) {
	var msgs []message
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < headerLen {
			return msgs, fmt.Errorf("%w: %d trailing bytes, want a %d-byte header", errShort, len(b), headerLen)
		}
		h := header{
			Len:   ne.Uint32(b[0:]),
			Type:  ne.Uint16(b[4:]),
			Flags: ne.Uint16(b[6:]),
			Seq:   ne.Uint32(b[8:]),
			PID:   ne.Uint32(b[12:]),
		}
		if h.Len < headerLen || uint64(h.Len) > uint64(len(b)) {
			return msgs, fmt.Errorf("%w: nlmsg_len %d with %d bytes left", errShort, h.Len, len(b))
		}
		msgs = append(msgs, message{Header: h, Data: b[headerLen:h.Len:h.Len]})
		next := align(int(h.Len))
		if next > len(b) {
			// The last message may omit its padding.
			next = len(b)
		}
		b = b[next:]
	}
	return msgs, nil
}

// parseAttrs splits a message payload into attributes.
func parseAttrs(b []byte) ([]attr, error) {
	var attrs []attr
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < attrHdr {
			return attrs, fmt.Errorf("%w: %d trailing attribute bytes", errShort, len(b))
		}
		n := int(ne.Uint16(b[0:]))
		if n < attrHdr || n > len(b) {
			return attrs, fmt.Errorf("%w: attribute length %d with %d bytes left", errShort, n, len(b))
		}
		attrs = append(attrs, attr{Type: ne.Uint16(b[2:]) & attrTypeMask, Data: b[attrHdr:n:n]})
		next := align(n)
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return attrs, nil
}

func (a attr) uint8() (uint8, error) {
	if len(a.Data) != 1 {
		return 0, a.sizeError(1)
	}
	return a.Data[0], nil
}

func (a attr) uint32() (uint32, error) {
	if len(a.Data) != 4 {
		return 0, a.sizeError(4)
	}
	return binary.NativeEndian.Uint32(a.Data), nil
}

func (a attr) uint64() (uint64, error) {
	if len(a.Data) != 8 {
		return 0, a.sizeError(8)
	}
	return binary.NativeEndian.Uint64(a.Data), nil
}

// string returns a string attribute up to its first NUL.
func (a attr) string() string {
	s := string(a.Data)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
}

func (a attr) sizeError(want int) error {
	return fmt.Errorf("netlink attribute %d: %d bytes, want %d", a.Type, len(a.Data), want)
}

// kernelError is a decoded NLMSG_ERROR (or an NLMSG_DONE that carries an
// error). Errno is 0 for a plain acknowledgement.
type kernelError struct {
	Errno   syscall.Errno
	Message string // NLMSGERR_ATTR_MSG, the extended ACK text, if any
}

func (e kernelError) Error() string {
	if e.Message == "" {
		return e.Errno.Error()
	}
	return e.Errno.Error() + " (" + e.Message + ")"
}

func (e kernelError) Unwrap() error { return e.Errno }

// parseError decodes the payload of an NLMSG_ERROR message: struct
// nlmsgerr (an int error and the echoed request header, followed by the
// request payload unless NLM_F_CAPPED), then the extended ACK attributes
// when NLM_F_ACK_TLVS is set.
func parseError(m message) (kernelError, error) {
	d := m.Data
	if len(d) < errorLen {
		return kernelError{}, fmt.Errorf("%w: NLMSG_ERROR payload of %d bytes", errShort, len(d))
	}
	ke := kernelError{Errno: errnoFrom(int32(binary.NativeEndian.Uint32(d)))}
	if m.Header.Flags&flagAckTLVs == 0 {
		return ke, nil
	}
	// Skip the echoed request to reach the TLVs.
	off := errorLen + headerLen
	if len(d) < off {
		return ke, nil // the TLVs cannot be found; keep the errno
	}
	if m.Header.Flags&flagCapped == 0 {
		echoed := int(binary.NativeEndian.Uint32(d[errorLen:]))
		if echoed < headerLen || errorLen+align(echoed) > len(d) {
			return ke, nil
		}
		off = errorLen + align(echoed)
	}
	ke.Message = extAckMessage(d[off:])
	return ke, nil
}

// parseDone decodes the payload of NLMSG_DONE: an optional int error
// (negative when the dump failed) followed by extended ACK attributes when
// NLM_F_ACK_TLVS is set.
func parseDone(m message) kernelError {
	d := m.Data
	if len(d) < errorLen {
		return kernelError{}
	}
	ke := kernelError{Errno: errnoFrom(int32(binary.NativeEndian.Uint32(d)))}
	if m.Header.Flags&flagAckTLVs != 0 {
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
	attrs, _ := parseAttrs(b) // a partial list is still useful
	for _, a := range attrs {
		if a.Type == extAckMsg {
			return strings.TrimSpace(a.string())
		}
	}
	return ""
}

// checkReply checks that a reply belongs to the request with sequence
// number seq sent from port id pid. It returns errStale for a reply to an
// earlier request, which the caller drops.
func checkReply(h header, seq, pid uint32) error {
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

// exchange collects the replies to one request.
type exchange struct {
	dump     bool   // the request is a dump, ended by NLMSG_DONE
	seq, pid uint32 // the request's sequence number and our port id
	replies  []message
}

// handle takes the messages of one datagram. It reports done once the
// request is complete: at the ACK of a plain request, at NLMSG_DONE of a
// dump. A kernel error is returned as a kernelError.
func (x *exchange) handle(msgs []message) (done bool, err error) {
	for _, m := range msgs {
		if err := checkReply(m.Header, x.seq, x.pid); err != nil {
			if errors.Is(err, errStale) {
				continue
			}
			return false, err
		}
		switch m.Header.Type {
		case typeNoop:
		case typeOverrun:
			return false, kernelError{Errno: syscall.ENOBUFS, Message: "netlink overrun"}
		case typeError:
			ke, err := parseError(m)
			if err != nil {
				return false, err
			}
			if ke.Errno != 0 {
				return false, ke
			}
			if !x.dump {
				return true, nil // the ACK ends a plain request
			}
		case typeDone:
			if ke := parseDone(m); ke.Errno != 0 {
				return false, ke
			}
			return true, nil
		default:
			if m.Header.Flags&flagDumpIntr != 0 {
				return false, kernelError{Errno: syscall.EINTR, Message: "the device list changed during the dump; retry"}
			}
			x.replies = append(x.replies, m)
		}
	}
	return false, nil
}

// newLinkRequest encodes RDMA_NLDEV_CMD_NEWLINK.
func newLinkRequest(seq uint32, name, linkType, netdev string) []byte {
	// No NLM_F_CREATE|NLM_F_EXCL: EXCL is 0x200, the same bit as
	// NLM_F_MATCH, and the RDMA netlink dispatcher takes any request with a
	// NLM_F_DUMP bit for a dump, which NEWLINK has not (EINVAL).
	e := newRequest(nldevType(cmdNewLink), flagRequest|flagAck, seq)
	e.string(attrDevName, name)
	e.string(attrLinkType, linkType)
	e.string(attrNdevName, netdev)
	return e.finish()
}

// delLinkRequest encodes RDMA_NLDEV_CMD_DELLINK.
func delLinkRequest(seq, index uint32) []byte {
	e := newRequest(nldevType(cmdDelLink), flagRequest|flagAck, seq)
	e.uint32(attrDevIndex, index)
	return e.finish()
}

// getDumpRequest encodes a RDMA_NLDEV_CMD_GET dump of all devices.
func getDumpRequest(seq uint32) []byte {
	return newRequest(nldevType(cmdGet), flagRequest|flagDump, seq).finish()
}

// portDumpRequest encodes a RDMA_NLDEV_CMD_PORT_GET dump of the ports of
// one device. The kernel's nldev_port_get_dumpit requires the device
// index: it answers EINVAL without one.
func portDumpRequest(seq, index uint32) []byte {
	e := newRequest(nldevType(cmdPortGet), flagRequest|flagDump, seq)
	e.uint32(attrDevIndex, index)
	return e.finish()
}

// parseDevice decodes the attributes of one RDMA_NLDEV_CMD_GET reply.
func parseDevice(b []byte) (Device, error) {
	var d Device
	attrs, err := parseAttrs(b)
	if err != nil {
		return d, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrDevIndex:
			d.Index, err = a.uint32()
		case attrDevName:
			d.Name = a.string()
		case attrPortIndex:
			d.PortCount, err = a.uint32()
		case attrFWVersion:
			d.FWVersion = a.string()
		case attrNodeGUID:
			d.NodeGUID, err = a.uint64()
		case attrSysImageGUID:
			d.SysImageGUID, err = a.uint64()
		case attrDevNodeType:
			d.NodeType, err = a.uint8()
		case attrDevProtocol:
			d.Protocol = a.string()
		}
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// parseLink decodes the attributes of one RDMA_NLDEV_CMD_PORT_GET reply.
func parseLink(b []byte) (Link, error) {
	var l Link
	attrs, err := parseAttrs(b)
	if err != nil {
		return l, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrDevIndex:
			l.DevIndex, err = a.uint32()
		case attrDevName:
			l.DevName = a.string()
		case attrPortIndex:
			l.Port, err = a.uint32()
		case attrPortState:
			l.State, err = a.uint8()
		case attrPortPhysState:
			l.PhysState, err = a.uint8()
		case attrNdevIndex:
			l.NetdevIndex, err = a.uint32()
		case attrNdevName:
			l.Netdev = a.string()
		}
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// chardevRequest encodes RDMA_NLDEV_CMD_GET_CHARDEV: which character
// device a client (e.g. "uverbs") exposes for the device at index.
func chardevRequest(seq, index uint32, client string) []byte {
	e := newRequest(nldevType(cmdChardev), flagRequest|flagAck, seq)
	e.uint32(attrDevIndex, index)
	e.string(attrChardevType, client)
	return e.finish()
}

// parseChardev decodes a RDMA_NLDEV_CMD_GET_CHARDEV reply.
func parseChardev(b []byte) (Chardev, error) {
	var c Chardev
	attrs, err := parseAttrs(b)
	if err != nil {
		return c, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrChardevName:
			c.Name = a.string()
		case attrChardevABI:
			c.ABI, err = a.uint64()
		case attrChardev:
			c.Dev, err = a.uint64()
		case attrUverbsDriver:
			c.DriverID, err = a.uint32()
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func sysGetRequest(seq uint32) []byte {
	return newRequest(nldevType(cmdSysGet), flagRequest|flagAck, seq).finish()
}

// parseSystem decodes a RDMA_NLDEV_CMD_SYS_GET reply. A kernel before
// 5.13 sends no copy-on-fork attribute: it does not copy pinned pages.
func parseSystem(b []byte) (System, error) {
	var s System
	attrs, err := parseAttrs(b)
	if err != nil {
		return s, err
	}
	for _, a := range attrs {
		if a.Type == attrSysCopyOnFork {
			v, err := a.uint8()
			if err != nil {
				return s, err
			}
			s.CopyOnFork = v != 0
		}
	}
	return s, nil
}
