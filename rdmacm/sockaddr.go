package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Linux address families (linux/socket.h).
const (
	afInet  = 2
	afInet6 = 10
)

const (
	sizeofSockaddrIn  = 16
	sizeofSockaddrIn6 = 28
)

// encodeSockaddr encodes a as a struct sockaddr_in (an IPv4 or
// IPv4-mapped IPv6 address) or sockaddr_in6. A zone becomes the scope
// id: an interface name or number.
func encodeSockaddr(a netip.AddrPort) ([]byte, error) {
	ip := a.Addr()
	if !ip.IsValid() {
		return nil, fmt.Errorf("no address: %w", errInvalid)
	}
	if ip.Is4In6() && ip.Zone() == "" {
		ip = ip.Unmap()
	}
	if ip.Is4() {
		b := make([]byte, sizeofSockaddrIn)
		binary.NativeEndian.PutUint16(b[0:], afInet)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		a4 := ip.As4()
		copy(b[4:8], a4[:])
		return b, nil
	}
	b := make([]byte, sizeofSockaddrIn6)
	binary.NativeEndian.PutUint16(b[0:], afInet6)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	a16 := ip.As16()
	copy(b[8:24], a16[:])
	if z := ip.Zone(); z != "" {
		scope, err := zoneIndex(z)
		if err != nil {
			return nil, err
		}
		binary.NativeEndian.PutUint32(b[24:], scope)
	}
	return b, nil
}

// zoneIndex turns an IPv6 zone (an interface name or number) into a
// scope id.
func zoneIndex(z string) (uint32, error) {
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(z)
	if err != nil {
		return 0, fmt.Errorf("zone %q: %w", z, err)
	}
	return uint32(ifi.Index), nil
}

// decodeSockaddr decodes a struct sockaddr_in or sockaddr_in6 (the first
// bytes of a struct sockaddr_storage). Other families, such as AF_IB, and
// short input give the zero AddrPort.
func decodeSockaddr(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case afInet:
		if len(b) < sizeofSockaddrIn {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
	case afInet6:
		if len(b) < sizeofSockaddrIn6 {
			return netip.AddrPort{}
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:]); scope != 0 && ip.Is6() {
			z := strconv.FormatUint(uint64(scope), 10)
			if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
				z = ifi.Name
			}
			ip = ip.WithZone(z)
		}
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:]))
	}
	return netip.AddrPort{}
}
