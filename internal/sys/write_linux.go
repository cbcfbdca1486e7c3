package sys

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
)

// Command issues a legacy write() command: the header, then in (the core
// request followed by driver data). When the command has a response,
// in's response field must already hold PointerTo(out) (core response
// followed by driver data); out stays pinned across the call.
func (f *FD) Command(op string, cmd uint32, in, out []byte) error {
	const hdr = int(unsafe.Sizeof(abi.CmdHdr{}))
	if (hdr+len(in))%4 != 0 || len(out)%4 != 0 || (hdr+len(in))/4 > 0xffff || len(out)/4 > 0xffff {
		return &Error{Op: op, Err: fmt.Errorf("bad command size %d/%d", len(in), len(out))}
	}
	if hdr+len(in) > ScratchSize {
		return &Error{Op: op, Err: fmt.Errorf("command of %d bytes", len(in))}
	}
	s, err := GetScratch()
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	defer s.Release()
	b := s.Bytes()[:hdr+len(in)]
	putCommand(b, cmd, in, len(out))
	var p pinner
	defer p.Unpin()
	p.bytes(out)
	return f.Write(op, b)
}

// CommandEx issues an extended write() command. in and out are the core
// request and response (multiples of 8 bytes); driverIn and driverOut the
// provider's. The kernel writes the core response, then driverOut, at the
// response address.
func (f *FD) CommandEx(op string, cmd uint32, in, driverIn []byte, outLen, driverOutLen int) ([]byte, error) {
	const hdr = int(unsafe.Sizeof(abi.CmdHdr{})) + int(unsafe.Sizeof(abi.ExCmdHdr{}))
	if len(in)%8 != 0 || len(driverIn)%8 != 0 || outLen%8 != 0 || driverOutLen%8 != 0 {
		return nil, &Error{Op: op, Err: fmt.Errorf("bad extended command size")}
	}
	// The command and the response share one scratch block, the
	// response in its second half.
	const respAt = ScratchSize / 2
	if hdr+len(in)+len(driverIn) > respAt || outLen+driverOutLen > ScratchSize-respAt {
		return nil, &Error{Op: op, Err: fmt.Errorf("extended command of %d/%d bytes", len(in)+len(driverIn), outLen+driverOutLen)}
	}
	s, err := GetScratch()
	if err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	defer s.Release()
	kout := s.Zero(respAt, outLen+driverOutLen)
	var resp Pointer // the kernel refuses a response address with no response
	if len(kout) > 0 {
		resp = s.Addr(respAt)
	}
	b := s.Zero(0, hdr+len(in)+len(driverIn)) // the header's reserved field must be 0
	binary.NativeEndian.PutUint32(b[0:], cmd|abi.IB_USER_VERBS_CMD_FLAG_EXTENDED)
	binary.NativeEndian.PutUint16(b[4:], uint16(len(in)/8))
	binary.NativeEndian.PutUint16(b[6:], uint16(outLen/8))
	binary.NativeEndian.PutUint64(b[8:], uint64(resp))
	binary.NativeEndian.PutUint16(b[16:], uint16(len(driverIn)/8))
	binary.NativeEndian.PutUint16(b[18:], uint16(driverOutLen/8))
	copy(b[hdr:], in)
	copy(b[hdr+len(in):], driverIn)
	if err := f.Write(op, b); err != nil {
		return nil, err
	}
	if len(kout) == 0 {
		return nil, nil
	}
	return append([]byte(nil), kout...), nil
}

// CommandBuffer builds a legacy write() command once, for a hot path
// that writes the same command many times (a doorbell): the header, then
// in. outLen is the response length the kernel may write.
func (f *FD) CommandBuffer(cmd uint32, in []byte, outLen int) []byte {
	b := make([]byte, int(unsafe.Sizeof(abi.CmdHdr{}))+len(in))
	putCommand(b, cmd, in, outLen)
	return b
}

// putCommand writes a legacy command into b, which is exactly its
// length: the header (cmd, in and out words), then in. Every byte is
// set, so b may hold anything before.
func putCommand(b []byte, cmd uint32, in []byte, outLen int) {
	const hdr = int(unsafe.Sizeof(abi.CmdHdr{}))
	binary.NativeEndian.PutUint32(b[0:], cmd)
	binary.NativeEndian.PutUint16(b[4:], uint16(len(b)/4))
	binary.NativeEndian.PutUint16(b[6:], uint16(outLen/4))
	copy(b[hdr:], in)
}

// CommandPinned issues a legacy write() command without a response whose
// driver data points at keep: memory the kernel writes through those
// pointers, pinned across the call.
func (f *FD) CommandPinned(op string, cmd uint32, in []byte, keep ...[]byte) error {
	var p pinner
	defer p.Unpin()
	for _, k := range keep {
		p.bytes(k)
	}
	return f.Command(op, cmd, in, nil)
}
