package rdmanl

// This file holds the encoders and decoders of the resource-tracking and
// statistics commands (RDMA_NLDEV_CMD_RES_*_GET, RDMA_NLDEV_CMD_STAT_GET):
// no syscalls, so every function here is testable on any host and
// fuzzable.

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/purerdma/rdma/internal/netlink"
)

// Resource and statistics commands from <rdma/rdma_netlink.h>.
const (
	cmdResGet     = 9  // RDMA_NLDEV_CMD_RES_GET
	cmdResQPGet   = 10 // RDMA_NLDEV_CMD_RES_QP_GET
	cmdResCMIDGet = 11 // RDMA_NLDEV_CMD_RES_CM_ID_GET
	cmdResCQGet   = 12 // RDMA_NLDEV_CMD_RES_CQ_GET
	cmdResMRGet   = 13 // RDMA_NLDEV_CMD_RES_MR_GET
	cmdResPDGet   = 14 // RDMA_NLDEV_CMD_RES_PD_GET
	cmdStatGet    = 17 // RDMA_NLDEV_CMD_STAT_GET
	cmdResCtxGet  = 22 // RDMA_NLDEV_CMD_RES_CTX_GET
	cmdResSRQGet  = 23 // RDMA_NLDEV_CMD_RES_SRQ_GET
)

// Attr is an RDMA_NLDEV_ATTR_* attribute type, as ResAttrs.Has takes it.
type Attr uint16

// The attributes of resource and statistics replies.
const (
	AttrPortIndex          Attr = attrPortIndex // u32
	attrResSummary         Attr = 15            // nested
	attrResSummaryEntry    Attr = 16            // nested
	attrResSummaryName     Attr = 17            // string
	attrResSummaryCurr     Attr = 18            // u64
	attrResQP              Attr = 19            // nested
	attrResQPEntry         Attr = 20            // nested
	AttrLQPN               Attr = 21            // u32
	AttrRQPN               Attr = 22            // u32
	AttrRQPSN              Attr = 23            // u32
	AttrSQPSN              Attr = 24            // u32
	AttrPathMigState       Attr = 25            // u8
	AttrType               Attr = 26            // u8
	AttrState              Attr = 27            // u8
	AttrPID                Attr = 28            // u32
	AttrKernName           Attr = 29            // string
	attrResCMID            Attr = 30            // nested
	attrResCMIDEntry       Attr = 31            // nested
	AttrPS                 Attr = 32            // u32
	AttrSrcAddr            Attr = 33            // struct __kernel_sockaddr_storage
	AttrDstAddr            Attr = 34            // struct __kernel_sockaddr_storage
	attrResCQ              Attr = 35            // nested
	attrResCQEntry         Attr = 36            // nested
	AttrCQE                Attr = 37            // u32
	AttrUsers              Attr = 38            // u64 (RDMA_NLDEV_ATTR_RES_USECNT)
	AttrPollCtx            Attr = 39            // u8
	attrResMR              Attr = 40            // nested
	attrResMREntry         Attr = 41            // nested
	AttrRKey               Attr = 42            // u32
	AttrLKey               Attr = 43            // u32
	AttrIOVA               Attr = 44            // u64
	AttrMRLen              Attr = 45            // u64
	attrResPD              Attr = 46            // nested
	attrResPDEntry         Attr = 47            // nested
	AttrLocalDMALKey       Attr = 48            // u32
	AttrUnsafeGlobalRKey   Attr = 49            // u32
	AttrPDN                Attr = 60            // u32
	AttrCQN                Attr = 61            // u32
	AttrMRN                Attr = 62            // u32
	AttrCMIDN              Attr = 63            // u32
	AttrCtxN               Attr = 64            // u32
	attrStatHWCounters     Attr = 80            // nested
	attrStatHWCounterEntry Attr = 81            // nested
	attrStatHWCounterName  Attr = 82            // string
	attrStatHWCounterValue Attr = 83            // u64
	AttrDIM                Attr = 84            // u8 (RDMA_NLDEV_ATTR_DEV_DIM)
	attrResCtx             Attr = 86            // nested
	attrResCtxEntry        Attr = 87            // nested
	attrResSRQ             Attr = 88            // nested
	attrResSRQEntry        Attr = 89            // nested
	AttrSRQN               Attr = 90            // u32
	attrMax                Attr = 128           // above every attribute this file knows
)

