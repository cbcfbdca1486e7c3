package mlx5

import (
	"fmt"

	"github.com/purerdma/rdma/mmio"

	"github.com/purerdma/rdma/internal/sys"
)

// CQE is a decoded 64-byte completion (struct mlx5_cqe64, or struct
// mlx5_err_cqe for the error opcodes), with the ibv_wc values libmlx5
// derives from it. Which work request it completes is left to the
// provider: Requester() says SQ or receive side, WQECounter finds it
// (SQ.Complete, RQ.Complete, SRQ.Complete), QPN or SRQNUIdx names the
// queue.
type CQE struct {
	Opcode     uint8  // CQE opcode (CQEReq, CQERespSend, ..., CQEReqErr, CQERespErr)
	Status     uint8  // ibv_wc_status: WCSuccess or the syndrome's status
	WCOpcode   uint8  // ibv_wc_opcode (for errors: what the CQE says, often garbage; libmlx5 leaves it unset)
	WCFlags    uint8  // WCFlagWithImm, WCFlagWithInv, WCFlagGRH
	Syndrome   uint8  // error CQEs: the syndrome
	VendorErr  uint8  // error CQEs: vendor_err_synd
	SQOpcode   uint8  // requester CQEs: the WQE's opcode (sop_drop_qpn >> 24)
	SL         uint8  // responder: service level
	PathBits   uint8  // responder: dlid path bits (ml_path & 0x7f)
	SE         bool   // solicited event bit of op_own
	QPN        uint32 // 24 bits
	SRQNUIdx   uint32 // srqn_uidx & 0xffffff: SRQ number, or the user index with CQE version 1
	WQECounter uint16
	ByteLen    uint32 // responder and RDMA read: bytes; atomics: 8
	Imm        uint32 // host order: immediate data (WCFlagWithImm) or invalidated rkey (WCFlagWithInv)
	SrcQP      uint32 // responder: source QP (UD)
	SLID       uint16
	PKeyIndex  uint16
	Timestamp  uint64
	Inline     uint8 // op_own's inline-scatter bits (MLX5_INLINE_SCATTER_32/64): data is in the CQE
}

// Requester says whether the completion is for a send queue work request.
func (c *CQE) Requester() bool { return c.Opcode == CQEReq || c.Opcode == CQEReqErr }

// SyndromeStatus maps an error CQE syndrome to its ibv_wc_status as cq.c
// mlx5_handle_error_cqe does; unknown syndromes are IBV_WC_GENERAL_ERR.
func SyndromeStatus(synd uint8) uint8 {
	switch synd {
	case SyndLocalLength:
		return WCLocLenErr
	case SyndLocalQPOp:
		return WCLocQPOpErr
	case SyndLocalProt:
		return WCLocProtErr
	case SyndWRFlush:
		return WCWRFlushErr
	case SyndMWBind:
		return WCMWBindErr
	case SyndBadResp:
		return WCBadRespErr
	case SyndLocalAccess:
		return WCLocAccessErr
	case SyndRemoteInvalReq:
		return WCRemInvReqErr
	case SyndRemoteAccess:
		return WCRemAccessErr
	case SyndRemoteOp:
		return WCRemOpErr
	case SyndTransportRetry:
		return WCRetryExcErr
	case SyndRNRRetry:
		return WCRNRRetryExcErr
	case SyndRemoteAborted:
		return WCRemAbortErr
	}
	return WCGeneralErr
}

