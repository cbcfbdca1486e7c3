package rdmacm

import (
	"context"
	"fmt"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// This file is librdmacm's rdma_verbs.h: short forms of the verbs on an
// ID's QP, for programs that need no more than one buffer per work
// request. Anything else is uverbs on ID.QP and ID.PD.

// UDPQKey is the QKey the rdma_cm gives the UD QPs of PortSpaceUDP
// (RDMA_UDP_QKEY).
const UDPQKey = 0x01234567

// verbsPD is the PD of the ID's QP or SRQ, or else the shared default
// PD.
func (id *ID) verbsPD(op string) (*uverbs.PD, error) {
	if pd := id.PD(); pd != nil {
		return pd, nil
	}
	id.mu.Lock()
	pd := id.ep.srqPD
	id.mu.Unlock()
	if pd != nil {
		return pd, nil
	}
	s, err := id.shared(op)
	if err != nil {
		return nil, err
	}
	return s.pd, nil
}

// RegMsgs registers buf for sends and receives (rdma_reg_msgs) on the
// PD of the ID's QP (or SRQ), or before those the shared Context's
// default PD.
// The caller closes the MR.
func (id *ID) RegMsgs(buf []byte) (*uverbs.MR, error) {
	return id.reg("RegMsgs", buf, uverbs.AccessLocalWrite)
}

// RegRead registers buf as the target of the peer's RDMA reads
// (rdma_reg_read).
func (id *ID) RegRead(buf []byte) (*uverbs.MR, error) {
	return id.reg("RegRead", buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
}

// RegWrite registers buf as the target of the peer's RDMA writes
// (rdma_reg_write).
func (id *ID) RegWrite(buf []byte) (*uverbs.MR, error) {
	return id.reg("RegWrite", buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
}

func (id *ID) reg(op string, buf []byte, access uverbs.Access) (*uverbs.MR, error) {
	pd, err := id.verbsPD(op)
	if err != nil {
		return nil, err
	}
	mr, err := pd.RegMR(buf, access)
	return mr, opError(op, id.handle, err)
}

// sge is the part [off, off+n) of mr.
func sge(op string, mr *uverbs.MR, off, n int) (uverbs.SGE, error) {
	if mr == nil || off < 0 || n < 0 || off+n > mr.Len() || n > 1<<31-1 {
		l := 0
		if mr != nil {
			l = mr.Len()
		}
		return uverbs.SGE{}, fmt.Errorf("rdmacm %s: bytes [%d, %d+%d) of a %d-byte MR: %w", op, off, off, n, l, errInvalid)
	}
	return uverbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}, nil
}

func (id *ID) postQP(op string) (*uverbs.QP, error) {
	if err := id.alive(op); err != nil {
		return nil, err
	}
	qp := id.QP()
	if qp == nil {
		return nil, opError(op, id.handle, fmt.Errorf("the ID has no QP from CreateQP: %w", errInvalid))
	}
	return qp, nil
}

// PostRecv posts a receive of bytes [off, off+n) of mr (rdma_post_recv):
// to the ID's SRQ when it has one from CreateSRQ, else to its QP.
func (id *ID) PostRecv(wrID uint64, mr *uverbs.MR, off, n int) error {
	const op = "PostRecv"
	if srq := id.SRQ(); srq != nil {
		if err := id.alive(op); err != nil {
			return err
		}
		s, err := sge(op, mr, off, n)
		if err != nil {
			return err
		}
		return srq.PostRecv(&uverbs.RecvWR{WRID: wrID, SGL: []uverbs.SGE{s}})
	}
	qp, err := id.postQP(op)
	if err != nil {
		return err
	}
	s, err := sge(op, mr, off, n)
	if err != nil {
		return err
	}
	return qp.PostRecv(&uverbs.RecvWR{WRID: wrID, SGL: []uverbs.SGE{s}})
}

// PostRecvv posts a receive into the scatter/gather list sgl
// (rdma_post_recvv): to the ID's SRQ when it has one, else to its QP.
func (id *ID) PostRecvv(wrID uint64, sgl []uverbs.SGE) error {
	const op = "PostRecvv"
	if srq := id.SRQ(); srq != nil {
		if err := id.alive(op); err != nil {
			return err
		}
		return srq.PostRecv(&uverbs.RecvWR{WRID: wrID, SGL: sgl})
	}
	qp, err := id.postQP(op)
	if err != nil {
		return err
	}
	return qp.PostRecv(&uverbs.RecvWR{WRID: wrID, SGL: sgl})
}

func (id *ID) postSend(op string, wr *uverbs.SendWR, mr *uverbs.MR, off, n int) error {
	s, err := sge(op, mr, off, n)
	if err != nil {
		return err
	}
	return id.postSendv(op, wr, []uverbs.SGE{s})
}

func (id *ID) postSendv(op string, wr *uverbs.SendWR, sgl []uverbs.SGE) error {
	qp, err := id.postQP(op)
	if err != nil {
		return err
	}
	wr.SGL = sgl
	return qp.PostSend(wr)
}

// Remote names the peer's memory of an RDMA read or write: its address
// and the rkey of the region it lies in, as the peer sent them.
type Remote struct {
	Addr uint64
	RKey uint32
}

// UDDest is the destination of a datagram: the AH to the peer (or
// group) and its QP number, from a UDParam (UDParam.CreateAH and
// UDParam.QPNum). The QKey is UDPQKey.
type UDDest struct {
	AH    *uverbs.AH
	QPNum uint32
}

// PostSend sends bytes [off, off+n) of mr (rdma_post_send). flags
// usually has uverbs.SendSignaled, for a completion GetSendComp returns.
func (id *ID) PostSend(wrID uint64, mr *uverbs.MR, off, n int, flags uverbs.SendFlags) error {
	return id.postSend("PostSend", &uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRSend, Flags: flags}, mr, off, n)
}

// PostSendv sends the scatter/gather list sgl as one message
// (rdma_post_sendv).
func (id *ID) PostSendv(wrID uint64, sgl []uverbs.SGE, flags uverbs.SendFlags) error {
	return id.postSendv("PostSendv", &uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRSend, Flags: flags}, sgl)
}