// ResKind is a table of tracked kernel objects (rdma resource show KIND).
type ResKind uint8

// The resource tables.
const (
	ResQP ResKind = iota + 1
	ResCMID
	ResCQ
	ResMR
	ResPD
	ResCtx
	ResSRQ
)

// resTable is the command and nesting of one resource table.
type resTable struct {
	cmd          uint16
	table, entry Attr
	name         string
}

var resTables = map[ResKind]resTable{
	ResQP:   {cmdResQPGet, attrResQP, attrResQPEntry, "qp"},
	ResCMID: {cmdResCMIDGet, attrResCMID, attrResCMIDEntry, "cm_id"},
	ResCQ:   {cmdResCQGet, attrResCQ, attrResCQEntry, "cq"},
	ResMR:   {cmdResMRGet, attrResMR, attrResMREntry, "mr"},
	ResPD:   {cmdResPDGet, attrResPD, attrResPDEntry, "pd"},
	ResCtx:  {cmdResCtxGet, attrResCtx, attrResCtxEntry, "ctx"},
	ResSRQ:  {cmdResSRQGet, attrResSRQ, attrResSRQEntry, "srq"},
}

// String returns the table's name as rdma spells it: qp, cm_id, cq, mr,
// pd, ctx, srq.
func (k ResKind) String() string {
	if t, ok := resTables[k]; ok {
		return t.name
	}
	return fmt.Sprintf("ResKind(%d)", uint8(k))
}

// SummaryEntry is one count of a device's resource summary
// (RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY): "qp" and the number of QPs.
type SummaryEntry struct {
	Name    string
	Current uint64
}

// Summary is a device's RDMA_NLDEV_CMD_RES_GET reply.
type Summary struct {
	DevIndex uint32
	DevName  string
	Entries  []SummaryEntry // in the kernel's order
}

// ResAttrs is one object of a resource table: the attributes the kernel
// sent for it. Has tells which were sent; the others are zero.
type ResAttrs struct {
	present [attrMax / 64]uint64

	Port, LQPN, RQPN, RQPSN, SQPSN, PID, PS, CQE uint32
	RKey, LKey, LocalDMALKey, UnsafeGlobalRKey   uint32
	PDN, CQN, MRN, CMIDN, CtxN, SRQN             uint32
	PathMigState, Type, State, PollCtx, DIM      uint8
	Users, IOVA, MRLen                           uint64
	KernName                                     string
	SrcAddr, DstAddr                             netip.AddrPort
}

// Has reports whether the kernel sent attribute a for this object.
func (r *ResAttrs) Has(a Attr) bool {
	return a < attrMax && r.present[a/64]&(1<<(a%64)) != 0
}

func (r *ResAttrs) set(a Attr) { r.present[a/64] |= 1 << (a % 64) }

// Res is one device's part of a resource dump.
type Res struct {
	DevIndex uint32
	DevName  string
	Entries  []ResAttrs
}

// Counter is one hardware counter of a port (RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY).
type Counter struct {
	Name  string
	Value uint64
}

// PortStats is a port's RDMA_NLDEV_CMD_STAT_GET reply.
type PortStats struct {
	DevIndex uint32
	DevName  string
	Port     uint32
	Counters []Counter // in the kernel's order
}

// resGetRequest encodes RDMA_NLDEV_CMD_RES_GET for one device, as rdma
// sends it: a plain request, not a dump.
func resGetRequest(seq, index uint32) []byte {
	e := netlink.NewRequest(nldevType(cmdResGet), netlink.FlagRequest|netlink.FlagAck, seq)
	e.Uint32(attrDevIndex, index)
	return e.Finish()
}

// resDumpRequest encodes a dump of one resource table of one device; the
// kernel's res_get_common_dumpit answers EINVAL without the index.
func resDumpRequest(seq uint32, cmd uint16, index uint32) []byte {
	e := netlink.NewRequest(nldevType(cmd), netlink.FlagRequest|netlink.FlagDump, seq)
	e.Uint32(attrDevIndex, index)
	return e.Finish()
}

