package oracle

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/purerdma/rdma/internal/abi"
)

// mem is the memory of the process that runs a provider, as the device
// sees it: in this process (the Go provider) or over the shim's socket
// (libmlx5).
type mem interface {
	read(addr uint64, n int) []byte
	write(addr uint64, b []byte)
	newFD() (int, error)
}

var le = binary.LittleEndian
var be = binary.BigEndian

// The scripted device: a ConnectX-5 class mlx5_ib (numbers below), one
// InfiniBand port, dynamic UARs, CQE version 1.
const (
	bfRegSize  = 512
	bfOffset   = 0x800 // MLX5_BF_OFFSET
	pageSize   = 4096
	driverMLX5 = 1 // RDMA_DRIVER_MLX5
)

type cqState struct {
	name   string
	handle uint32
	cqn    uint32
	buf    uint64
	db     uint64
	ncqe   int
	cqeSz  int
	pi     int // CQEs the device wrote
	lastDB [8]byte
}

type qpState struct {
	name     string
	handle   uint32
	qpn      uint32
	typ      uint8
	buf, db  uint64
	sqCount  int // WQEBBs
	rqCount  int
	rqShift  int
	uidx     uint32
	uarPage  uint32
	sqSeen   uint16 // send counter at the last snapshot
	sqScan   uint16 // send counter at the last "wqe=last" step
	rqSeen   uint16
	lastDB   [8]byte
	srq      *srqState
	sendCQ   *cqState
	recvCQ   *cqState
	sqOpcode map[uint16]byte // WQE counter -> opcode, for requester CQEs
}

type srqState struct {
	maxWR, maxSGE uint32
	name          string
	handle        uint32
	srqn          uint32
	buf, db       uint64
	size          int
	last          []byte
	lastDB        [4]byte
}

type uarState struct {
	handle uint32
	pageID uint32
	typ    uint32
	offset uint64
	addr   uint64 // mapping, 0 until mapped
	length int
}

// device answers the commands of one context and records what the
// provider tells it, normalised (see normalisations).
type device struct {
	eth     bool // the port is RoCE: link layer Ethernet, RoCE v1 and v2 GIDs
	m       mem
	rec     []string
	handles uint32
	cqs     []*cqState
	qps     []*qpState
	srqs    []*srqState
	uars    []*uarState
	mmaps   map[uint64]int // address -> length of every device mapping
	pdn     uint32
	keys    uint32
	mrs     [][2]uint64 // start and length of each registered region
	ahs     int
}

func newDevice(m mem) *device {
	return &device{m: m, handles: 0x10, mmaps: map[uint64]int{}, keys: 0x1000}
}

func (d *device) record(format string, args ...any) {
	d.rec = append(d.rec, fmt.Sprintf(format, args...))
}

func (d *device) handle() uint32 { d.handles++; return d.handles }

// ---- ioctl ----

type attr struct {
	at    uint64 // address of the attribute in the caller's array
	id    uint16
	len   uint16
	flags uint16
	elem  uint16
	data  uint64
}

type call struct {
	d      *device
	object uint16
	method uint16
	attrs  []attr
}

func (c *call) find(id uint16) *attr {
	for i := range c.attrs {
		if c.attrs[i].id == id {
			return &c.attrs[i]
		}
	}
	return nil
}

// in returns an input attribute's bytes (inline up to 8 bytes).
func (c *call) in(id uint16) []byte {
	a := c.find(id)
	if a == nil {
		return nil
	}
	if a.len <= 8 {
		var b [8]byte
		le.PutUint64(b[:], a.data)
		return b[:a.len]
	}
	return c.d.m.read(a.data, int(a.len))
}

func (c *call) inUint(id uint16) uint64 {
	b := c.in(id)
	var v [8]byte
	copy(v[:], b)
	return le.Uint64(v[:])
}

func (c *call) has(id uint16) bool { return c.find(id) != nil }

// out writes an output attribute (truncated to its length) and marks it
// valid.
func (c *call) out(id uint16, b []byte) {
	a := c.find(id)
	if a == nil {
		return
	}
	if len(b) > int(a.len) {
		b = b[:a.len]
	}
	c.d.m.write(a.data, b)
	var f [4]byte
	le.PutUint16(f[0:], uint16(len(b)))
	le.PutUint16(f[2:], a.flags|abi.UVERBS_ATTR_F_VALID_OUTPUT)
	c.d.m.write(a.at+2, f[:])
}

func (c *call) outUint(id uint16, v uint64, size int) {
	var b [8]byte
	le.PutUint64(b[:], v)
	c.out(id, b[:size])
}

// newObj writes a new object's handle (or fd) into its attribute.
func (c *call) newObj(id uint16, v uint64) {
	a := c.find(id)
	if a == nil {
		return
	}
	var b [8]byte
	le.PutUint64(b[:], v)
	c.d.m.write(a.at+8, b[:])
}

