package uverbs

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// This file chooses GIDs: which index of a port's GID table a QP or an
// address handle names as GlobalRoute.SGIDIndex, the address its
// packets come from. The package documentation ("GIDs") says how to
// choose.

// RoCEv2GIDIndex returns the index in port's GID table of addr's RoCE
// v2 GID: the entry whose GID is addr (an IPv4 address as the
// IPv4-mapped GID ::ffff:a.b.c.d) and whose type is RoCE v2, what
// ibv_find_gid_index finds with IBV_GID_TYPE_ROCE_V2. Put it in
// GlobalRoute.SGIDIndex to send from addr over RoCE v2. An IPv6
// address with a zone (fe80::1%eth0) must also belong to that network
// device. When the port has no such GID the error matches
// os.ErrNotExist and lists the port's RoCE v2 GIDs. It needs Linux
// 5.10 or later (the GID table query).
func (c *Context) RoCEv2GIDIndex(port int, addr netip.Addr) (int, error) {
	if c == nil {
		return 0, errNil("RoCEv2GIDIndex", "Context")
	}
	if !addr.IsValid() {
		return 0, fmt.Errorf("uverbs RoCEv2GIDIndex: the zero netip.Addr: %w", errInvalid)
	}
	table, err := c.GIDTable(port)
	if err != nil {
		return 0, err
	}
	g := GID(addr.As16())
	for _, e := range table {
		if e.Type == GIDTypeRoCEv2 && e.GID == g && (addr.Zone() == "" || e.Netdev == addr.Zone()) {
			return e.Index, nil
		}
	}
	return 0, c.noRoCEv2GID("RoCEv2GIDIndex", port, "of "+addr.String(), table)
}

// RoCEv2GID returns the RoCE v2 entry of port's GID table to send from
// over the network device netdev, or with netdev "" over any of the
// port's: its first RoCE v2 GID of an IPv4 address, by index, else its
// first RoCE v2 GID (an IPv6 address, the link-local one usually
// first). That is the GID most RoCE programs want when the user named
// a device and not an address; the entry's Index goes in
// GlobalRoute.SGIDIndex and its GID to the peer. When the port (or
// netdev) has no RoCE v2 GID, as an InfiniBand port has none, the
// error matches os.ErrNotExist and lists what the port has. It needs
// Linux 5.10 or later (the GID table query).
func (c *Context) RoCEv2GID(port int, netdev string) (GIDEntry, error) {
	if c == nil {
		return GIDEntry{}, errNil("RoCEv2GID", "Context")
	}
	table, err := c.GIDTable(port)
	if err != nil {
		return GIDEntry{}, err
	}
	first := -1
	for i, e := range table {
		if e.Type != GIDTypeRoCEv2 || (netdev != "" && e.Netdev != netdev) {
			continue
		}
		if e.GID.Addr().Is4() {
			return e, nil
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		return table[first], nil
	}
	what := "of network device " + netdev
	if netdev == "" {
		what = "at all"
	}
	return GIDEntry{}, c.noRoCEv2GID("RoCEv2GID", port, what, table)
}

// noRoCEv2GID is the error for a GID the port does not have: it lists
// the port's RoCE v2 GIDs, or says that it has none and what it has.
func (c *Context) noRoCEv2GID(op string, port int, what string, table []GIDEntry) error {
	var v2 []string
	types := map[GIDType]bool{}
	for _, e := range table {
		types[e.Type] = true
		if e.Type == GIDTypeRoCEv2 {
			s := strconv.Itoa(e.Index) + " " + e.GID.Addr().String()
			if e.Netdev != "" {
				s += " (" + e.Netdev + ")"
			}
			v2 = append(v2, s)
		}
	}
	var have string
	switch {
	case len(v2) > 0:
		have = "its RoCE v2 GIDs are " + strings.Join(v2, ", ")
	case len(table) == 0:
		have = "its GID table is empty (is its network device up, with an address?)"
	case types[GIDTypeIB]:
		have = "it is an InfiniBand port: address peers by LID, or by its IB GIDs (GIDTable)"
	default:
		have = "it has RoCE v1 GIDs only"
	}
	return fmt.Errorf("uverbs %s: %s port %d has no RoCE v2 GID %s; %s: %w", op, c.dev.Name, port, what, have, os.ErrNotExist)
}