// statGetRequest encodes RDMA_NLDEV_CMD_STAT_GET for one port: with no
// STAT_RES or STAT_MODE the kernel answers the port's hardware counters.
func statGetRequest(seq, index, port uint32) []byte {
	e := netlink.NewRequest(nldevType(cmdStatGet), netlink.FlagRequest|netlink.FlagAck, seq)
	e.Uint32(attrDevIndex, index)
	e.Uint32(attrPortIndex, port)
	return e.Finish()
}

// devHeader decodes the device index and name every reply starts with.
func devHeader(a netlink.Attr, index *uint32, name *string) (bool, error) {
	switch a.Type {
	case attrDevIndex:
		v, err := a.Uint32()
		*index = v
		return true, err
	case attrDevName:
		*name = a.String()
		return true, nil
	}
	return false, nil
}

// parseSummary decodes a RDMA_NLDEV_CMD_RES_GET reply.
func parseSummary(b []byte) (Summary, error) {
	var s Summary
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return s, err
	}
	for _, a := range attrs {
		if ok, err := devHeader(a, &s.DevIndex, &s.DevName); ok {
			if err != nil {
				return s, err
			}
			continue
		}
		if Attr(a.Type) != attrResSummary {
			continue
		}
		s.Entries = nil // the last table wins, as for every attribute
		err := namedValues(a.Data, attrResSummaryEntry, attrResSummaryName, attrResSummaryCurr, func(name string, v uint64) {
			s.Entries = append(s.Entries, SummaryEntry{Name: name, Current: v})
		})
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// nested walks a nested table: each attribute of type entry is itself a
// list of attributes, given to f; attributes of other types are skipped.
func nested(b []byte, entry Attr, f func([]netlink.Attr) error) error {
	entries, err := netlink.ParseAttrs(b)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if Attr(e.Type) != entry {
			continue
		}
		line, err := netlink.ParseAttrs(e.Data)
		if err != nil {
			return err
		}
		if err := f(line); err != nil {
			return err
		}
	}
	return nil
}

// namedValues decodes a table of name and 64-bit value pairs (the
// resource summary, the hardware counters): each entry attribute holds
// a name attribute and a value attribute; a missing one is "" or 0.
func namedValues(b []byte, entry, name, value Attr, add func(string, uint64)) error {
	return nested(b, entry, func(line []netlink.Attr) error {
		var n string
		var v uint64
		for _, f := range line {
			switch Attr(f.Type) {
			case name:
				n = f.String()
			case value:
				var err error
				if v, err = f.Uint64(); err != nil {
					return err
				}
			}
		}
		add(n, v)
		return nil
	})
}

