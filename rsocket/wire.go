package rsocket

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire format of librdmacm's rsockets (stream sockets), version 1, as
// rdma-core's librdmacm/rsocket.c writes it (unchanged from rdma-core 44
// to today). docs/rsocket.md describes it field by field.

// Message opcodes: the top three bits of every immediate.
const (
	opData    = 0 // DATA: bytes written into the receiver's buffer
	opWrite   = 2 // never transmitted: a send's id for an iomap write (it has no immediate)
	opSGL     = 4 // credit update, with or without a new buffer half
	opIOMapSG = 6 // iomap entry written into the receiver's iomap table: its index
	opCtrl    = 7 // control: ctrlDisconnect, ctrlKeepalive, ctrlShutdown
)

// Control values of opCtrl.
const (
	ctrlDisconnect = 0
	ctrlKeepalive  = 1
	ctrlShutdown   = 2
)

const (
	msgDataMask = 1<<29 - 1
	// maxMsgData is the largest value a message carries: 29 bits.
	maxMsgData = msgDataMask
)

// msg builds an immediate from an opcode and its 29-bit value.
func msg(op uint32, data uint32) uint32 { return op<<29 | data&msgDataMask }

// msgOp and msgData split an immediate.
func msgOp(imm uint32) uint32   { return imm >> 29 }
func msgData(imm uint32) uint32 { return imm & msgDataMask }

// wrRecv marks a receive's work request id (bit 63, as C does); a send's
// id is its message. With msgSend (iWARP), wrMsgSend (bit 62) marks the
// SEND that follows a message's WRITE, whose id is the message's opcode
// with value 0, and a receive's id has its message slot in the low bits.
const (
	wrRecv    = 1 << 63
	wrMsgSend = 1 << 62
)

// sendMsgLen is RS_MSG_SIZE: on iWARP, which has no immediate data, a
// message is a SEND of these 4 bytes, a 32-bit word laid out as the
// immediate would be (op<<29 | value), in the receiver's byte order
// (C writes and reads its host's, the same between hosts of one order).
const sendMsgLen = 4

// sendMsg decodes the message a receive took on iWARP: byteLen bytes
// arrived in slot, the receive's sendMsgLen-byte buffer; withImm is
// whether the completion says it carried immediate data.
func sendMsg(slot []byte, byteLen uint32, withImm bool) (uint32, error) {
	switch {
	case withImm:
		return 0, errors.New("a message with immediate data on iWARP, where messages are 4-byte SENDs")
	case byteLen != sendMsgLen || len(slot) < sendMsgLen:
		return 0, fmt.Errorf("a message of %d bytes, want a SEND of %d", byteLen, sendMsgLen)
	}
	return binary.NativeEndian.Uint32(slot), nil
}

// connData flags.
const (
	flagNet   = 1 << 0 // the sender is big-endian
	flagIOMap = 1 << 1 // the sender knows iomap (C always sets it)
)

// connDataLen is the size of struct rs_conn_data.
const connDataLen = 40

// Protocol limits (rsocket.c).
const (
	sglSize      = 2     // entries in a target SGL
	sgeLen       = 16    // struct rs_sge: addr u64, key u32, length u32
	ctrlSlots    = 4     // RS_QP_CTRL_SIZE: control messages in flight
	sendLowWater = 2048  // RS_SNDLOWAT: the least free send buffer to send
	olapStart    = 2048  // RS_OLAP_START_SIZE: the first transfer
	maxTransfer  = 65536 // RS_MAX_TRANSFER: transfers double up to this
	minQueue     = 16    // RS_QP_MIN_SIZE
	maxQueue     = 0xFFFE
)

// sge is struct rs_sge: a piece of remote memory.
type sge struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// connData is struct rs_conn_data, the private data of the connect
// request and of the accept. Multi-byte fields travel big-endian.
type connData struct {
	Version         uint8
	Flags           uint8
	Credits         uint16 // the sender's receive queue size
	TargetIOMapSize uint8  // scaled (rs_value_to_scale)
	TargetSGL       sge    // where the peer writes buffer updates: sglSize entries
	DataBuf         sge    // the first half of the sender's receive buffer
}