// PostSendInline sends data, which need not be registered, copied into
// the send queue at once (rdma_post_send with no MR and
// IBV_SEND_INLINE): data may be reused when it returns. It must fit the
// QP's Cap().MaxInlineData.
func (id *ID) PostSendInline(wrID uint64, data []byte, flags uverbs.SendFlags) error {
	const op = "PostSendInline"
	qp, err := id.postQP(op)
	if err != nil {
		return err
	}
	if max := qp.Cap().MaxInlineData; len(data) > int(max) {
		return opError(op, id.handle, fmt.Errorf("%d bytes, the QP takes %d inline: %w", len(data), max, errInvalid))
	}
	id.ep.inlineMu.Lock()
	defer id.ep.inlineMu.Unlock()
	// A heap buffer of the ID's: its address stays put while the send
	// queue copies from it, which the caller's slice (perhaps on a
	// goroutine stack) does not promise.
	if cap(id.ep.inline) < len(data) {
		id.ep.inline = make([]byte, qp.Cap().MaxInlineData)
	}
	buf := id.ep.inline[:len(data)]
	copy(buf, data)
	var sgl []uverbs.SGE
	if len(buf) > 0 {
		sgl = []uverbs.SGE{{Addr: uint64(sys.PointerTo(buf)), Length: uint32(len(buf))}}
	}
	return qp.PostSend(&uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRSend, Flags: flags | uverbs.SendInline, SGL: sgl})
}

// PostUDSend sends bytes [off, off+n) of mr as a datagram to dest
// (rdma_post_ud_send).
func (id *ID) PostUDSend(wrID uint64, mr *uverbs.MR, off, n int, flags uverbs.SendFlags, dest UDDest) error {
	return id.postSend("PostUDSend", udWR(wrID, flags, dest), mr, off, n)
}

// PostUDSendv sends sgl as a datagram to dest.
func (id *ID) PostUDSendv(wrID uint64, sgl []uverbs.SGE, flags uverbs.SendFlags, dest UDDest) error {
	return id.postSendv("PostUDSendv", udWR(wrID, flags, dest), sgl)
}