// DecodeCQE decodes the 64-byte CQE at the start of b into c. It reports
// false, leaving c partly written, for a CQE a CQ of RC/UC/UD QPs and SRQs
// does not produce (resize, no-packet, signature error, invalid, an
// unknown opcode, or compressed CQE formats) and for b shorter than 64
// bytes; it never panics. Ownership is the caller's business (CQ.Poll).
func DecodeCQE(b []byte, c *CQE) bool {
	if len(b) < CQESize {
		return false
	}
	b = b[:CQESize]
	opOwn := b[63]
	*c = CQE{
		Opcode:     opOwn >> 4,
		SE:         opOwn&2 != 0,
		QPN:        be.Uint32(b[56:]) & 0xffffff,
		SRQNUIdx:   be.Uint32(b[32:]) & 0xffffff,
		WQECounter: be.Uint16(b[60:]),
		Inline:     opOwn & (inlineScatter32 | inlineScatter64),
	}
	if (opOwn>>2)&3 != 0 {
		return false // compressed or other CQE formats: never asked for
	}
	switch c.Opcode {
	case CQEReq:
		c.SQOpcode = b[56]
		c.Timestamp = be.Uint64(b[48:])
		c.WCOpcode, c.WCFlags, c.ByteLen = reqCompletion((*[CQESize]byte)(b))
		return true
	case CQERespWRImm, CQERespSend, CQERespSendImm, CQERespSendInv:
		c.ByteLen = be.Uint32(b[44:])
		c.Timestamp = be.Uint64(b[48:])
		imm := be.Uint32(b[36:])
		switch c.Opcode {
		case CQERespWRImm:
			c.WCOpcode, c.WCFlags, c.Imm = WCOpRecvRDMAWImm, WCFlagWithImm, imm
		case CQERespSend:
			c.WCOpcode = WCOpRecv
		case CQERespSendImm:
			c.WCOpcode, c.WCFlags, c.Imm = WCOpRecv, WCFlagWithImm, imm
		case CQERespSendInv:
			c.WCOpcode, c.WCFlags, c.Imm = WCOpRecv, WCFlagWithInv, imm
		}
		flagsRQPN := be.Uint32(b[24:])
		c.SLID = be.Uint16(b[22:])
		c.SL = uint8(flagsRQPN>>24) & 0xf
		c.SrcQP = flagsRQPN & 0xffffff
		c.PathBits = b[17] & 0x7f
		if (flagsRQPN>>28)&3 != 0 {
			c.WCFlags |= WCFlagGRH
		}
		c.PKeyIndex = uint16(imm)
		return true
	case CQEReqErr, CQERespErr:
		c.Syndrome = b[55]
		c.VendorErr = b[54]
		c.Status = SyndromeStatus(c.Syndrome)
		if c.Opcode == CQEReqErr {
			c.SQOpcode = b[56]
		}
		c.WCOpcode = wcOpUnknown
		return true
	}
	return false
}

// CQ is a completion queue: a ring of 64- or 128-byte CQEs (for 128-byte
// CQEs the 64-byte CQE is the second half), the CQ's 8-byte doorbell
// record (consumer index, arm word) and, for arming, the UAR page's CQ
// doorbell register. Not safe for concurrent use (libmlx5 holds cq.lock).
type CQ struct {
	buf     []byte
	ncqe    uint32
	cqeSize int
	cqn     uint32
	dbrec   *[DBRecSize]byte
	ciRec   *uint32 // the doorbell record's consumer index word, for updateCIDev
	uar     []byte  // the UAR page (CQDoorbell+8 bytes at least), nil: cannot arm
	w       Writer
	ci      uint32 // consumer index, libmlx5's cons_index
	// cqes views buf as 64-byte halves, index masked to the ring: CQE n
	// is half n<<half | half (half is 1 for 128-byte CQEs, whose last 64
	// bytes are the CQE, 0 for 64-byte ones).
	cqes  mmio.Ring[[CQESize]byte]
	half  uint32
	dev   bool // w is Device{}: UpdateCI calls mmio directly
	armSN uint32
}

// CQConfig describes a completion queue to NewCQ.
type CQConfig struct {
	Buf    []byte   // Sizing.Bytes bytes, prepared with InitCQBuffer before CREATE_CQ
	Sizing CQSizing // from CQSize
	CQN    uint32   // from CREATE_CQ's response
	DBRec  []byte   // the CQ's 8-byte doorbell record
	UAR    []byte   // the UAR page used for arming (the CQ's uar_page_index), or nil
	Writer Writer   // Device{} outside tests
}

// InitCQBuffer marks every CQE of a fresh CQ buffer invalid and owned by
// the hardware (op_own = MLX5_CQE_INVALID << 4, cq.c mlx5_alloc_cq_buf).
func InitCQBuffer(buf []byte, s CQSizing) {
	for i := range s.NCQE {
		buf[i*s.CQESize+s.CQESize-1] = cqeOpcodeInvalidByte
	}
}