func (d *device) ioctl(arg uint64) syscall.Errno {
	h := d.m.read(arg, 24)
	c := &call{d: d, object: le.Uint16(h[2:]), method: le.Uint16(h[4:])}
	n := int(le.Uint16(h[6:]))
	raw := d.m.read(arg+24, 16*n)
	for i := range n {
		a := raw[16*i:]
		c.attrs = append(c.attrs, attr{at: arg + 24 + uint64(16*i), id: le.Uint16(a), len: le.Uint16(a[2:]),
			flags: le.Uint16(a[4:]), elem: le.Uint16(a[6:]), data: le.Uint64(a[8:])})
	}
	switch {
	case c.object == abi.UVERBS_OBJECT_DEVICE && c.method == abi.UVERBS_METHOD_GET_CONTEXT:
		return d.getContext(c)
	case c.object == abi.UVERBS_OBJECT_DEVICE && c.method == abi.UVERBS_METHOD_QUERY_PORT:
		c.out(abi.UVERBS_ATTR_QUERY_PORT_RESP, d.portAttr())
		return 0
	case c.object == abi.UVERBS_OBJECT_DEVICE && c.method == abi.UVERBS_METHOD_QUERY_GID_ENTRY:
		e, ok := d.gid(int(c.inUint(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)))
		if !ok {
			return syscall.ENODATA
		}
		c.out(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, abi.Bytes(&e))
		return 0
	case c.object == abi.UVERBS_OBJECT_DEVICE && c.method == abi.UVERBS_METHOD_QUERY_GID_TABLE:
		var b []byte
		n := 0
		for i := range 4 {
			if e, ok := d.gid(i); ok {
				b = append(b, abi.Bytes(&e)...)
				n++
			}
		}
		c.out(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, b)
		c.outUint(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, uint64(n), 8)
		return 0
	case c.object == abi.UVERBS_OBJECT_ASYNC_EVENT && c.method == abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC:
		fd, err := d.m.newFD()
		if err != nil {
			return syscall.EMFILE
		}
		c.newObj(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(fd))
		return 0
	case c.object == abi.MLX5_IB_OBJECT_UAR && c.method == abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC:
		return d.uarAlloc(c)
	case c.object == abi.MLX5_IB_OBJECT_UAR && c.method == abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY:
		return 0
	case c.object == abi.UVERBS_OBJECT_CQ && c.method == abi.UVERBS_METHOD_CQ_CREATE:
		return d.createCQ(c)
	case c.object == abi.UVERBS_OBJECT_QP && c.method == abi.UVERBS_METHOD_QP_CREATE:
		return d.createQP(c)
	case c.object == abi.UVERBS_OBJECT_SRQ && c.method == abi.UVERBS_METHOD_SRQ_CREATE:
		return d.createSRQ(c)
	case c.method == 1 && (c.object == abi.UVERBS_OBJECT_CQ || c.object == abi.UVERBS_OBJECT_QP || c.object == abi.UVERBS_OBJECT_SRQ),
		c.object == abi.UVERBS_OBJECT_PD || c.object == abi.UVERBS_OBJECT_MR || c.object == abi.UVERBS_OBJECT_AH:
		// destroys: the responses (events reported) stay 0
		for _, a := range c.attrs {
			if a.id != 0 && a.len > 0 {
				c.out(a.id, make([]byte, a.len))
			}
		}
		return 0
	}
	// Everything else has a write() form, which libibverbs falls back to.
	d.record("ioctl object %#x method %#x: not scripted", c.object, c.method)
	return syscall.EPROTONOSUPPORT
}

func (d *device) getContext(c *call) syscall.Errno {
	uhw := c.in(abi.UVERBS_ATTR_UHW_IN)
	var req abi.MLX5AllocUContextReqV2
	copy(abi.Bytes(&req), uhw)
	if req.Flags&abi.MLX5_IB_ALLOC_UCTX_DEVX != 0 {
		// DEVX needs CAP_NET_RAW; the kernel refuses it (EPERM), and
		// libmlx5 asks again without it.
		d.record("GET_CONTEXT with DEVX refused")
		return syscall.EPERM
	}
	d.record("GET_CONTEXT driver data %x", uhw)
	r := contextResp()
	c.out(abi.UVERBS_ATTR_UHW_OUT, abi.Bytes(&r))
	c.outUint(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 8, 4)
	c.outUint(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, 1, 8) // IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS
	return 0
}

// contextResp is GET_CONTEXT's driver response of a ConnectX-5 on a
// kernel with dynamic UARs (mlx5_ib_alloc_ucontext).
func contextResp() abi.MLX5AllocUContextResp {
	return abi.MLX5AllocUContextResp{
		QPTabSize: 1 << 18, BfRegSize: bfRegSize, TotBfregs: 0, CacheLineSize: 64,
		MaxSQDescSz: 1024, MaxRQDescSz: 512, MaxSendWqebb: 32768, MaxRecvWR: 32768, MaxSRQRecvWR: 32767,
		NumPorts: 1, CompMask: abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY,
		ResponseLength: uint32(abi.Size[abi.MLX5AllocUContextResp]()), CQEVersion: 1, CmdsSuppUhw: 2,
		EthMinInline: 0, LogUARSize: 12, NumUarsPerPage: 1, NumDynBfregs: 2048, DumpFillMkey: 0x5f,
	}
}

