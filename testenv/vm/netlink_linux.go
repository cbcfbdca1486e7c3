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

	"golang.org/x/sys/unix"
)

// The empty-root VM has no iproute2: its init sets the network up with
// the same `ip` command lines as the normal VM (networkCommands), sent as
// rtnetlink requests by ipNetlink. Only the forms networkCommands uses are
// understood; anything else is an error, never a guess.

// nlMessage is one netlink request under construction: the header, the
// family's fixed header, then attributes (nested ones included).
type nlMessage struct {
	b     []byte
	nests []int
}

// vethInfoPeer is VETH_INFO_PEER (linux/veth.h), which x/sys/unix lacks.
const vethInfoPeer = 1

func newNLMessage(typ, flags uint16, family []byte) *nlMessage {
	m := &nlMessage{b: make([]byte, unix.SizeofNlMsghdr, 256)}
	binary.NativeEndian.PutUint16(m.b[4:], typ)
	binary.NativeEndian.PutUint16(m.b[6:], flags|unix.NLM_F_REQUEST)
	m.b = append(m.b, family...)
	m.pad()
	return m
}

func (m *nlMessage) pad() {
	for len(m.b)%4 != 0 {
		m.b = append(m.b, 0)
	}
}

func (m *nlMessage) attr(typ uint16, data []byte) {
	m.pad()
	m.b = binary.NativeEndian.AppendUint16(m.b, uint16(unix.SizeofRtAttr+len(data)))
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = append(m.b, data...)
	m.pad()
}

func (m *nlMessage) attrString(typ uint16, s string) { m.attr(typ, append([]byte(s), 0)) }

func (m *nlMessage) attrUint32(typ uint16, v uint32) {
	m.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// begin opens a nested attribute; end closes the innermost one.
func (m *nlMessage) begin(typ uint16) {
	m.pad()
	m.nests = append(m.nests, len(m.b))
	m.b = binary.NativeEndian.AppendUint16(m.b, 0)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ) // no NLA_F_NESTED, as iproute2
}

func (m *nlMessage) end() {
	start := m.nests[len(m.nests)-1]
	m.nests = m.nests[:len(m.nests)-1]
	binary.NativeEndian.PutUint16(m.b[start:], uint16(len(m.b)-start))
}

// bytes finishes the message with its length and sequence number.
func (m *nlMessage) bytes(seq uint32) []byte {
	binary.NativeEndian.PutUint32(m.b[0:], uint32(len(m.b)))
	binary.NativeEndian.PutUint32(m.b[8:], seq)
	return m.b
}

// nlConn is a blocking netlink socket for the guest's set-up, one
// request at a time.
type nlConn struct {
	fd  int
	seq uint32
}