// NewCQ returns the CQ c describes, with consumer index 0.
func NewCQ(c CQConfig) (*CQ, error) {
	s := c.Sizing
	if s.NCQE < 2 || s.NCQE&(s.NCQE-1) != 0 || s.NCQE > 1<<24 || (s.CQESize != 64 && s.CQESize != 128) || len(c.Buf) < s.NCQE*s.CQESize {
		return nil, invalid("CQ sizing %+v in %d bytes", s, len(c.Buf))
	}
	if len(c.DBRec) < DBRecSize || c.Writer == nil || (c.UAR != nil && len(c.UAR) < CQDoorbell+8) {
		return nil, invalid("CQ without doorbell record or writer, or a short UAR page")
	}
	half := uint32(s.CQESize/CQESize - 1)
	cqes, err := mmio.NewRing[[CQESize]byte](c.Buf[:s.NCQE*s.CQESize], uint64(s.NCQE)<<half, CQESize)
	if err != nil {
		return nil, invalid("CQ ring: %v", err)
	}
	_, dev := c.Writer.(Device)
	return &CQ{cqes: cqes, half: half, dev: dev, buf: c.Buf[:s.NCQE*s.CQESize], ncqe: uint32(s.NCQE), cqeSize: s.CQESize, cqn: c.CQN,
		dbrec: (*[DBRecSize]byte)(c.DBRec), ciRec: mmio.At[uint32](c.DBRec, CQSetCIDBR), uar: c.UAR, w: c.Writer}, nil
}

// ConsumerIndex is the count of CQEs consumed (24 bits reach the device).
func (q *CQ) ConsumerIndex() uint32 { return q.ci }

// cqe64 returns the 64-byte CQE of slot n.
func (q *CQ) cqe64(n uint32) []byte {
	off := int(n&(q.ncqe-1))*q.cqeSize + q.cqeSize - CQESize
	return q.buf[off : off+CQESize]
}

// Poll decodes the next CQE into c if software owns it and advances the
// consumer index; false when the CQ is empty. A CQE is software's when
// its opcode is not MLX5_CQE_INVALID and its owner bit equals the wrap
// parity of the consumer index, (ci & ncqe) != 0 (cq.c get_sw_cqe); a read
// barrier follows that check, before the rest is read. ok reports whether
// the CQE decoded (DecodeCQE); an undecodable one is consumed too, so a
// corrupt entry cannot wedge the queue. Poll does not write the doorbell
// record: call UpdateCI after a batch.
func (q *CQ) Poll(c *CQE) (got, ok bool) {
	if !q.owned(q.ci) {
		return false, false
	}
	readBarrier()
	b := q.cqe64(q.ci)
	ok = DecodeCQE(b, c)
	q.ci++
	return true, ok
}

// UpdateCI writes the consumer index to the doorbell record (cq.c
// update_cons_index), telling the device the CQEs before it are free.
func (q *CQ) UpdateCI() {
	if q.dev {
		q.updateCIDev()
		return
	}
	q.updateCIWriter()
}

// updateCIDev is UpdateCI on the device, which a caller that tests dev
// itself inlines.
func (q *CQ) updateCIDev() { mmio.StoreUint32BEAt(q.ciRec, q.ci&0xffffff) }

// updateCIWriter is UpdateCI through the Writer (tests), apart (and not
// inlined into it) so that UpdateCI is small enough to be inlined.
//
//go:noinline
func (q *CQ) updateCIWriter() { q.w.StoreUint32BE(q.dbrec[:], CQSetCIDBR, q.ci&0xffffff) }