func (d *device) portAttr() []byte {
	p := abi.QueryPortResp{PortCapFlags: 0x2651e848, MaxMsgSz: 1 << 30, GIDTblLen: 128, PKeyTblLen: 128,
		LID: 3, SMLID: 1, State: 4, MaxMTU: 5, ActiveMTU: 5, LMC: 0, MaxVLNum: 4, SubnetTimeout: 18,
		ActiveWidth: 2, ActiveSpeed: 32, PhysState: 5, LinkLayer: 1}
	if d.eth {
		// RoCE: no LID or subnet manager, GRH required
		p.PortCapFlags, p.LID, p.SMLID, p.LinkLayer, p.Flags = 0x04010000, 0, 0, 2, 1
	}
	return abi.Bytes(&p)
}

// gid is the port's GID table: on RoCE the link-local GID as RoCE v1
// (index 0) and v2 (1), and an IPv4-mapped address as v1 (2) and v2 (3);
// on InfiniBand one GID.
func (d *device) gid(i int) (abi.GIDEntry, bool) {
	ll := [16]byte{0xfe, 0x80, 6: 0, 8: 0x02, 9: 0x11, 10: 0x22, 11: 0xff, 12: 0xfe, 13: 0x33, 14: 0x44, 15: 0x55}
	v4 := [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 0, 15: 1}
	var g [16]byte
	e := abi.GIDEntry{GIDIndex: uint32(i), PortNum: 1}
	switch {
	case !d.eth && i == 0:
		g = ll
	case d.eth && i < 4:
		g, e.GIDType, e.NetdevIfindex = ll, 1+uint32(i%2), 2 // IB_UVERBS_GID_TYPE_ROCE_V1, _V2
		if i >= 2 {
			g = v4
		}
	default:
		return e, false
	}
	e.GID[0], e.GID[1] = le.Uint64(g[:8]), le.Uint64(g[8:])
	return e, true
}

func deviceAttr() abi.QueryDeviceResp {
	return abi.QueryDeviceResp{
		FWVer: 16<<32 | 35<<16 | 1012, NodeGUID: 0x0200000000000001, SysImageGUID: 0x0200000000000001,
		MaxMRSize: ^uint64(0), PageSizeCap: ^uint64(0xfff), VendorID: 0x02c9, VendorPartID: 4119, HWVer: 0,
		MaxQP: 1 << 18, MaxQPWR: 32768, DeviceCapFlags: 0xe5721c36, MaxSGE: 30, MaxSGERD: 30,
		MaxCQ: 1 << 24, MaxCQE: 1<<22 - 1, MaxMR: 1 << 24, MaxPD: 1 << 24, MaxQPRDAtom: 16,
		MaxResRDAtom: 1 << 22, MaxQPInitRDAtom: 16, AtomicCap: 1, MaxMW: 1 << 24, MaxMcastGrp: 1 << 21,
		MaxMcastQPAttach: 240, MaxTotalMcastQPAttach: 503316480, MaxAH: 0x7fffffff, MaxSRQ: 1 << 23,
		MaxSRQWR: 32767, MaxSRQSGE: 31, MaxPKeys: 128, LocalCAAckDelay: 16, PhysPortCnt: 1,
	}
}

func (d *device) uarAlloc(c *call) syscall.Errno {
	typ := uint32(c.inUint(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE))
	u := &uarState{handle: d.handle(), pageID: uint32(len(d.uars)) + 100, typ: typ}
	// MLX5_IB_MMAP_ALLOC_WC's extended index: (idx & 0xff) | ((idx >> 8) << 16), command in bits 8-15
	idx := uint64(u.pageID)
	u.offset = ((idx & 0xff) | (abi.MLX5_IB_MMAP_ALLOC_WC << 8) | (idx>>8)<<16) * pageSize
	d.uars = append(d.uars, u)
	d.record("UAR_OBJ_ALLOC type %d", typ)
	c.newObj(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, uint64(u.handle))
	c.outUint(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, u.offset, 8)
	c.outUint(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, pageSize, 4)
	c.outUint(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, uint64(u.pageID), 4)
	return 0
}

// norm replaces an address in driver data by what matters of it: its
// offset in its page (the doorbell record's line).
func normAddr(b []byte, off int, what string) string {
	a := le.Uint64(b[off:])
	return fmt.Sprintf("%s@page+%#x", what, a&(pageSize-1))
}