// parseRes decodes one message of a resource dump of kind k.
func parseRes(b []byte, k ResKind) (Res, error) {
	var r Res
	t, ok := resTables[k]
	if !ok {
		return r, fmt.Errorf("unknown resource kind %d", k)
	}
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return r, err
	}
	for _, a := range attrs {
		if ok, err := devHeader(a, &r.DevIndex, &r.DevName); ok {
			if err != nil {
				return r, err
			}
			continue
		}
		if Attr(a.Type) != t.table {
			continue
		}
		r.Entries = nil
		err := nested(a.Data, t.entry, func(line []netlink.Attr) error {
			e, err := parseResLine(line)
			if err != nil {
				return err
			}
			r.Entries = append(r.Entries, e)
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// parseResLine decodes the attributes of one tracked object.
func parseResLine(line []netlink.Attr) (ResAttrs, error) {
	var r ResAttrs
	u32 := map[Attr]*uint32{
		AttrPortIndex: &r.Port, AttrLQPN: &r.LQPN, AttrRQPN: &r.RQPN, AttrRQPSN: &r.RQPSN,
		AttrSQPSN: &r.SQPSN, AttrPID: &r.PID, AttrPS: &r.PS, AttrCQE: &r.CQE,
		AttrRKey: &r.RKey, AttrLKey: &r.LKey, AttrLocalDMALKey: &r.LocalDMALKey,
		AttrUnsafeGlobalRKey: &r.UnsafeGlobalRKey, AttrPDN: &r.PDN, AttrCQN: &r.CQN,
		AttrMRN: &r.MRN, AttrCMIDN: &r.CMIDN, AttrCtxN: &r.CtxN, AttrSRQN: &r.SRQN,
	}
	u8 := map[Attr]*uint8{
		AttrPathMigState: &r.PathMigState, AttrType: &r.Type, AttrState: &r.State,
		AttrPollCtx: &r.PollCtx, AttrDIM: &r.DIM,
	}
	u64 := map[Attr]*uint64{AttrUsers: &r.Users, AttrIOVA: &r.IOVA, AttrMRLen: &r.MRLen}
	for _, a := range line {
		t := Attr(a.Type)
		var err error
		switch {
		case u32[t] != nil:
			*u32[t], err = a.Uint32()
		case u8[t] != nil:
			*u8[t], err = a.Uint8()
		case u64[t] != nil:
			*u64[t], err = a.Uint64()
		case t == AttrKernName:
			r.KernName = a.String()
		case t == AttrSrcAddr || t == AttrDstAddr:
			ap, ok := parseSockaddr(a.Data)
			if !ok {
				continue // a family rdma cannot print either: absent
			}
			if t == AttrSrcAddr {
				r.SrcAddr = ap
			} else {
				r.DstAddr = ap
			}
		default:
			continue
		}
		if err != nil {
			return r, err
		}
		r.set(t)
	}
	return r, nil
}

// Address families of struct sockaddr (<linux/socket.h>).
const (
	afInet  = 2
	afInet6 = 10
)

// parseSockaddr decodes the IPv4 or IPv6 address and port of a struct
// __kernel_sockaddr_storage: the family in host order, the port in
// network order, then struct sockaddr_in's or sockaddr_in6's address.
// Other families, and data too short for the family's address, are not
// decoded.
func parseSockaddr(b []byte) (netip.AddrPort, bool) {
	if len(b) < 4 {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case afInet:
		if len(b) < 8 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case afInet6:
		// sin6_flowinfo (4 bytes), then the address, then sin6_scope_id.
		if len(b) < 24 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), true
	}
	return netip.AddrPort{}, false
}

// appendSockaddr encodes ap as the kernel does: a 128-byte
// __kernel_sockaddr_storage. For tests and fakes.
func appendSockaddr(b []byte, ap netip.AddrPort) []byte {
	var s [128]byte
	a := ap.Addr()
	binary.BigEndian.PutUint16(s[2:], ap.Port())
	if a.Is4() {
		binary.NativeEndian.PutUint16(s[:], afInet)
		a4 := a.As4()
		copy(s[4:], a4[:])
	} else {
		binary.NativeEndian.PutUint16(s[:], afInet6)
		a16 := a.As16()
		copy(s[8:], a16[:])
	}
	return append(b, s[:]...)
}

// parseStat decodes a RDMA_NLDEV_CMD_STAT_GET reply for a port.
func parseStat(b []byte) (PortStats, error) {
	var s PortStats
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return s, err
	}
	for _, a := range attrs {
		if ok, err := devHeader(a, &s.DevIndex, &s.DevName); ok {
			if err != nil {
				return s, err
			}
			continue
		}
		switch Attr(a.Type) {
		case AttrPortIndex:
			if s.Port, err = a.Uint32(); err != nil {
				return s, err
			}
		case attrStatHWCounters:
			s.Counters = nil
			err := namedValues(a.Data, attrStatHWCounterEntry, attrStatHWCounterName, attrStatHWCounterValue, func(name string, v uint64) {
				s.Counters = append(s.Counters, Counter{Name: name, Value: v})
			})
			if err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// encodeResAttrs encodes r's present attributes as the kernel lays out an
// entry. For tests and fakes.
func encodeResAttrs(e *netlink.Encoder, r *ResAttrs) {
	u32 := []struct {
		a Attr
		v uint32
	}{{AttrPortIndex, r.Port}, {AttrLQPN, r.LQPN}, {AttrRQPN, r.RQPN}, {AttrRQPSN, r.RQPSN},
		{AttrSQPSN, r.SQPSN}, {AttrPID, r.PID}, {AttrPS, r.PS}, {AttrCQE, r.CQE},
		{AttrRKey, r.RKey}, {AttrLKey, r.LKey}, {AttrLocalDMALKey, r.LocalDMALKey},
		{AttrUnsafeGlobalRKey, r.UnsafeGlobalRKey}, {AttrPDN, r.PDN}, {AttrCQN, r.CQN},
		{AttrMRN, r.MRN}, {AttrCMIDN, r.CMIDN}, {AttrCtxN, r.CtxN}, {AttrSRQN, r.SRQN}}
	for _, f := range u32 {
		if r.Has(f.a) {
			e.Uint32(uint16(f.a), f.v)
		}
	}
	u8 := []struct {
		a Attr
		v uint8
	}{{AttrPathMigState, r.PathMigState}, {AttrType, r.Type}, {AttrState, r.State},
		{AttrPollCtx, r.PollCtx}, {AttrDIM, r.DIM}}
	for _, f := range u8 {
		if r.Has(f.a) {
			e.Attr(uint16(f.a), []byte{f.v})
		}
	}
	u64 := []struct {
		a Attr
		v uint64
	}{{AttrUsers, r.Users}, {AttrIOVA, r.IOVA}, {AttrMRLen, r.MRLen}}
	for _, f := range u64 {
		if r.Has(f.a) {
			e.Attr(uint16(f.a), binary.NativeEndian.AppendUint64(nil, f.v))
		}
	}
	if r.Has(AttrKernName) {
		e.String(uint16(AttrKernName), r.KernName)
	}
	if r.Has(AttrSrcAddr) {
		e.Attr(uint16(AttrSrcAddr), appendSockaddr(nil, r.SrcAddr))
	}
	if r.Has(AttrDstAddr) {
		e.Attr(uint16(AttrDstAddr), appendSockaddr(nil, r.DstAddr))
	}
}

// nest appends a nested attribute whose content build writes.
func nest(e *netlink.Encoder, typ Attr, build func(*netlink.Encoder)) {
	e.Begin(uint16(typ))
	build(e)
	e.End()
}

// EncodeRes encodes r as the payload of one resource dump message of
// kind k, the way the kernel lays it out. For tests and fakes.
func EncodeRes(k ResKind, r Res) []byte {
	e := new(netlink.Encoder)
	e.Uint32(attrDevIndex, r.DevIndex)
	e.String(attrDevName, r.DevName)
	t := resTables[k]
	nest(e, t.table, func(e *netlink.Encoder) {
		for i := range r.Entries {
			nest(e, t.entry, func(e *netlink.Encoder) { encodeResAttrs(e, &r.Entries[i]) })
		}
	})
	return e.Bytes()
}

// EncodeSummary encodes s as a RDMA_NLDEV_CMD_RES_GET reply payload.
func EncodeSummary(s Summary) []byte {
	e := new(netlink.Encoder)
	e.Uint32(attrDevIndex, s.DevIndex)
	e.String(attrDevName, s.DevName)
	nest(e, attrResSummary, func(e *netlink.Encoder) {
		for _, se := range s.Entries {
			nest(e, attrResSummaryEntry, func(e *netlink.Encoder) {
				e.String(uint16(attrResSummaryName), se.Name)
				e.Attr(uint16(attrResSummaryCurr), binary.NativeEndian.AppendUint64(nil, se.Current))
			})
		}
	})
	return e.Bytes()
}

// EncodeStat encodes s as a RDMA_NLDEV_CMD_STAT_GET reply payload.
func EncodeStat(s PortStats) []byte {
	e := new(netlink.Encoder)
	e.Uint32(attrDevIndex, s.DevIndex)
	e.String(attrDevName, s.DevName)
	e.Uint32(attrPortIndex, s.Port)
	nest(e, attrStatHWCounters, func(e *netlink.Encoder) {
		for _, c := range s.Counters {
			nest(e, attrStatHWCounterEntry, func(e *netlink.Encoder) {
				e.String(uint16(attrStatHWCounterName), c.Name)
				e.Attr(uint16(attrStatHWCounterValue), binary.NativeEndian.AppendUint64(nil, c.Value))
			})
		}
	})
	return e.Bytes()
}

// SetAttr marks attribute a present, for building fakes' replies.
func (r *ResAttrs) SetAttr(a ...Attr) {
	for _, x := range a {
		r.set(x)
	}
}
