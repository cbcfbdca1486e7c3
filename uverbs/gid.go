package uverbs

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// This file has the GID queries (ibv_query_gid_table, ibv_query_gid_ex,
// ibv_query_gid) and what they return. The type GID itself, a [16]byte
// in network byte order, is declared in zz_placeholder_types.go until
// that file goes.

// String formats g as eight groups of four hex digits, the way sysfs
// prints GIDs (and ibv_devinfo InfiniBand and RoCE v1 ones):
// "fe80:0000:0000:0000:5054:00ff:fe12:3456".
func (g GID) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 39)
	for i, c := range g {
		if i > 0 && i%2 == 0 {
			b = append(b, ':')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return string(b)
}

// IP returns g as an IP address: the 4-byte IPv4 address for an
// IPv4-mapped GID (::ffff:a.b.c.d, how RoCE v2 carries IPv4), else the
// 16-byte IPv6 address, which for InfiniBand and RoCE v1 GIDs is the
// subnet prefix followed by the port's interface ID.
func (g GID) IP() net.IP {
	ip := net.IP(g[:]) // g is a copy: the result shares no memory with the caller's GID
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// Addr returns g as a netip.Addr, the type rdmacm uses: the IPv4
// address for an IPv4-mapped GID, else the IPv6 address (see IP).
func (g GID) Addr() netip.Addr {
	return netip.AddrFrom16(g).Unmap()
}

// IsZero reports whether g is all zeros, as an empty GID table entry
// is.
func (g GID) IsZero() bool { return g == GID{} }

// ParseGID parses a GID in the form String prints
// ("fe80:0000:0000:0000:5054:00ff:fe12:3456"), or any IPv6 or IPv4
// address ("fe80::5054:ff:fe12:3456", "::ffff:198.18.0.1",
// "198.18.0.1"); an IPv4 address becomes the IPv4-mapped GID RoCE v2
// uses.
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return GID{}, fmt.Errorf("uverbs ParseGID: malformed GID %q", s)
	}
	return GID(a.As16()), nil
}

// GID is a 128-bit global identifier: a port's address (on RoCE an IPv6
// address, IPv4 ones mapped as ::ffff:a.b.c.d) or a multicast group.
type GID [16]byte

// GIDType is the kind of a GID table entry (ibv_gid_type, the kernel's
// ib_uverbs_gid_type).
type GIDType uint8

// GID types.
const (
	GIDTypeIB     GIDType = 0 // InfiniBand
	GIDTypeRoCEv1 GIDType = 1 // RoCE v1: Ethernet, no IP header
	GIDTypeRoCEv2 GIDType = 2 // RoCE v2: UDP over IPv4 or IPv6
)

// String returns "IB", "RoCE v1" or "RoCE v2".
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "GIDType(" + strconv.Itoa(int(t)) + ")"
}

// GIDEntry is one valid entry of a port's GID table (ibv_gid_entry).
type GIDEntry struct {
	GID   GID
	Index int // the GID index, as QPs and address handles name it
	Port  int
	Type  GIDType
	// Netdev is the network device the GID belongs to on RoCE and
	// iWARP ports, "" on InfiniBand or when the index names no device
	// in the caller's network namespace.
	Netdev      string
	NetdevIndex int // its interface index, 0 for none
}

// sizeofGIDEntry is the entry size the kernel is told: the whole
// struct ib_uverbs_gid_entry this package was built with.
var sizeofGIDEntry = len(abi.Bytes(&abi.GIDEntry{}))

// GIDTable returns the valid entries of a port's GID table, sorted by
// index (ibv_query_gid_table, filtered to the port). Empty entries are
// left out. It needs Linux 5.10 or later.
func (c *Context) GIDTable(port int) ([]GIDEntry, error) {
	if c == nil {
		return nil, errNil("GIDTable", "Context")
	}
	op := "uverbs GIDTable " + c.portName(port)
	if c.closed.Load() {
		return nil, closedContext("uverbs GIDTable")
	}
	if err := c.checkPort(op, port); err != nil {
		return nil, err
	}
	n, err := c.gidTableCapacity()
	if err != nil {
		return nil, err
	}
	raw := make([]abi.GIDEntry, n)
	var num uint64
	m := sys.NewMethod(op+": QUERY_GID_TABLE", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_TABLE)
	m.InUint(abi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uint64(sizeofGIDEntry), 8)
	m.InUint(abi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0, 4)
	m.Out(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, abi.BytesOfSlice(raw))
	m.Out(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, abi.Bytes(&num))
	if err := c.exec(m); err != nil {
		return nil, gidQueryError(err)
	}
	if num > uint64(len(raw)) {
		return nil, &sys.Error{Op: op, Err: fmt.Errorf("kernel reported %d entries for a %d-entry buffer", num, len(raw))}
	}
	return decodeGIDTable(raw[:num], port, netdevNames), nil
}