func (d *device) createCQ(c *call) syscall.Errno {
	uhw := c.in(abi.UVERBS_ATTR_UHW_IN)
	var req abi.MLX5CreateCQ
	copy(abi.Bytes(&req), uhw)
	cqe := int(c.inUint(abi.UVERBS_ATTR_CREATE_CQ_CQE))
	cq := &cqState{name: fmt.Sprintf("cq%d", len(d.cqs)), handle: d.handle(), cqn: 0x400 + uint32(len(d.cqs)),
		buf: req.BufAddr, db: req.DbAddr, ncqe: cqe + 1, cqeSz: int(req.CQESize)}
	// The driver data without its two addresses, which differ run to run.
	z := append([]byte(nil), uhw...)
	clear(z[0:16])
	d.record("CREATE_CQ %s cqe %d comp_vector %d %s %s driver data %x", cq.name, cqe,
		c.inUint(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR), normAddr(uhw, 0, "buf"), normAddr(uhw, 8, "db"), z)
	d.record("%s UAR %s", cq.name, d.uarName(uint32(req.UARPageIndex)))
	d.cqs = append(d.cqs, cq)
	c.newObj(abi.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(cq.handle))
	c.outUint(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, uint64(cqe), 4)
	resp := abi.MLX5CreateCQResp{CQN: cq.cqn}
	c.out(abi.UVERBS_ATTR_UHW_OUT, abi.Bytes(&resp))
	return 0
}

// uarName names a UAR page by the order of allocation, and its type.
func (d *device) uarName(pageID uint32) string {
	for i, u := range d.uars {
		if u.pageID == pageID {
			return fmt.Sprintf("uar%d(type %d)", i, u.typ)
		}
	}
	return fmt.Sprintf("unknown page %d", pageID)
}

func (d *device) cqByHandle(h uint32) *cqState {
	for _, c := range d.cqs {
		if c.handle == h {
			return c
		}
	}
	return nil
}

func (d *device) createQP(c *call) syscall.Errno {
	uhw := c.in(abi.UVERBS_ATTR_UHW_IN)
	var req abi.MLX5CreateQP
	copy(abi.Bytes(&req), uhw)
	var capb abi.QPCap
	copy(abi.Bytes(&capb), c.in(abi.UVERBS_ATTR_CREATE_QP_CAP))
	typ := uint8(c.inUint(abi.UVERBS_ATTR_CREATE_QP_TYPE))
	q := &qpState{name: fmt.Sprintf("qp%d", len(d.qps)), handle: d.handle(), qpn: 0x1000 + uint32(len(d.qps)), typ: typ,
		buf: req.BufAddr, db: req.DbAddr, sqCount: int(req.SQWQECount), rqCount: int(req.RQWQECount),
		rqShift: int(req.RQWQEShift), uidx: req.Uidx, uarPage: req.BfregIndex,
		sqOpcode: map[uint16]byte{}}
	q.sendCQ = d.cqByHandle(uint32(c.inUint(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)))
	q.recvCQ = d.cqByHandle(uint32(c.inUint(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)))
	if c.has(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE) {
		h := uint32(c.inUint(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE))
		for _, s := range d.srqs {
			if s.handle == h {
				q.srq = s
			}
		}
	}
	z := append([]byte(nil), uhw...)
	clear(z[0:16])
	clear(z[36:40]) // the UAR page, named on the next line
	d.record("CREATE_QP %s type %d cap %+v flags %#x %s %s driver data %x", q.name, typ, capb,
		c.inUint(abi.UVERBS_ATTR_CREATE_QP_FLAGS), normAddr(uhw, 0, "buf"), normAddr(uhw, 8, "db"), z)
	d.record("%s UAR %s", q.name, d.uarName(req.BfregIndex))
	d.qps = append(d.qps, q)
	c.newObj(abi.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(q.handle))
	c.out(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, abi.Bytes(&capb))
	c.outUint(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, uint64(q.qpn), 4)
	resp := abi.MLX5CreateQPResp{BfregIndex: req.BfregIndex}
	c.out(abi.UVERBS_ATTR_UHW_OUT, abi.Bytes(&resp))
	return 0
}