// Arm requests a completion event for the next CQE (solicited false) or
// the next solicited one, as cq.c mlx5_arm_cq: the arm word sn<<28 | cmd
// | ci goes to the doorbell record, then a write barrier, one 8-byte store
// of (word << 32 | cqn) to the UAR's CQ doorbell, and a write barrier.
func (q *CQ) Arm(solicited bool) error {
	if q.uar == nil {
		return invalid("CQ %d has no UAR to arm with", q.cqn)
	}
	cmd := uint32(armNext)
	if solicited {
		cmd = armSolicited
	}
	word := (q.armSN&3)<<28 | cmd | q.ci&0xffffff
	q.w.StoreUint32BE(q.dbrec[:], CQArmDBR, word)
	q.w.WriteBarrier()
	q.w.StoreUint64BE(q.uar, CQDoorbell, uint64(word)<<32|uint64(q.cqn))
	q.w.WriteBarrier()
	return nil
}

// Event counts a completion event read from the completion channel
// (libmlx5's mlx5_cq_event: arm_sn++), so the next Arm uses the next
// sequence number.
func (q *CQ) Event() { q.armSN++ }

// Clean removes from the CQ every CQE, not yet polled, of the QP id names
// (its QPN, or with byUIdx its user index, for CQE version 1), as cq.c
// __mlx5_cq_clean does when that QP goes to RESET or is destroyed: the
// later CQEs of other QPs move down over them, keeping their slots'
// owner bits, the consumer index advances past the freed slots and is
// written to the doorbell record. Receive CQEs of that QP on srq (non-nil
// when it receives from one) free their SRQ WQEs. It returns how many
// CQEs it removed. The QP must already be in RESET, so the device adds
// none for it meanwhile.
func (q *CQ) Clean(id uint32, byUIdx bool, srq *SRQ) int {
	n := uint32(q.Pending())
	if n == 0 {
		return 0
	}
	readBarrier()
	freed := uint32(0)
	for i := n; i > 0; i-- {
		p := q.ci + i - 1
		c := q.cqe64(p)
		op := c[63] >> 4
		var mine bool
		if byUIdx {
			mine = be.Uint32(c[32:])&0xffffff == id
		} else {
			mine = be.Uint32(c[56:])&0xffffff == id
		}
		if mine {
			if srq != nil && (op == CQERespWRImm || op == CQERespSend || op == CQERespSendImm || op == CQERespSendInv || op == CQERespErr) {
				srq.Complete(be.Uint16(c[60:]))
			}
			freed++
			continue
		}
		if freed > 0 {
			src := q.slot(p)
			dst := q.slot(p + freed)
			owner := dst[len(dst)-1] & cqeOwnerMask
			copy(dst, src)
			dst[len(dst)-1] = dst[len(dst)-1]&^cqeOwnerMask | owner
		}
	}
	if freed > 0 {
		q.ci += freed
		q.UpdateCI()
	}
	return int(freed)
}

// Pending counts the CQEs software owns from the consumer index on: the
// completions a Poll would return now (at most a full ring).
func (q *CQ) Pending() int {
	n := uint32(0)
	for n < q.ncqe && q.owned(q.ci+n) {
		n++
	}
	return int(n)
}

// ErrResizeLost is returned by Resize when the device resized the CQ but
// its old buffer did not hold what a resize leaves there, so completions
// written before the resize may be lost. It matches EIO, as the device's
// state contradicts what it must be.
var ErrResizeLost = fmt.Errorf("mlx5: CQ resized, completions may be lost: %w", sys.ErrIO)

