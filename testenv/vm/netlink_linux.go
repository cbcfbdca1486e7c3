package vm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/purerdma/rdma/internal/netlink"
	"github.com/purerdma/rdma/internal/rdmanl"
	"golang.org/x/sys/unix"
)

// The guest's network is described as Go values (network) and set up
// over rtnetlink on the shared codec (internal/netlink): every request is
// the one iproute2's `ip` sends for the same change (netlink_linux_test.go
// keeps two byte for byte), so no iproute2 is needed in the guest.

// network is a piece of the guest's network. apply sets it up in the
// order of the fields: veth pairs, then each link's name, MTU and state,
// addresses, policy rules (added or deleted, in order), routes and pinned
// neighbours.
type network struct {
	Veths  []veth
	Links  []link
	Addrs  []addr
	Rules  []rule
	Routes []route
	Neighs []neigh
}

// veth is a veth pair (ip link add NAME type veth peer name PEER).
type veth struct{ Name, Peer string }

// link changes one network device (ip link set).
type link struct {
	Name   string
	Rename string // a new name, set first; "" keeps Name
	MTU    uint32 // 0 keeps the MTU
	Up     bool
}

// addr is an address on a device (ip addr add PREFIX dev DEV [nodad]).
type addr struct {
	Dev    string
	Prefix netip.Prefix
	NoDAD  bool // no duplicate address detection (IPv6)
}

// rule is a policy routing rule (ip [-6] rule add|del ...).
type rule struct {
	IPv6     bool
	Delete   bool         // remove the rule with this Pref instead of adding one
	Pref     uint32       // FRA_PRIORITY
	IIf      string       // input interface, "" for any
	From, To netip.Prefix // the zero Prefix matches any address
	Table    uint8        // lookup TABLE (unix.RT_TABLE_LOCAL for local); 0 only with Delete
}

// route is a route without a gateway in a routing table (ip [-6] route
// add DST dev DEV src SRC table TABLE).
type route struct {
	Dst   netip.Prefix
	Dev   string
	Src   netip.Addr
	Table uint8
}

// neigh pins a neighbour (ip neigh replace ADDR lladdr MAC dev DEV nud
// permanent). The hardware address is MAC, or that of device MACOf.
type neigh struct {
	Addr  netip.Addr
	Dev   string
	MAC   string // aa:bb:cc:dd:ee:ff
	MACOf string
}

