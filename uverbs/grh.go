package uverbs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// GRHLen is the 40 bytes a UD receive buffer starts with (ibv_grh): the
// packet's global route header, or on RoCE v2 over IPv4 20 unused bytes
// and the IPv4 header.
const GRHLen = 40

// GRH is what a received datagram's 40-byte header area says about its
// sender, decoded as rdma-core's ibv_init_ah_from_wc reads it.
type GRH struct {
	Version      int // 4 (RoCE v2 over IPv4) or 6 (IPv6 or IB GRH)
	Src, Dst     GID // IPv4 addresses as ::ffff:a.b.c.d
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	// NextHeader is 17 (UDP) for RoCE v2, 0x1b for IB / RoCE v1; 0 for IPv4.
	NextHeader uint8
}

// ParseGRH decodes the header area of a UD receive. b must hold at
// least GRHLen bytes.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHLen {
		return GRH{}, fmt.Errorf("uverbs ParseGRH: %d bytes, want %d: %w", len(b), GRHLen, errInvalid)
	}
	vtf := binary.BigEndian.Uint32(b[0:4])
	g := GRH{FlowLabel: vtf & 0xfffff}
	ip4 := b[20:40]
	switch {
	case vtf>>28 != 6 && ip4[0]>>4 == 4:
		g.Version = 4
	case vtf>>28 != 6:
		return GRH{}, fmt.Errorf("uverbs ParseGRH: neither IPv6 nor IPv4 (version nibble %d): %w", vtf>>28, ErrNotSupported)
	case ip4[0] == 0x45 && ipv4Checksum(ip4) == binary.BigEndian.Uint16(ip4[10:12]):
		// Both version fields can read as valid; a correct IPv4 header
		// checksum decides, as in rdma-core.
		g.Version = 4
	default:
		g.Version = 6
	}
	if g.Version == 4 {
		g.Src = v4GID(ip4[12:16])
		g.Dst = v4GID(ip4[16:20])
		g.HopLimit = ip4[8]
		g.TrafficClass = ip4[1]
		return g, nil
	}
	g.TrafficClass = uint8(vtf >> 20)
	g.NextHeader = b[6]
	g.HopLimit = b[7]
	copy(g.Src[:], b[8:24])
	copy(g.Dst[:], b[24:40])
	return g, nil
}

func v4GID(a []byte) GID {
	var g GID
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], a)
	return g
}

// ipv4Checksum is the header checksum of a 20-byte IPv4 header, its
// checksum field counted as zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// InitAHFromWC builds the address to reply to the sender of a received
// UD datagram (ibv_init_ah_from_wc): grh is the first GRHLen bytes of the
// receive buffer, port the port the datagram arrived on.
func (c *Context) InitAHFromWC(port int, wc *WorkCompletion, grh []byte) (AHAttr, error) {
	if c == nil {
		return AHAttr{}, errNil("InitAHFromWC", "Context")
	}
	if wc == nil {
		return AHAttr{}, errNil("InitAHFromWC", "work completion")
	}
	if port < 1 || port > 255 {
		return AHAttr{}, fmt.Errorf("uverbs InitAHFromWC: port %d: %w", port, errInvalid)
	}
	a := AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, PortNum: port}
	if wc.Flags&WCWithGRH == 0 {
		return a, nil
	}
	g, err := ParseGRH(grh)
	if err != nil {
		return AHAttr{}, err
	}
	if g.Dst[0] == 0xff || g.Version == 4 && g.Dst[12]&0xf0 == 0xe0 {
		return AHAttr{}, fmt.Errorf("uverbs InitAHFromWC: the datagram went to a multicast group: %w", errInvalid)
	}
	roceV2 := true
	if g.Version == 6 {
		switch g.NextHeader {
		case 17:
		case 0x1b:
			roceV2 = false
		default:
			return AHAttr{}, fmt.Errorf("uverbs InitAHFromWC: next header %#x: %w", g.NextHeader, ErrNotSupported)
		}
	}
	idx, err := c.findGIDIndex(port, g.Dst, roceV2)
	if err != nil {
		return AHAttr{}, err
	}
	if idx > 0xff {
		return AHAttr{}, fmt.Errorf("uverbs InitAHFromWC: the datagram's destination is GID index %d, past the 255 an address handle can name: %w", idx, ErrNotSupported)
	}
	a.IsGlobal = true
	a.GRH = GlobalRoute{DGID: g.Src, SGIDIndex: idx, HopLimit: g.HopLimit, TrafficClass: g.TrafficClass, FlowLabel: g.FlowLabel}
	return a, nil
}

// CreateAHFromWC creates an AH addressed to a received datagram's sender
// (ibv_create_ah_from_wc).
func (pd *PD) CreateAHFromWC(port int, wc *WorkCompletion, grh []byte) (*AH, error) {
	if pd == nil {
		return nil, errNil("CreateAHFromWC", "PD")
	}
	a, err := pd.ctx.InitAHFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(a)
}

// String prints the GID the way ibv_devinfo does for IPv4-mapped ones
// too; see GID.String.
func (g GRH) String() string {
	return fmt.Sprintf("GRHv%d %s -> %s hop %d tclass %d flow %#x", g.Version,
		netip.AddrFrom16(g.Src), netip.AddrFrom16(g.Dst), g.HopLimit, g.TrafficClass, g.FlowLabel)
}