func udWR(wrID uint64, flags uverbs.SendFlags, d UDDest) *uverbs.SendWR {
	return &uverbs.SendWR{WRID: wrID, Opcode: uverbs.WRSend, Flags: flags, AH: d.AH, RemoteQPN: d.QPNum, RemoteQKey: UDPQKey}
}

// PostWrite writes bytes [off, off+n) of mr to the peer's memory at
// remote (rdma_post_write).
func (id *ID) PostWrite(wrID uint64, mr *uverbs.MR, off, n int, flags uverbs.SendFlags, remote Remote) error {
	return id.postSend("PostWrite", rdmaWR(wrID, uverbs.WRRDMAWrite, flags, remote), mr, off, n)
}

// PostWritev writes sgl to the peer's memory at remote
// (rdma_post_writev).
func (id *ID) PostWritev(wrID uint64, sgl []uverbs.SGE, flags uverbs.SendFlags, remote Remote) error {
	return id.postSendv("PostWritev", rdmaWR(wrID, uverbs.WRRDMAWrite, flags, remote), sgl)
}

// PostRead reads the peer's memory at remote into bytes [off, off+n) of
// mr (rdma_post_read).
func (id *ID) PostRead(wrID uint64, mr *uverbs.MR, off, n int, flags uverbs.SendFlags, remote Remote) error {
	return id.postSend("PostRead", rdmaWR(wrID, uverbs.WRRDMARead, flags, remote), mr, off, n)
}

// PostReadv reads the peer's memory at remote into sgl
// (rdma_post_readv).
func (id *ID) PostReadv(wrID uint64, sgl []uverbs.SGE, flags uverbs.SendFlags, remote Remote) error {
	return id.postSendv("PostReadv", rdmaWR(wrID, uverbs.WRRDMARead, flags, remote), sgl)
}

func rdmaWR(wrID uint64, op uverbs.WROpcode, flags uverbs.SendFlags, r Remote) *uverbs.SendWR {
	return &uverbs.SendWR{WRID: wrID, Opcode: op, Flags: flags, RemoteAddr: r.Addr, RKey: r.RKey}
}

// GetSendComp waits for the next completion of the ID's send CQ
// (rdma_get_send_comp). The CQ must be one CreateQP made (it has a
// completion channel). A completion with an error status is returned
// together with that status as the error.
//
// Completions come first: when the CQ has none and the ID's channel
// reported DISCONNECTED (the peer closed the connection, or answered
// this side's Disconnect), it returns an error matching ErrDisconnected
// at once, instead of waiting for a completion that will not come. To
// see DISCONNECTED while nobody reads the ID's events, it watches the
// ID's private channel too, takes events queued there when no Next
// waits on it, and keeps them for Next, which returns them first (see
// EventChannel.Fd). On iWARP the peer's close moves the QP to ERR, which
// flushes its requests, often before DISCONNECTED arrives: a flushed
// completion's error matches ErrDisconnected there too. It returns
// ctx.Err() when ctx ends first, ErrClosed when the ID is closed, and
// ErrBusy at once when another goroutine waits for completions of the
// same CQ.
func (id *ID) GetSendComp(ctx context.Context) (uverbs.WorkCompletion, error) {
	id.mu.Lock()
	cq, ch := id.ep.sendCQ, id.ep.sendCh
	id.mu.Unlock()
	return id.getComp(ctx, "GetSendComp", &id.ep.comp.send, cq, ch)
}

// GetRecvComp waits for the next completion of the ID's receive CQ
// (rdma_get_recv_comp), as GetSendComp: a receive that the peer's close
// leaves without a message ends with an error matching ErrDisconnected.
func (id *ID) GetRecvComp(ctx context.Context) (uverbs.WorkCompletion, error) {
	id.mu.Lock()
	cq, ch := id.ep.recvCQ, id.ep.recvCh
	id.mu.Unlock()
	return id.getComp(ctx, "GetRecvComp", &id.ep.comp.recv, cq, ch)
}