// host is the prefix of one address, as `ip` reads an address without /bits.
func host(s string) netip.Prefix {
	a := netip.MustParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

// prefix parses a literal ADDR/BITS.
func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// rtRequest is one rtnetlink request: what for errors, the message type,
// flags and body (the family header and attributes).
type rtRequest struct {
	what  string
	typ   uint16
	flags uint16
	body  func(e *netlink.Encoder)
}

// encode builds the request with sequence number seq and NLM_F_ACK.
func (r rtRequest) encode(seq uint32) []byte {
	e := netlink.NewRequest(r.typ, r.flags|netlink.FlagRequest|netlink.FlagAck, seq)
	r.body(e)
	return e.Finish()
}

// lookups are how requests name devices: index by name and hardware
// address by name (sysfs in the guest, a table in tests).
type lookups struct {
	index func(name string) (uint32, error)
	mac   func(name string) (string, error)
}

var sysfsLookups = lookups{index: ifIndex, mac: hwAddr}

// check validates n without looking anything up: bad values are errors
// before any request is sent.
func (n *network) check() error {
	for _, v := range n.Veths {
		if v.Name == "" || v.Peer == "" {
			return fmt.Errorf("veth %q peer %q: both need a name", v.Name, v.Peer)
		}
	}
	for _, l := range n.Links {
		if l.Name == "" {
			return errors.New("link without a name")
		}
	}
	for _, a := range n.Addrs {
		if !a.Prefix.IsValid() || a.Dev == "" {
			return fmt.Errorf("address %v dev %q: want a prefix and a device", a.Prefix, a.Dev)
		}
		if a.NoDAD && !a.Prefix.Addr().Is6() {
			return fmt.Errorf("address %v: nodad is for IPv6", a.Prefix)
		}
	}
	for _, r := range n.Rules {
		for _, p := range []netip.Prefix{r.From, r.To} {
			if p.IsValid() && p.Addr().Is6() != r.IPv6 {
				return fmt.Errorf("rule pref %d: %v does not match the rule's family", r.Pref, p)
			}
		}
		if !r.Delete && r.Table == 0 {
			return fmt.Errorf("rule pref %d: an added rule needs a table", r.Pref)
		}
	}
	for _, r := range n.Routes {
		if !r.Dst.IsValid() || !r.Src.IsValid() || r.Dst.Addr().Is6() != r.Src.Is6() || r.Table == 0 || r.Dev == "" {
			return fmt.Errorf("route %v dev %q src %v table %d: want a destination and source of one family, a device and a table", r.Dst, r.Dev, r.Src, r.Table)
		}
	}
	for _, nb := range n.Neighs {
		if !nb.Addr.IsValid() || nb.Dev == "" || (nb.MAC == "") == (nb.MACOf == "") {
			return fmt.Errorf("neighbour %v dev %q: want an address, a device and one of MAC and MACOf", nb.Addr, nb.Dev)
		}
		if nb.MAC != "" {
			if _, err := parseMAC(nb.MAC); err != nil {
				return err
			}
		}
	}
	return nil
}

// steps lists n's changes in order, each encoded when its turn comes
// (a device created by one step is looked up by a later one).
func (n *network) steps() []func(lookups) (rtRequest, error) {
	var s []func(lookups) (rtRequest, error)
	for _, v := range n.Veths {
		s = append(s, func(lookups) (rtRequest, error) { return v.request(), nil })
	}
	for _, l := range n.Links {
		name := l.Name
		if l.Rename != "" {
			s = append(s, func(lk lookups) (rtRequest, error) { return l.renameRequest(lk) })
			name = l.Rename
		}
		if l.MTU != 0 {
			s = append(s, func(lk lookups) (rtRequest, error) { return mtuRequest(name, l.MTU, lk) })
		}
		if l.Up {
			s = append(s, func(lk lookups) (rtRequest, error) { return upRequest(name, lk) })
		}
	}
	for _, a := range n.Addrs {
		s = append(s, a.request)
	}
	for _, r := range n.Rules {
		s = append(s, func(lookups) (rtRequest, error) { return r.request(), nil })
	}
	for _, r := range n.Routes {
		s = append(s, r.request)
	}
	for _, nb := range n.Neighs {
		s = append(s, nb.request)
	}
	return s
}

// apply sets n up over the rtnetlink socket c.
func (n *network) apply(c *netlink.Conn, lk lookups) error {
	if err := n.check(); err != nil {
		return fmt.Errorf("guest network: %w", err)
	}
	for _, step := range n.steps() {
		r, err := step(lk)
		if err != nil {
			return fmt.Errorf("guest network: %w", err)
		}
		if _, err := c.Execute(false, r.encode); err != nil {
			return fmt.Errorf("guest network: %s: %w", r.what, err)
		}
	}
	return nil
}

// applyNetwork sets n up over a new rtnetlink socket.
func applyNetwork(n *network) error {
	c, err := netlink.Dial(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("guest network: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return fmt.Errorf("guest network: %w", err)
	}
	return n.apply(c, sysfsLookups)
}

// vethInfoPeer is VETH_INFO_PEER (linux/veth.h), which x/sys/unix lacks.
const vethInfoPeer = 1

func ifInfomsg(index uint32, flags, change uint32) []byte {
	b := []byte{unix.AF_UNSPEC, 0, 0, 0}
	b = binary.NativeEndian.AppendUint32(b, index)
	b = binary.NativeEndian.AppendUint32(b, flags)
	return binary.NativeEndian.AppendUint32(b, change)
}

func (v veth) request() rtRequest {
	return rtRequest{
		what:  fmt.Sprintf("link add %s type veth peer name %s", v.Name, v.Peer),
		typ:   unix.RTM_NEWLINK,
		flags: netlink.FlagCreate | netlink.FlagExcl,
		body: func(e *netlink.Encoder) {
			e.Fixed(ifInfomsg(0, 0, 0))
			e.String(unix.IFLA_IFNAME, v.Name)
			e.Begin(unix.IFLA_LINKINFO)
			e.Attr(unix.IFLA_INFO_KIND, []byte("veth")) // no NUL, as iproute2 sends it
			e.Begin(unix.IFLA_INFO_DATA)
			e.Begin(vethInfoPeer)
			e.Fixed(ifInfomsg(0, 0, 0))
			e.String(unix.IFLA_IFNAME, v.Peer)
			e.End()
			e.End()
			e.End()
		},
	}
}

func (l link) renameRequest(lk lookups) (rtRequest, error) {
	idx, err := lk.index(l.Name)
	if err != nil {
		return rtRequest{}, err
	}
	return rtRequest{
		what: fmt.Sprintf("link set dev %s name %s", l.Name, l.Rename),
		typ:  unix.RTM_NEWLINK,
		body: func(e *netlink.Encoder) {
			e.Fixed(ifInfomsg(idx, 0, 0))
			e.String(unix.IFLA_IFNAME, l.Rename)
		},
	}, nil
}

func mtuRequest(name string, mtu uint32, lk lookups) (rtRequest, error) {
	idx, err := lk.index(name)
	if err != nil {
		return rtRequest{}, err
	}
	return rtRequest{
		what: fmt.Sprintf("link set dev %s mtu %d", name, mtu),
		typ:  unix.RTM_NEWLINK,
		body: func(e *netlink.Encoder) {
			e.Fixed(ifInfomsg(idx, 0, 0))
			e.Uint32(unix.IFLA_MTU, mtu)
		},
	}, nil
}

func upRequest(name string, lk lookups) (rtRequest, error) {
	idx, err := lk.index(name)
	if err != nil {
		return rtRequest{}, err
	}
	return rtRequest{
		what: "link set " + name + " up",
		typ:  unix.RTM_NEWLINK,
		body: func(e *netlink.Encoder) { e.Fixed(ifInfomsg(idx, unix.IFF_UP, unix.IFF_UP)) },
	}, nil
}

func family(a netip.Addr) uint8 {
	if a.Is6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func (a addr) request(lk lookups) (rtRequest, error) {
	idx, err := lk.index(a.Dev)
	if err != nil {
		return rtRequest{}, err
	}
	var flags uint8
	if a.NoDAD {
		flags |= unix.IFA_F_NODAD
	}
	ip := a.Prefix.Addr()
	return rtRequest{
		what:  fmt.Sprintf("addr add %v dev %s", a.Prefix, a.Dev),
		typ:   unix.RTM_NEWADDR,
		flags: netlink.FlagCreate | netlink.FlagExcl,
		body: func(e *netlink.Encoder) {
			e.Fixed(binary.NativeEndian.AppendUint32([]byte{family(ip), uint8(a.Prefix.Bits()), flags, 0}, idx)) // struct ifaddrmsg
			e.Attr(unix.IFA_LOCAL, ip.AsSlice())
			e.Attr(unix.IFA_ADDRESS, ip.AsSlice())
		},
	}, nil
}

func (r rule) request() rtRequest {
	fam := uint8(unix.AF_INET)
	if r.IPv6 {
		fam = unix.AF_INET6
	}
	hdr := []byte{fam, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // struct fib_rule_hdr
	if r.From.IsValid() {
		hdr[2] = uint8(r.From.Bits()) // src_len
	}
	if r.To.IsValid() {
		hdr[1] = uint8(r.To.Bits()) // dst_len
	}
	if r.Table != 0 {
		hdr[4], hdr[7] = r.Table, unix.FR_ACT_TO_TBL
	}
	v6 := map[bool]string{true: "-6 "}[r.IPv6]
	req := rtRequest{
		what:  fmt.Sprintf("%srule add pref %d", v6, r.Pref),
		typ:   unix.RTM_NEWRULE,
		flags: netlink.FlagCreate | netlink.FlagExcl,
	}
	if r.Delete {
		req.what, req.typ, req.flags = fmt.Sprintf("%srule del pref %d", v6, r.Pref), unix.RTM_DELRULE, 0
	}
	req.body = func(e *netlink.Encoder) {
		e.Fixed(hdr)
		e.Uint32(unix.FRA_PRIORITY, r.Pref)
		if r.IIf != "" {
			e.String(unix.FRA_IIFNAME, r.IIf)
		}
		if r.From.IsValid() {
			e.Attr(unix.FRA_SRC, r.From.Addr().AsSlice())
		}
		if r.To.IsValid() {
			e.Attr(unix.FRA_DST, r.To.Addr().AsSlice())
		}
	}
	return req
}

func (r route) request(lk lookups) (rtRequest, error) {
	idx, err := lk.index(r.Dev)
	if err != nil {
		return rtRequest{}, err
	}
	fam := family(r.Dst.Addr())
	scope := uint8(unix.RT_SCOPE_LINK) // a route without a gateway; iproute2 leaves IPv6's universal
	if fam == unix.AF_INET6 {
		scope = unix.RT_SCOPE_UNIVERSE
	}
	return rtRequest{
		what:  fmt.Sprintf("route add %v dev %s src %v table %d", r.Dst, r.Dev, r.Src, r.Table),
		typ:   unix.RTM_NEWROUTE,
		flags: netlink.FlagCreate | netlink.FlagExcl,
		body: func(e *netlink.Encoder) {
			e.Fixed([]byte{fam, uint8(r.Dst.Bits()), 0, 0, r.Table, unix.RTPROT_BOOT, scope, unix.RTN_UNICAST, 0, 0, 0, 0}) // struct rtmsg
			e.Attr(unix.RTA_DST, r.Dst.Addr().AsSlice())
			e.Attr(unix.RTA_PREFSRC, r.Src.AsSlice())
			e.Uint32(unix.RTA_OIF, idx)
		},
	}, nil
}

func (n neigh) request(lk lookups) (rtRequest, error) {
	idx, err := lk.index(n.Dev)
	if err != nil {
		return rtRequest{}, err
	}
	macs := n.MAC
	if n.MACOf != "" {
		if macs, err = lk.mac(n.MACOf); err != nil {
			return rtRequest{}, err
		}
	}
	mac, err := parseMAC(macs)
	if err != nil {
		return rtRequest{}, err
	}
	hdr := []byte{family(n.Addr), 0, 0, 0} // struct ndmsg
	hdr = binary.NativeEndian.AppendUint32(hdr, idx)
	hdr = binary.NativeEndian.AppendUint16(hdr, unix.NUD_PERMANENT)
	hdr = append(hdr, 0, 0) // flags, type
	return rtRequest{
		what:  fmt.Sprintf("neigh replace %v lladdr %s dev %s nud permanent", n.Addr, macs, n.Dev),
		typ:   unix.RTM_NEWNEIGH,
		flags: netlink.FlagCreate | netlink.FlagReplace,
		body: func(e *netlink.Encoder) {
			e.Fixed(hdr)
			e.Attr(unix.NDA_DST, n.Addr.AsSlice())
			e.Attr(unix.NDA_LLADDR, mac)
		},
	}, nil
}

// ifIndex is a network device's index, from sysfs.
func ifIndex(name string) (uint32, error) {
	b, err := os.ReadFile("/sys/class/net/" + name + "/ifindex")
	if err != nil {
		return 0, fmt.Errorf("network device %s: %w", name, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	return uint32(n), err
}

// hwAddr is a network device's hardware address, from sysfs.
func hwAddr(name string) (string, error) {
	b, err := os.ReadFile("/sys/class/net/" + name + "/address")
	if err != nil {
		return "", fmt.Errorf("network device %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// parseMAC reads a 6-byte MAC address written as sysfs writes it
// (aa:bb:cc:dd:ee:ff). Not net.ParseMAC: package net would make cgo
// builds of cmd/rxevm dynamically linked.
func parseMAC(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) != 6 || len(s) != 17 {
		return nil, fmt.Errorf("bad MAC address %q", s)
	}
	return b, nil
}

// rdmaCMListen is enum rdma_cm_state's RDMA_CM_LISTEN.
const rdmaCMListen = 8

// cmListener is one listening rdma_cm ID.
type cmListener struct {
	Addr netip.AddrPort
	TID  int // the thread that created it
}

// cmListeners lists the listening rdma_cm IDs tracked on the RDMA
// devices with the given indexes (rdma res show cm_id). A listener bound
// to a device's address is tracked on that device.
func cmListeners(devs []uint32) ([]cmListener, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []cmListener
	for _, dev := range devs {
		res, err := c.Res(rdmanl.ResCMID, dev, "")
		if err != nil {
			return nil, err
		}
		out = append(out, listenersIn(res)...)
	}
	return out, nil
}

// listenersIn picks the listening IDs out of a cm_id resource dump.
func listenersIn(res rdmanl.Res) []cmListener {
	var out []cmListener
	for i := range res.Entries {
		e := &res.Entries[i]
		if !e.Has(rdmanl.AttrState) || e.State != rdmaCMListen || !e.Has(rdmanl.AttrPID) || !e.Has(rdmanl.AttrSrcAddr) || !e.SrcAddr.IsValid() {
			continue
		}
		out = append(out, cmListener{Addr: e.SrcAddr, TID: int(e.PID)})
	}
	return out
}