func (d *device) createSRQ(c *call) syscall.Errno {
	uhw := c.in(abi.UVERBS_ATTR_UHW_IN)
	var req abi.MLX5CreateSRQ
	copy(abi.Bytes(&req), uhw)
	maxWR := c.inUint(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR)
	maxSGE := c.inUint(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE)
	s := &srqState{name: fmt.Sprintf("srq%d", len(d.srqs)), handle: d.handle(), srqn: 0x800 + uint32(len(d.srqs)),
		buf: req.BufAddr, db: req.DbAddr}
	// The kernel's WQE size: roundup_pow_of_two(16 + 16*max_sge), at least 32.
	wqe := 32
	for wqe < 16+16*int(maxSGE) {
		wqe *= 2
	}
	s.size = wqe * int(maxWR+1)
	s.maxWR, s.maxSGE = uint32(maxWR), uint32(maxSGE)
	z := append([]byte(nil), uhw...)
	clear(z[0:16])
	d.record("CREATE_SRQ %s max_wr %d max_sge %d %s %s driver data %x", s.name, maxWR, maxSGE,
		normAddr(uhw, 0, "buf"), normAddr(uhw, 8, "db"), z)
	s.last = d.m.read(s.buf, s.size)
	d.srqs = append(d.srqs, s)
	c.newObj(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(s.handle))
	c.outUint(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, maxWR, 4)
	c.outUint(abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, maxSGE, 4)
	c.outUint(abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, uint64(s.srqn), 4)
	resp := abi.MLX5CreateSRQResp{SRQN: s.srqn}
	c.out(abi.UVERBS_ATTR_UHW_OUT, abi.Bytes(&resp))
	return 0
}

// ---- write() commands ----

func (d *device) writeCmd(b []byte) syscall.Errno {
	if len(b) < 8 {
		return syscall.EINVAL
	}
	cmd := le.Uint32(b)
	if cmd&abi.IB_USER_VERBS_CMD_FLAG_EXTENDED != 0 {
		return d.exCmd(cmd&abi.IB_USER_VERBS_CMD_COMMAND_MASK, 8*int(le.Uint16(b[6:])), b[8:])
	}
	inWords, outWords := int(le.Uint16(b[4:])), int(le.Uint16(b[6:]))
	in := b[8:]
	if 4*inWords < len(b) {
		in = b[8 : 4*inWords]
	}
	var resp uint64
	if len(in) >= 8 {
		resp = le.Uint64(in)
	}
	reply := func(core []byte, drv []byte) {
		out := append(append([]byte(nil), core...), drv...)
		if len(out) > 4*outWords {
			out = out[:4*outWords]
		}
		if len(out) > 0 {
			d.m.write(resp, out)
		}
	}
	switch cmd {
	case abi.IB_USER_VERBS_CMD_QUERY_DEVICE:
		a := deviceAttr()
		reply(abi.Bytes(&a), nil)
	case abi.IB_USER_VERBS_CMD_QUERY_PORT:
		reply(d.portAttr(), nil)
	case abi.IB_USER_VERBS_CMD_ALLOC_PD:
		d.pdn++
		d.record("ALLOC_PD driver data %x", in[abi.OffsetofAllocPDDriverData:])
		var r [8]byte
		le.PutUint32(r[:], d.handle())
		var drv [4]byte
		le.PutUint32(drv[:], d.pdn)
		reply(r[:4], drv[:])
	case abi.IB_USER_VERBS_CMD_REG_MR:
		var r [12]byte
		d.keys++
		le.PutUint32(r[0:], d.handle())
		le.PutUint32(r[4:], d.keys<<8|0x10)
		le.PutUint32(r[8:], d.keys<<8|0x20)
		var mr abi.RegMR
		copy(abi.Bytes(&mr), in)
		d.mrs = append(d.mrs, [2]uint64{mr.Start, mr.Length})
		d.record("REG_MR length %d access %#x driver data %x", mr.Length, mr.AccessFlags, in[abi.Size[abi.RegMR]():])
		reply(r[:], nil)
	case abi.IB_USER_VERBS_CMD_CREATE_AH:
		var ah abi.CreateAH
		copy(abi.Bytes(&ah), in)
		d.record("CREATE_AH dlid %d sl %d port %d global %d driver data %x out %d", ah.Attr.DLID, ah.Attr.SL,
			ah.Attr.PortNum, ah.Attr.IsGlobal, in[abi.Size[abi.CreateAH]():], 4*outWords)
		var r [4]byte
		le.PutUint32(r[:], d.handle())
		drv := abi.MLX5CreateAHResp{ResponseLength: uint32(abi.Size[abi.MLX5CreateAHResp]())}
		if d.eth { // the destination MAC the kernel resolves: here made from the GID's last bytes
			drv.DMAC = [6]uint8{0x02, ah.Attr.GRH.DGID[11], ah.Attr.GRH.DGID[12], ah.Attr.GRH.DGID[13], ah.Attr.GRH.DGID[14], ah.Attr.GRH.DGID[15]}
		}
		reply(r[:], abi.Bytes(&drv))
	case abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL:
		fd, err := d.m.newFD()
		if err != nil {
			return syscall.EMFILE
		}
		var r [4]byte
		le.PutUint32(r[:], uint32(fd))
		reply(r[:], nil)
	case abi.IB_USER_VERBS_CMD_QUERY_SRQ:
		h := le.Uint32(in[8:])
		for _, s := range d.srqs {
			if s.handle == h {
				var r [16]byte
				le.PutUint32(r[0:], s.maxWR)
				le.PutUint32(r[4:], s.maxSGE)
				reply(r[:], nil)
			}
		}
	case abi.IB_USER_VERBS_CMD_RESIZE_CQ:
		var rc abi.ResizeCQ
		copy(abi.Bytes(&rc), in)
		drv := in[abi.OffsetofResizeCQDriverData:]
		var req abi.MLX5ResizeCQ
		copy(abi.Bytes(&req), drv)
		cq := d.cqByHandle(rc.CQHandle)
		if cq == nil {
			return syscall.EINVAL
		}
		z := append([]byte(nil), drv...)
		clear(z[0:8])
		d.record("RESIZE_CQ %s cqe %d %s driver data %x", cq.name, rc.CQE, normAddr(drv, 0, "buf"), z)
		// The device ends the old buffer with a resize CQE in the next
		// slot and goes on in the new one (mlx5_ib_resize_cq; libmlx5's
		// mlx5_cq_resize_copy_cqes moves what precedes it).
		var cqe [64]byte
		cqe[63] = 5<<4 | byte(cq.pi/cq.ncqe)&1
		slot := cq.buf + uint64((cq.pi&(cq.ncqe-1))*cq.cqeSz)
		if cq.cqeSz == 128 {
			slot += 64
		}
		d.m.write(slot, cqe[:])
		cq.pi++
		cq.buf, cq.ncqe, cq.cqeSz = req.BufAddr, int(rc.CQE)+1, int(req.CQESize)
		var r [8]byte
		le.PutUint32(r[:], rc.CQE)
		reply(r[:], nil)
	case abi.IB_USER_VERBS_CMD_MODIFY_QP: // no response field
		d.recordModify(b[8:])
	case abi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, abi.IB_USER_VERBS_CMD_DEREG_MR, abi.IB_USER_VERBS_CMD_DEALLOC_PD,
		abi.IB_USER_VERBS_CMD_DESTROY_AH:
	case abi.IB_USER_VERBS_CMD_DESTROY_CQ, abi.IB_USER_VERBS_CMD_DESTROY_QP, abi.IB_USER_VERBS_CMD_DESTROY_SRQ:
		reply(make([]byte, 4*outWords), nil)
	default:
		d.record("write command %d: not scripted", cmd)
		return syscall.EOPNOTSUPP
	}
	return 0
}