func dialNetlink(proto int) (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(int64(10 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &nlConn{fd: fd}, nil
}

func (c *nlConn) Close() error { return unix.Close(c.fd) }

// do sends m and returns the payloads of the answers: none for a
// request (NLM_F_ACK is added and the acknowledgment awaited), every
// message up to NLMSG_DONE for a dump (NLM_F_DUMP set by the caller).
func (c *nlConn) do(m *nlMessage) ([][]byte, error) {
	flags := binary.NativeEndian.Uint16(m.b[6:])
	dump := flags&unix.NLM_F_DUMP == unix.NLM_F_DUMP
	if !dump {
		binary.NativeEndian.PutUint16(m.b[6:], flags|unix.NLM_F_ACK)
	}
	c.seq++
	if err := unix.Sendto(c.fd, m.bytes(c.seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out [][]byte
	buf := make([]byte, 1<<20)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, err
		}
		b := buf[:n]
		for len(b) >= unix.SizeofNlMsghdr {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < unix.SizeofNlMsghdr || l > len(b) {
				return nil, fmt.Errorf("netlink: bad message length %d", l)
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			seq := binary.NativeEndian.Uint32(b[8:])
			payload := b[unix.SizeofNlMsghdr:l]
			b = b[min(nlAlign(l), len(b)):]
			if seq != c.seq {
				continue
			}
			switch typ {
			case unix.NLMSG_ERROR, unix.NLMSG_DONE:
				var errno int32
				if len(payload) >= 4 {
					errno = int32(binary.NativeEndian.Uint32(payload))
				}
				if errno != 0 {
					return nil, unix.Errno(-errno)
				}
				return out, nil
			default:
				out = append(out, append([]byte(nil), payload...))
			}
		}
	}
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

// nlAttrs splits b into attributes: type (nesting flag cleared) to value.
// A type that appears again keeps its first value; nlAttrList keeps all.
func nlAttrs(b []byte) map[uint16][]byte {
	m := map[uint16][]byte{}
	for _, a := range nlAttrList(b) {
		if _, ok := m[a.typ]; !ok {
			m[a.typ] = a.data
		}
	}
	return m
}

type nlAttr struct {
	typ  uint16
	data []byte
}

func nlAttrList(b []byte) []nlAttr {
	var out []nlAttr
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < unix.SizeofRtAttr || l > len(b) {
			break
		}
		out = append(out, nlAttr{binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), b[unix.SizeofRtAttr:l]})
		b = b[min(nlAlign(l), len(b)):]
	}
	return out
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

// ipNetlink runs one `ip` command line (without "ip") of networkCommands
// over rtnetlink: what iproute2 would send for it.
func ipNetlink(c *nlConn, args []string) error {
	m, err := ipMessage(args, ifIndex)
	if err != nil {
		return fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	if _, err := c.do(m); err != nil {
		return fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// ipMessage encodes an `ip` command line as iproute2 does; index looks
// network devices up.
func ipMessage(args []string, index func(string) (uint32, error)) (*nlMessage, error) {
	family := uint8(unix.AF_INET)
	if len(args) > 0 && args[0] == "-6" {
		family, args = unix.AF_INET6, args[1:]
	}
	if len(args) < 2 {
		return nil, errors.New("too short")
	}
	obj, verb, rest := args[0], args[1], args[2:]
	// kv reads "key value" pairs and bare flags, in any order.
	kv := map[string]string{}
	var pos []string
	for i := 0; i < len(rest); i++ {
		switch k := rest[i]; k {
		case "nodad", "up":
			kv[k] = ""
		case "peer": // peer name NAME
			if i+2 >= len(rest) || rest[i+1] != "name" {
				return nil, errors.New("peer needs name NAME")
			}
			kv[k] = rest[i+2]
			i += 2
		case "dev", "type", "pref", "iif", "from", "to", "lookup", "src", "table", "lladdr", "nud":
			if i+1 >= len(rest) {
				return nil, fmt.Errorf("%s needs a value", k)
			}
			kv[k] = rest[i+1]
			i++
		default:
			pos = append(pos, k)
		}
	}
	used := map[string]bool{}
	get := func(k string) (string, bool) { v, ok := kv[k]; used[k] = true; return v, ok }
	dev := func(k string) (uint32, error) {
		name, ok := get(k)
		if !ok {
			return 0, fmt.Errorf("no %s", k)
		}
		return index(name)
	}
	var m *nlMessage
	switch obj + " " + verb {
	case "link set":
		if len(pos) != 1 {
			return nil, errors.New("link set takes one device")
		}
		if _, up := get("up"); !up {
			return nil, errors.New("link set: only up is supported")
		}
		idx, err := index(pos[0])
		if err != nil {
			return nil, err
		}
		m = newNLMessage(unix.RTM_NEWLINK, 0, ifInfomsg(idx, unix.IFF_UP, unix.IFF_UP))
	case "link add":
		// link add NAME type veth peer name PEER
		peer, _ := get("peer")
		if typ, _ := get("type"); len(pos) != 1 || typ != "veth" || peer == "" {
			return nil, errors.New("link add: only NAME type veth peer name PEER is supported")
		}
		m = newNLMessage(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, ifInfomsg(0, 0, 0))
		m.attrString(unix.IFLA_IFNAME, pos[0])
		m.begin(unix.IFLA_LINKINFO)
		m.attr(unix.IFLA_INFO_KIND, []byte("veth")) // no NUL, as iproute2 sends it
		m.begin(unix.IFLA_INFO_DATA)
		m.begin(vethInfoPeer)
		m.b = append(m.b, ifInfomsg(0, 0, 0)...)
		m.attrString(unix.IFLA_IFNAME, peer)
		m.end()
		m.end()
		m.end()
	case "addr add":
		if len(pos) != 1 {
			return nil, errors.New("addr add takes one prefix")
		}
		p, err := netip.ParsePrefix(pos[0])
		if err != nil {
			return nil, err
		}
		if err := checkFamily(family, p.Addr()); err != nil {
			return nil, err
		}
		idx, err := dev("dev")
		if err != nil {
			return nil, err
		}
		var flags uint8
		if _, ok := get("nodad"); ok {
			flags |= unix.IFA_F_NODAD
		}
		m = newNLMessage(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL,
			binary.NativeEndian.AppendUint32([]byte{family, uint8(p.Bits()), flags, 0}, idx))
		m.attr(unix.IFA_LOCAL, p.Addr().AsSlice())
		m.attr(unix.IFA_ADDRESS, p.Addr().AsSlice())
	case "rule add", "rule del":
		if len(pos) != 0 {
			return nil, fmt.Errorf("rule: unexpected %v", pos)
		}
		typ, flags := uint16(unix.RTM_NEWRULE), uint16(unix.NLM_F_CREATE|unix.NLM_F_EXCL)
		if verb == "del" {
			typ, flags = unix.RTM_DELRULE, 0
		}
		hdr := []byte{family, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // struct fib_rule_hdr
		var attrs []func(*nlMessage)
		for _, f := range []struct {
			key string
			len int // fib_rule_hdr's src_len, dst_len
			typ uint16
		}{{"from", 2, unix.FRA_SRC}, {"to", 1, unix.FRA_DST}} {
			v, ok := get(f.key)
			if !ok {
				continue
			}
			p, err := parsePrefix(v)
			if err != nil {
				return nil, err
			}
			if err := checkFamily(family, p.Addr()); err != nil {
				return nil, err
			}
			hdr[f.len] = uint8(p.Bits())
			attrs = append(attrs, func(m *nlMessage) { m.attr(f.typ, p.Addr().AsSlice()) })
		}
		if v, ok := get("lookup"); ok {
			t, err := routeTable(v)
			if err != nil {
				return nil, err
			}
			hdr[4], hdr[7] = t, unix.FR_ACT_TO_TBL
		} else if verb == "add" {
			return nil, errors.New("rule add needs lookup")
		}
		m = newNLMessage(typ, flags, hdr)
		if v, ok := get("pref"); ok {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, err
			}
			m.attrUint32(unix.FRA_PRIORITY, uint32(n))
		}
		if v, ok := get("iif"); ok {
			m.attrString(unix.FRA_IIFNAME, v)
		}
		for _, a := range attrs {
			a(m)
		}
	case "route add":
		// route add ADDR dev DEV src ADDR table N
		if len(pos) != 1 {
			return nil, errors.New("route add takes one destination")
		}
		dst, err := parsePrefix(pos[0])
		if err != nil {
			return nil, err
		}
		srcs, _ := get("src")
		src, err := netip.ParseAddr(srcs)
		if err != nil {
			return nil, err
		}
		for _, a := range []netip.Addr{dst.Addr(), src} {
			if err := checkFamily(family, a); err != nil {
				return nil, err
			}
		}
		tv, _ := get("table")
		t, err := routeTable(tv)
		if err != nil {
			return nil, err
		}
		idx, err := dev("dev")
		if err != nil {
			return nil, err
		}
		scope := uint8(unix.RT_SCOPE_LINK) // a route without a gateway; iproute2 leaves IPv6's universal
		if family == unix.AF_INET6 {
			scope = unix.RT_SCOPE_UNIVERSE
		}
		m = newNLMessage(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, []byte{
			family, uint8(dst.Bits()), 0, 0, t, unix.RTPROT_BOOT, scope, unix.RTN_UNICAST, 0, 0, 0, 0})
		m.attr(unix.RTA_DST, dst.Addr().AsSlice())
		m.attr(unix.RTA_PREFSRC, src.AsSlice())
		m.attrUint32(unix.RTA_OIF, idx)
	case "neigh replace":
		// neigh replace ADDR lladdr MAC dev DEV nud permanent
		if len(pos) != 1 {
			return nil, errors.New("neigh replace takes one address")
		}
		a, err := netip.ParseAddr(pos[0])
		if err != nil {
			return nil, err
		}
		if nud, _ := get("nud"); nud != "permanent" {
			return nil, errors.New("neigh replace: only nud permanent is supported")
		}
		mv, _ := get("lladdr")
		mac, err := parseMAC(mv)
		if err != nil {
			return nil, err
		}
		idx, err := dev("dev")
		if err != nil {
			return nil, err
		}
		fam := uint8(unix.AF_INET)
		if a.Is6() {
			fam = unix.AF_INET6
		}
		hdr := []byte{fam, 0, 0, 0}
		hdr = binary.NativeEndian.AppendUint32(hdr, idx)
		hdr = binary.NativeEndian.AppendUint16(hdr, unix.NUD_PERMANENT)
		hdr = append(hdr, 0, 0) // flags, type
		m = newNLMessage(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, hdr)
		m.attr(unix.NDA_DST, a.AsSlice())
		m.attr(unix.NDA_LLADDR, mac)
	default:
		return nil, fmt.Errorf("%s %s is not supported", obj, verb)
	}
	for k := range kv {
		if !used[k] {
			return nil, fmt.Errorf("%s is not supported here", k)
		}
	}
	return m, nil
}

func ifInfomsg(index uint32, flags, change uint32) []byte {
	b := []byte{unix.AF_UNSPEC, 0, 0, 0}
	b = binary.NativeEndian.AppendUint32(b, index)
	b = binary.NativeEndian.AppendUint32(b, flags)
	return binary.NativeEndian.AppendUint32(b, change)
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

// parsePrefix reads an address or an address/bits prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func checkFamily(family uint8, a netip.Addr) error {
	if a.Is4() != (family == unix.AF_INET) {
		return fmt.Errorf("%v does not match the address family (ip -6)", a)
	}
	return nil
}

// routeTable reads a table name or number below 256 (the ones that fit
// the headers' 8-bit field).
func routeTable(s string) (uint8, error) {
	switch s {
	case "local":
		return unix.RT_TABLE_LOCAL, nil
	case "main":
		return unix.RT_TABLE_MAIN, nil
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("table %q: want local, main or 1-255", s)
	}
	return uint8(n), nil
}

// RDMA netlink (rdma/rdma_netlink.h): the resource tracking dump of
// rdma_cm IDs, as `rdma res show cm_id` reads it.
const (
	nldevCmdResCMIDGet    = 5<<10 + 11 // RDMA_NL_NLDEV << 10 + RDMA_NLDEV_CMD_RES_CM_ID_GET
	nldevAttrDevIndex     = 1
	nldevAttrResState     = 27
	nldevAttrResPID       = 28
	nldevAttrResCMID      = 30
	nldevAttrResCMIDEntry = 31
	nldevAttrResSrcAddr   = 33
	rdmaCMListen          = 8 // enum rdma_cm_state's RDMA_CM_LISTEN
)

// cmListener is one listening rdma_cm ID.
type cmListener struct {
	Addr netip.AddrPort
	TID  int // the thread that created it
}

// cmListeners lists the listening rdma_cm IDs tracked on the RDMA
// devices with the given indexes. A listener bound to a device's address
// is tracked on that device.
func cmListeners(devs []uint32) ([]cmListener, error) {
	c, err := dialNetlink(unix.NETLINK_RDMA)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []cmListener
	for _, dev := range devs {
		m := newNLMessage(nldevCmdResCMIDGet, unix.NLM_F_DUMP, nil)
		m.attrUint32(nldevAttrDevIndex, dev)
		msgs, err := c.do(m)
		if err != nil {
			return nil, fmt.Errorf("RDMA netlink RES_CM_ID_GET on device %d: %w", dev, err)
		}
		for _, p := range msgs {
			for _, table := range nlAttrList(p) {
				if table.typ != nldevAttrResCMID {
					continue
				}
				for _, e := range nlAttrList(table.data) {
					if e.typ != nldevAttrResCMIDEntry {
						continue
					}
					if l, ok := parseCMListener(nlAttrs(e.data)); ok {
						out = append(out, l)
					}
				}
			}
		}
	}
	return out, nil
}

func parseCMListener(a map[uint16][]byte) (cmListener, bool) {
	st, pid, sa := a[nldevAttrResState], a[nldevAttrResPID], a[nldevAttrResSrcAddr]
	if len(st) != 1 || st[0] != rdmaCMListen || len(pid) != 4 || len(sa) < 24 {
		return cmListener{}, false
	}
	port := binary.BigEndian.Uint16(sa[2:4])
	var addr netip.Addr
	switch binary.NativeEndian.Uint16(sa[0:2]) {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(sa[4:8]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16([16]byte(sa[8:24]))
	default:
		return cmListener{}, false
	}
	return cmListener{Addr: netip.AddrPortFrom(addr, port), TID: int(binary.NativeEndian.Uint32(pid))}, true
}