// maxGIDEntries is the most entries one QUERY_GID_TABLE call can return:
// an attribute's length is 16 bits.
var maxGIDEntries = math.MaxUint16 / sizeofGIDEntry

// gidTableCapacity is how many entries the kernel may return for the
// whole device (QUERY_GID_TABLE fails with EINVAL when the buffer is too
// small): the sum of the ports' table lengths, within what one call
// holds.
func (c *Context) gidTableCapacity() (int, error) {
	total := 0
	for p := 1; p <= c.portCount(); p++ {
		a, err := c.QueryPort(p)
		if err != nil {
			return 0, err
		}
		total += a.GIDTblLen
	}
	if total <= 0 || total > maxGIDEntries {
		total = maxGIDEntries
	}
	return total, nil
}

// decodeGIDTable converts the kernel's entries of port, sorted by index;
// names resolves network interface indexes.
func decodeGIDTable(raw []abi.GIDEntry, port int, names func() map[int]string) []GIDEntry {
	var out []GIDEntry
	var ifnames map[int]string
	for i := range raw {
		e := gidEntry(&raw[i])
		if e.Port != port {
			continue
		}
		if e.NetdevIndex != 0 {
			if ifnames == nil {
				ifnames = names()
			}
			e.Netdev = ifnames[e.NetdevIndex]
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b GIDEntry) int { return a.Index - b.Index })
	return out
}

func gidEntry(r *abi.GIDEntry) GIDEntry {
	var e GIDEntry
	copy(e.GID[:], abi.Bytes(&r.GID))
	e.Index = int(r.GIDIndex)
	e.Port = int(r.PortNum)
	e.Type = GIDType(r.GIDType)
	e.NetdevIndex = int(r.NetdevIfindex)
	return e
}

// netdevNames maps the interface indexes of the caller's network
// namespace to names; on error the map is empty, leaving Netdev "".
func netdevNames() map[int]string {
	m := map[int]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		return m
	}
	for _, i := range ifs {
		m[i.Index] = i.Name
	}
	return m
}

// QueryGIDEntry returns one entry of a port's GID table
// (ibv_query_gid_ex). An empty entry is an error matching ENODATA, an
// index past the table's end one matching EINVAL. It needs Linux 5.10
// or later.
func (c *Context) QueryGIDEntry(port, index int) (GIDEntry, error) {
	r, err := c.queryGIDEntry("QueryGIDEntry", port, index)
	if err != nil {
		return GIDEntry{}, err
	}
	e := gidEntry(&r)
	if e.NetdevIndex != 0 {
		e.Netdev = netdevNames()[e.NetdevIndex]
	}
	return e, nil
}

// QueryGID returns the GID at index in a port's GID table
// (ibv_query_gid). Unlike ibv_query_gid, which returns a zero GID for
// an empty entry, it fails with an error matching ENODATA.
func (c *Context) QueryGID(port, index int) (GID, error) {
	r, err := c.queryGIDEntry("QueryGID", port, index)
	if err != nil {
		return GID{}, err
	}
	return gidEntry(&r).GID, nil
}

func (c *Context) queryGIDEntry(name string, port, index int) (abi.GIDEntry, error) {
	var r abi.GIDEntry
	if c == nil {
		return r, errNil(name, "Context")
	}
	op := "uverbs " + name + " " + c.portName(port) + " index " + strconv.Itoa(index)
	if c.closed.Load() {
		return r, closedContext(op)
	}
	if err := c.checkPort(op, port); err != nil {
		return r, err
	}
	if index < 0 || uint64(index) > math.MaxUint32 {
		return r, &sys.Error{Op: op, Err: fmt.Errorf("GID index out of range: %w", errInvalid)}
	}
	m := sys.NewMethod(op+": QUERY_GID_ENTRY", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY)
	m.InUint(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port), 8)
	m.InUint(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index), 8)
	m.InUint(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0, 4) // mandatory, unlike QUERY_GID_TABLE's
	m.Out(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, abi.Bytes(&r))
	if err := c.exec(m); err != nil {
		return r, gidQueryError(err)
	}
	return r, nil
}

// gidQueryError names the kernel that added the GID query methods when
// this one lacks them.
func gidQueryError(err error) error {
	if errors.Is(err, ErrNotSupported) {
		return fmt.Errorf("%w (the GID query methods need Linux 5.10)", err)
	}
	return err
}