func (d *device) exCmd(cmd uint32, outLen int, b []byte) syscall.Errno {
	// b: the extended header (response, provider words), then the command.
	if len(b) < 16 {
		return syscall.EINVAL
	}
	resp := le.Uint64(b)
	in := b[16:]
	reply := func(out []byte) {
		if len(out) > outLen {
			out = out[:outLen]
		}
		if resp != 0 && len(out) > 0 {
			d.m.write(resp, out)
		}
	}
	switch cmd {
	case abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE:
		r := abi.ExQueryDeviceResp{Base: deviceAttr()}
		r.ResponseLength = uint32(abi.Size[abi.ExQueryDeviceResp]())
		r.DeviceCapFlagsEx = uint64(r.Base.DeviceCapFlags)
		reply(abi.Bytes(&r))
	case abi.IB_USER_VERBS_EX_CMD_MODIFY_QP:
		d.recordModify(in)
		reply(make([]byte, 8))
	case abi.IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL:
	default:
		d.record("extended command %d: not scripted", cmd)
		return syscall.EOPNOTSUPP
	}
	return 0
}

// recordModify records a QP state change; on RESET the device's view of
// the QP's rings starts over, as the provider's does.
func (d *device) recordModify(in []byte) {
	var m abi.ModifyQP
	copy(abi.Bytes(&m), in)
	for _, q := range d.qps {
		if q.handle == m.QPHandle {
			d.record("MODIFY_QP %s state %d", q.name, m.QPState)
			if m.QPState == 0 {
				q.sqSeen, q.rqSeen = 0, 0
			}
		}
	}
}

// ---- mmap ----

func (d *device) mmap(addr uint64, length int, offset uint64) syscall.Errno {
	for i, u := range d.uars {
		if u.offset == offset {
			if length != pageSize {
				return syscall.EINVAL
			}
			u.addr, u.length = addr, length
			d.mmaps[addr] = length
			d.record("mmap uar%d", i)
			return 0
		}
	}
	d.record("mmap offset %#x length %d: refused", offset, length)
	return syscall.EINVAL
}

func (d *device) munmap(addr uint64) bool {
	if _, ok := d.mmaps[addr]; !ok {
		return false
	}
	delete(d.mmaps, addr)
	return true
}

// ---- snapshots: what the provider wrote ----