// Resize moves the CQ to buf, a fresh buffer of sizing s prepared with
// InitCQBuffer, after RESIZE_CQ named buf to the device (cq.c
// mlx5_cq_resize_copy_cqes). The device ends the old buffer with a
// resize CQE: the completions before it, not yet polled, are copied to
// the slots after the consumer index in buf, with the owner bits of
// their place there; the resize CQE is consumed, and the doorbell record
// says so. It returns how many completions moved.
//
// The device no longer writes the old buffer, so the CQ takes buf even
// when the old one is not as it should be: no resize CQE where software
// owns the ring, or more completions than buf holds. Those return
// ErrResizeLost; a size or CQE size buf does not match returns
// ErrInvalid and changes nothing.
func (q *CQ) Resize(buf []byte, s CQSizing) (int, error) {
	if s.NCQE < 2 || s.NCQE&(s.NCQE-1) != 0 || s.NCQE > 1<<24 || s.CQESize != q.cqeSize || len(buf) < s.NCQE*s.CQESize {
		return 0, invalid("CQ resize to sizing %+v in %d bytes (CQEs of %d bytes)", s, len(buf), q.cqeSize)
	}
	cqes, rerr := mmio.NewRing[[CQESize]byte](buf[:s.NCQE*s.CQESize], uint64(s.NCQE)<<q.half, CQESize)
	if rerr != nil {
		return 0, invalid("CQ ring: %v", rerr)
	}
	nq := *q
	nq.buf, nq.ncqe, nq.cqes = buf[:s.NCQE*s.CQESize], uint32(s.NCQE), cqes
	moved, err := 0, error(nil)
	i := q.ci
	for {
		if !q.owned(i) {
			err = fmt.Errorf("%w: the old buffer's CQE %d is the device's, not a resize CQE", ErrResizeLost, i-q.ci)
			break
		}
		readBarrier()
		if q.cqe64(i)[63]>>4 == CQEResizeCQ {
			break
		}
		if moved == s.NCQE-1 {
			err = fmt.Errorf("%w: more than the %d completions the new buffer holds", ErrResizeLost, s.NCQE-1)
			break
		}
		if i-q.ci == q.ncqe-1 {
			err = fmt.Errorf("%w: no resize CQE in the old buffer", ErrResizeLost)
			break
		}
		dst := nq.slot(i + 1)
		copy(dst, q.slot(i))
		owner := uint8(0)
		if (i+1)&nq.ncqe != 0 {
			owner = cqeOwnerMask
		}
		dst[len(dst)-1] = dst[len(dst)-1]&^cqeOwnerMask | owner
		moved++
		i++
	}
	q.buf, q.ncqe, q.cqes = nq.buf, nq.ncqe, nq.cqes
	if err == nil {
		q.ci++ // the resize CQE
	}
	q.UpdateCI()
	return moved, err
}

// reqCompletion is what a requester CQE b says of its work request
// (cq.c handle_good_req): the ibv_wc opcode, flags and byte count.
func reqCompletion(b *[CQESize]byte) (wcOpcode, wcFlags uint8, byteLen uint32) {
	switch b[56] {
	case OpRDMAWriteImm:
		return WCOpRDMAWrite, WCFlagWithImm, 0
	case OpRDMAWrite:
		return WCOpRDMAWrite, 0, 0
	case OpSendImm:
		return WCOpSend, WCFlagWithImm, 0
	case OpSend, OpSendInval:
		return WCOpSend, 0, 0
	case OpRDMARead:
		return WCOpRDMARead, 0, be.Uint32(b[44:])
	case OpAtomicCS:
		return WCOpCompSwap, 0, 8
	case OpAtomicFA:
		return WCOpFetchAdd, 0, 8
	}
	return wcOpUnknown, 0, 0
}

// peek returns the CQE at the consumer index (the last 64 bytes of its
// slot) if software owns it (cq.c get_sw_cqe), nil if not. The caller
// orders its loads (an acquire load of its last word with
// mmio.AcquireWord, or readBarrier) before reading more than its op_own
// byte; Next consumes it.
func (q *CQ) peek() *[CQESize]byte {
	n := q.ci
	b := q.cqes.Slot(n<<(q.half&31) | q.half) // &31: no shift-width test
	if opOwn := b[63]; opOwn>>4 != CQEInvalid && uint32(opOwn&cqeOwnerMask)*q.ncqe == n&q.ncqe {
		return b
	}
	return nil
}

// Next consumes the CQE Peek returned.
func (q *CQ) Next() { q.ci++ }

// owned says whether software owns CQE n (cq.c get_sw_cqe).
func (q *CQ) owned(n uint32) bool {
	opOwn := q.cqe64(n)[63]
	return opOwn>>4 != CQEInvalid && (opOwn&cqeOwnerMask != 0) == (n&q.ncqe != 0)
}

// slot returns the whole CQE slot n (64 or 128 bytes).
func (q *CQ) slot(n uint32) []byte {
	off := int(n&(q.ncqe-1)) * q.cqeSize
	return q.buf[off : off+q.cqeSize]
}