func (c *connData) marshal(b []byte) {
	_ = b[connDataLen-1]
	b[0], b[1] = c.Version, c.Flags
	binary.BigEndian.PutUint16(b[2:], c.Credits)
	b[4], b[5], b[6] = 0, 0, 0
	b[7] = c.TargetIOMapSize
	putSGE(b[8:], c.TargetSGL, binary.BigEndian)
	putSGE(b[24:], c.DataBuf, binary.BigEndian)
}

func putSGE(b []byte, s sge, o binary.ByteOrder) {
	o.PutUint64(b, s.Addr)
	o.PutUint32(b[8:], s.Key)
	o.PutUint32(b[12:], s.Length)
}

func getSGE(b []byte, o binary.ByteOrder) sge {
	return sge{Addr: o.Uint64(b), Key: o.Uint32(b[8:]), Length: o.Uint32(b[12:])}
}

// ConnectDataError is connect private data this package refuses: too
// short, another version, or values no rsocket sends.
type ConnectDataError struct {
	Reason string
}

func (e *ConnectDataError) Error() string { return "rsocket: connect data: " + e.Reason }

// parseConnData decodes and checks a peer's connect data. The InfiniBand
// CM pads private data with zeros, so b may be longer than connDataLen.
func parseConnData(b []byte) (connData, error) {
	var c connData
	if len(b) < connDataLen {
		return c, &ConnectDataError{fmt.Sprintf("%d bytes, want at least %d", len(b), connDataLen)}
	}
	c.Version, c.Flags = b[0], b[1]
	c.Credits = binary.BigEndian.Uint16(b[2:])
	c.TargetIOMapSize = b[7]
	c.TargetSGL = getSGE(b[8:], binary.BigEndian)
	c.DataBuf = getSGE(b[24:], binary.BigEndian)
	switch {
	case c.Version != 1:
		return c, &ConnectDataError{fmt.Sprintf("version %d, this side speaks version 1", c.Version)}
	case c.Flags&^(flagNet|flagIOMap) != 0:
		return c, &ConnectDataError{fmt.Sprintf("unknown flags %#x", c.Flags)}
	case c.Credits == 0:
		return c, &ConnectDataError{"no credits (a receive queue of 0)"}
	case c.TargetSGL.Length != sglSize:
		return c, &ConnectDataError{fmt.Sprintf("a target SGL of %d entries, want %d", c.TargetSGL.Length, sglSize)}
	case c.DataBuf.Length == 0:
		return c, &ConnectDataError{"an empty first buffer"}
	case c.DataBuf.Length > maxMsgData:
		return c, &ConnectDataError{fmt.Sprintf("a first buffer of %d bytes, more than a message can count", c.DataBuf.Length)}
	}
	return c, nil
}

// scaleToValue is rs_scale_to_value(v, 8): the iomap size a peer
// advertises.
func scaleToValue(v uint8) int {
	if v <= 128 {
		return int(v)
	}
	return int(v&^128) << 8
}

// valueToScale is rs_value_to_scale(v, 8) for 0 <= v <= maxIOMap: exact
// to 128, in units of 256 above.
func valueToScale(v int) uint8 {
	if v <= 128 {
		return uint8(v)
	}
	return uint8(128 | v>>8)
}

// maxIOMap is the largest iomap table the 8-bit scaled size can name.
const maxIOMap = 127 << 8

// ioMapLen is struct rs_iomap: offset u64, then an rs_sge, in the
// receiver's byte order.
const ioMapLen = 8 + sgeLen

// ioMapping is struct rs_iomap: the peer's memory at sge takes the
// writes of offsets [Offset, Offset+Length).
type ioMapping struct {
	Offset uint64
	sge
}

func getIOMap(b []byte, o binary.ByteOrder) ioMapping {
	return ioMapping{Offset: o.Uint64(b), sge: getSGE(b[8:], o)}
}

func putIOMap(b []byte, m ioMapping, o binary.ByteOrder) {
	o.PutUint64(b, m.Offset)
	putSGE(b[8:], m.sge, o)
}

// covers reports whether offset off falls in m, with no overflow.
func (m ioMapping) covers(off uint64) bool {
	return off >= m.Offset && off-m.Offset < uint64(m.Length)
}