// snap records what changed since the last snapshot: new send and
// receive WQEs (by counter, so that buffers of different sizes compare),
// doorbell records, SRQ buffers, CQ doorbell records, and whatever was
// written to the UAR pages (which are then cleared).
func (d *device) snap(label string) {
	d.record("after %s", label)
	for _, q := range d.qps {
		db := d.m.read(q.db, 8)
		rcv, snd := be.Uint32(db[0:]), be.Uint32(db[4:])
		if [8]byte(db) != q.lastDB {
			d.record("  %s dbrec rcv %#x snd %#x", q.name, rcv, snd)
			q.lastDB = [8]byte(db)
		}
		if q.sqCount > 0 {
			sq := q.buf + uint64(q.rqCount<<q.rqShift)
			// WQE by WQE, each as many bytes as its control segment
			// says (ds), its blocks gathered across the ring's end.
			for c := q.sqSeen; c != uint16(snd); {
				w := d.m.read(sq+uint64(int(c)&(q.sqCount-1))*64, 64)
				n := int(w[7]&0x3f) * 16
				bbs := max(1, (n+63)/64)
				for i := 1; i < bbs; i++ {
					w = append(w, d.m.read(sq+uint64(int(c+uint16(i))&(q.sqCount-1))*64, 64)...)
				}
				w = w[:max(n, 16)]
				maskInlinePadding(w, q.typ)
				if d.eth && q.typ == 4 && len(w) >= 64 {
					d.normaliseSport(w[16:64])
				}
				q.sqOpcode[c] = w[3]
				d.record("  %s wqe %d %s", q.name, c, d.symbolic(w))
				c += uint16(bbs)
			}
			q.sqSeen = uint16(snd)
		}
		if q.rqCount > 0 && q.srq == nil {
			sz := 1 << q.rqShift
			for c := q.rqSeen; c != uint16(rcv); c++ {
				w := d.m.read(q.buf+uint64((int(c)&(q.rqCount-1))*sz), sz)
				d.record("  %s rwqe %d %s", q.name, c, d.symbolic(w))
			}
			q.rqSeen = uint16(rcv)
		}
	}
	for _, s := range d.srqs {
		db := d.m.read(s.db, 4)
		if [4]byte(db) != s.lastDB {
			d.record("  %s dbrec %#x", s.name, be.Uint32(db))
			s.lastDB = [4]byte(db)
		}
		b := d.m.read(s.buf, s.size)
		for off := 0; off < len(b); off += 16 {
			if string(b[off:off+16]) != string(s.last[off:off+16]) {
				d.record("  %s +%#x %s", s.name, off, d.symbolic(b[off:off+16]))
			}
		}
		s.last = b
	}
	for _, c := range d.cqs {
		db := d.m.read(c.db, 8)
		if [8]byte(db) != c.lastDB {
			d.record("  %s dbrec ci %#x arm %#x", c.name, be.Uint32(db[0:]), be.Uint32(db[4:]))
			c.lastDB = [8]byte(db)
		}
	}
	for i, u := range d.uars {
		if u.addr == 0 {
			continue
		}
		b := d.m.read(u.addr, pageSize)
		for off := 0; off < pageSize; off += 8 {
			if v := le.Uint64(b[off:]); v != 0 {
				// BlueFlame registers by their offset in their
				// register (either half), not in the page: libmlx5
				// puts two QPs' registers on one page.
				where := fmt.Sprintf("uar%d +%#x", i, off)
				if off >= bfOffset {
					where = fmt.Sprintf("uar(type %d) bf+%#x", u.typ, (off-bfOffset)%bfRegSize)
				}
				d.record("  %s %s", where, d.symbolic(b[off:off+8]))
			}
		}
		d.m.write(u.addr, make([]byte, pageSize))
	}
}

// ---- device steps: completions ----

