package bench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// The two sides of a run talk over one TCP connection, as perftest's do
// before and after its test (its "Data ex. method : Ethernet"), in
// messages of a 4-byte header and a payload:
//
//	type   uint8   MsgHello, MsgReady, MsgDone or MsgError
//	flags  uint8   0
//	length uint16  payload bytes, big-endian, at most MaxPayload
//
// A run is: both sides send a Hello (their queue pair, GID and memory)
// and read the other's; both connect their QP and send Ready, and start
// when they have read the other's; at the end both send Done, the client
// with its Result as JSON. A side that cannot go on sends MsgError with
// a message instead.

// MsgType is the kind of a message.
type MsgType uint8

const (
	MsgHello MsgType = 1 // payload: a Hello (MarshalBinary)
	MsgReady MsgType = 2 // no payload
	MsgDone  MsgType = 3 // payload: empty, or a Result as JSON
	MsgError MsgType = 4 // payload: UTF-8 text
)

func (t MsgType) String() string {
	switch t {
	case MsgHello:
		return "hello"
	case MsgReady:
		return "ready"
	case MsgDone:
		return "done"
	case MsgError:
		return "error"
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// MaxPayload is the largest payload a message may carry.
const MaxPayload = 4096

// ErrMalformed is matched by every error about bytes a peer sent that do
// not form a valid message.
var ErrMalformed = errors.New("bench: malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// WriteMessage writes one message.
func WriteMessage(w io.Writer, t MsgType, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("bench: %v message of %d bytes, at most %d fit", t, len(payload), MaxPayload)
	}
	b := make([]byte, 4, 4+len(payload))
	b[0] = byte(t)
	binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	_, err := w.Write(append(b, payload...))
	return err
}

// ReadMessage reads one message. A message of an unknown type, with
// flags set or longer than MaxPayload is an error matching ErrMalformed;
// a connection that ends inside a message is io.ErrUnexpectedEOF, one
// that ends before it io.EOF.
func ReadMessage(r io.Reader) (MsgType, []byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	t := MsgType(h[0])
	if t < MsgHello || t > MsgError {
		return 0, nil, malformed("unknown message type %d", h[0])
	}
	if h[1] != 0 {
		return 0, nil, malformed("%v message with flags %#x", t, h[1])
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n > MaxPayload {
		return 0, nil, malformed("%v message of %d bytes, at most %d", t, n, MaxPayload)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return t, p, nil
}

// Limits on what a Hello may ask for.
const (
	MaxSize  = 1 << 30 // bytes per message
	MaxIters = 1 << 26 // iterations, and warm-up iterations
)

// Hello is what a side tells the other before a run: the test and its
// parameters, which must agree, and how to reach its queue pair and
// memory.
type Hello struct {
	Test     Test
	Size     uint32 // bytes per message
	Iters    uint32 // measured iterations
	Warmup   uint32 // iterations before the measured ones
	QPN      uint32 // queue pair number, 24 bits
	PSN      uint32 // first packet sequence number, 24 bits
	GID      [16]byte
	MTU      uint8  // path MTU the side can use, as IB encodes it: 1 (256 bytes) to 5 (4096)
	OutReads uint8  // RDMA READs and atomics it can have in flight as responder
	RKey     uint32 // remote key of the memory the peer may access
	Addr     uint64 // its address
	Len      uint64 // and length
}

const (
	helloMagic   = "PRDB"
	helloVersion = 1
	helloLen     = 68
)

// MarshalBinary encodes h (68 bytes, big-endian). It does not validate:
// UnmarshalBinary does, on the receiving side.
func (h Hello) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, helloLen)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, helloVersion)
	b = append(b, byte(h.Test), h.MTU, h.OutReads, 0, 0, 0)
	for _, v := range []uint32{h.Size, h.Iters, h.Warmup, h.QPN, h.PSN, h.RKey} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = append(b, h.GID[:]...)
	b = binary.BigEndian.AppendUint64(b, h.Addr)
	b = binary.BigEndian.AppendUint64(b, h.Len)
	return b, nil
}

// UnmarshalBinary decodes and validates a Hello from the network. Every
// error matches ErrMalformed.
func (h *Hello) UnmarshalBinary(b []byte) error {
	if len(b) != helloLen {
		return malformed("hello of %d bytes, want %d", len(b), helloLen)
	}
	if string(b[:4]) != helloMagic {
		return malformed("hello without the %q magic: is the peer a purerdma bench?", helloMagic)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != helloVersion {
		return malformed("hello of protocol version %d, this side speaks %d", v, helloVersion)
	}
	if b[9] != 0 || b[10] != 0 || b[11] != 0 {
		return malformed("hello with reserved bytes set")
	}
	var v Hello
	v.Test, v.MTU, v.OutReads = Test(b[6]), b[7], b[8]
	u := func(i int) uint32 { return binary.BigEndian.Uint32(b[12+4*i:]) }
	v.Size, v.Iters, v.Warmup, v.QPN, v.PSN, v.RKey = u(0), u(1), u(2), u(3), u(4), u(5)
	copy(v.GID[:], b[36:52])
	v.Addr = binary.BigEndian.Uint64(b[52:])
	v.Len = binary.BigEndian.Uint64(b[60:])
	switch {
	case !v.Test.Valid():
		return malformed("hello for unknown test %d", b[6])
	case v.MTU < 1 || v.MTU > 5:
		return malformed("hello with MTU code %d (1 to 5)", v.MTU)
	case v.Size < 1 || v.Size > MaxSize:
		return malformed("hello with message size %d (1 to %d)", v.Size, MaxSize)
	case v.Test == AtomicLat && v.Size != 8:
		return malformed("atomic_lat hello with size %d (atomics are 8 bytes)", v.Size)
	case v.Iters < 1 || v.Iters > MaxIters || v.Warmup > MaxIters:
		return malformed("hello with %d iterations after %d warm-up (1 to %d)", v.Iters, v.Warmup, MaxIters)
	case v.QPN > 1<<24-1 || v.PSN > 1<<24-1:
		return malformed("hello with QPN %#x PSN %#x (24 bits each)", v.QPN, v.PSN)
	case v.Len < uint64(v.Size) || v.Addr+v.Len < v.Addr:
		return malformed("hello with %d bytes of memory at %#x for %d-byte messages", v.Len, v.Addr, v.Size)
	}
	*h = v
	return nil
}

// CheckPeer reports whether the peer's Hello describes the same run as
// ours: the same test, message size, iterations and warm-up.
func CheckPeer(local, peer Hello) error {
	if local.Test != peer.Test || local.Size != peer.Size || local.Iters != peer.Iters || local.Warmup != peer.Warmup {
		return fmt.Errorf("bench: the peer runs %v -s %d -n %d -w %d, this side %v -s %d -n %d -w %d",
			peer.Test, peer.Size, peer.Iters, peer.Warmup, local.Test, local.Size, local.Iters, local.Warmup)
	}
	return nil
}

// DecodeDone decodes the payload of a Done message: nil for an empty
// one, else the peer's Result, validated.
func DecodeDone(p []byte) (*Result, error) {
	if len(p) == 0 {
		return nil, nil
	}
	var r Result
	if err := json.Unmarshal(p, &r); err != nil {
		return nil, malformed("done message: %v", err)
	}
	if err := r.Validate(); err != nil {
		return nil, malformed("done message: %v", err)
	}
	return &r, nil
}

// PeerError is the failure a peer reported in an Error message.
type PeerError struct{ Msg string }

func (e *PeerError) Error() string { return "peer: " + e.Msg }

// DecodeError turns an Error message's payload into a PeerError, with
// invalid UTF-8 and control characters replaced so it is safe to print.
func DecodeError(p []byte) *PeerError {
	s := strings.ToValidUTF8(string(p), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return &PeerError{Msg: s}
}