// step runs "dev cqe cq=N qp=N op=OP k=v...": the device writes a CQE
// into the CQ (owner bit for its pass over the ring) for the QP.
func (d *device) step(line string) error {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "dev" || f[1] != "cqe" {
		return fmt.Errorf("bad device step %q", line)
	}
	kv := map[string]string{}
	for _, s := range f[2:] {
		k, v, _ := strings.Cut(s, "=")
		kv[k] = v
	}
	num := func(k string) uint64 {
		v, _ := strconv.ParseUint(kv[k], 0, 64)
		return v
	}
	cq := d.cqs[num("cq")]
	q := d.qps[num("qp")]
	var cqe [64]byte
	counter := uint16(num("wqe"))
	if kv["wqe"] == "last" {
		// The last send WQE posted: walk the WQEs from the last one
		// seen to the doorbell record's counter by their sizes.
		snd := uint16(be.Uint32(d.m.read(q.db+4, 4)))
		sq := q.buf + uint64(q.rqCount<<q.rqShift)
		for c, walked := q.sqScan, 0; c != snd; {
			ctrl := d.m.read(sq+uint64(int(c)&(q.sqCount-1))*64, 8)
			q.sqOpcode[c] = ctrl[3]
			counter = c
			bbs := (int(ctrl[7]&0x3f)*16 + 63) / 64
			walked += bbs
			if bbs == 0 || walked > q.sqCount {
				// A control segment without a size (or sizes that
				// overrun the doorbell counter) would loop forever:
				// the provider wrote a bad WQE.
				return fmt.Errorf("send WQE at counter %d: size %d DS, the walk from %d does not reach the doorbell counter %d", c, ctrl[7]&0x3f, q.sqScan, snd)
			}
			c += uint16(bbs)
		}
		q.sqScan = snd
	}
	var opcode byte
	switch kv["op"] {
	case "req":
		opcode = 0
		be.PutUint32(cqe[56:], uint32(q.sqOpcode[counter])<<24|q.qpn)
	case "send":
		opcode = 2
	case "send_imm":
		opcode = 3
	case "write_imm":
		opcode = 1
	case "send_inv":
		opcode = 4
	case "req_err":
		opcode = 13
		be.PutUint32(cqe[56:], uint32(q.sqOpcode[counter])<<24|q.qpn)
	case "resp_err":
		opcode = 14
	default:
		return fmt.Errorf("bad CQE op %q", kv["op"])
	}
	if opcode >= 1 && opcode <= 4 || opcode == 14 {
		be.PutUint32(cqe[56:], q.qpn)
	}
	if opcode >= 13 {
		cqe[55] = byte(num("syndrome"))
		cqe[54] = byte(num("vendor"))
	}
	be.PutUint32(cqe[44:], uint32(num("bytes")))
	be.PutUint32(cqe[36:], uint32(num("imm")))
	be.PutUint32(cqe[32:], q.uidx)
	be.PutUint32(cqe[24:], uint32(num("src"))|uint32(num("sl"))<<24|uint32(num("grh"))<<28)
	be.PutUint16(cqe[22:], uint16(num("slid")))
	cqe[17] = byte(num("path"))
	be.PutUint16(cqe[60:], counter)
	owner := byte(cq.pi/cq.ncqe) & 1
	cqe[63] = opcode<<4 | owner
	if kv["se"] == "1" {
		cqe[63] |= 2
	}
	slot := cq.buf + uint64((cq.pi&(cq.ncqe-1))*cq.cqeSz)
	if cq.cqeSz == 128 {
		slot += 64
	}
	d.m.write(slot, cqe[:])
	cq.pi++
	return nil
}

// symbolic prints device bytes in hex, each 8-byte aligned big-endian
// word that is an address in a registered region replaced by
// "<mrN+off>": the buffers lie elsewhere in each run.
func (d *device) symbolic(b []byte) string {
	var out strings.Builder
	for off := 0; off < len(b); off += 8 {
		w := b[off:min(off+8, len(b))]
		if len(w) == 8 {
			v := be.Uint64(w)
			if i, ok := d.mrOf(v); ok {
				fmt.Fprintf(&out, "<mr%d+%#x>", i, v-d.mrs[i][0])
				continue
			}
		}
		out.WriteString(hex.EncodeToString(w))
	}
	return out.String()
}

func (d *device) mrOf(v uint64) (int, bool) {
	for i, r := range d.mrs {
		if v >= r[0] && v < r[0]+r[1] {
			return i, true
		}
	}
	return 0, false
}

// maskInlinePadding clears, in a send WQE of a QP of type typ (the
// kernel's numbering: RC 2, UC 3, UD 4), the bytes after each inline
// segment's data up to its 16-byte end: the device reads byte_count
// bytes, and the providers leave the rest as the ring held it.
func maskInlinePadding(w []byte, typ uint8) {
	off := 16 // control segment
	if typ == 4 {
		off += 48 // datagram segment
	}
	switch w[3] { // opcode
	case 0x08, 0x09, 0x10: // RDMA write (+imm), read: remote address
		off += 16
	case 0x11, 0x12: // atomics: remote address, atomic
		off += 32
	}
	for off+4 <= len(w) {
		bc := be.Uint32(w[off:])
		if bc&0x80000000 == 0 {
			off += 16
			continue
		}
		end := off + 4 + int(bc&0x7fffffff)
		next := off + (4+int(bc&0x7fffffff)+15)/16*16
		for i := end; i < next && i < len(w); i++ {
			w[i] = 0
		}
		off = next
	}
}

// normaliseSport rewrites the UDP source port (the rlid field) of a RoCE
// address vector where the providers may differ by design: without a
// flow label a RoCE v2 port is random (libmlx5 and uverbs), so any port
// RoCE v2 allows reads as 0xc000 (a port outside the range stays, and
// fails the comparison); a RoCE v1 address has no UDP header, and
// libmlx5 leaves the field 0 where uverbs, which does not look up the
// GID's type, writes the port it would use for v2: it reads as 0.
func (d *device) normaliseSport(av []byte) {
	gidfl := be.Uint32(av[28:])
	e, ok := d.gid(int(gidfl >> 20 & 0xff))
	sport := be.Uint16(av[14:])
	switch {
	case ok && e.GIDType == 1:
		be.PutUint16(av[14:], 0)
	case gidfl&0xfffff == 0 && sport >= 0xc000:
		be.PutUint16(av[14:], 0xc000)
	}
}
