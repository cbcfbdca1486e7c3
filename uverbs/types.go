package uverbs

import (
	"fmt"
	"strconv"
	"strings"
)

// GUID is a 64-bit InfiniBand globally unique identifier, held in host
// byte order: the GUID 5054:00ff:fe12:3456 is GUID(0x505400fffe123456).
type GUID uint64

// String formats g as 16 hex digits, the way ibv_devices prints node
// GUIDs: "505400fffe123456".
func (g GUID) String() string { return fmt.Sprintf("%016x", uint64(g)) }

// Colon formats g as four colon-separated groups, the way sysfs and
// ibv_devinfo print GUIDs: "5054:00ff:fe12:3456".
func (g GUID) Colon() string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// ParseGUID parses a GUID in either form String and Colon print:
// "505400fffe123456" or "5054:00ff:fe12:3456".
func ParseGUID(s string) (GUID, error) {
	hex := s
	if strings.Contains(s, ":") {
		groups := strings.Split(s, ":")
		if len(groups) != 4 {
			return 0, fmt.Errorf("malformed GUID %q: want 4 groups", s)
		}
		var b strings.Builder
		for _, g := range groups {
			if len(g) == 0 || len(g) > 4 {
				return 0, fmt.Errorf("malformed GUID %q", s)
			}
			b.WriteString(strings.Repeat("0", 4-len(g)))
			b.WriteString(g)
		}
		hex = b.String()
	}
	if len(hex) == 0 || len(hex) > 16 {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed GUID %q", s)
	}
	return GUID(v), nil
}

// NodeType is the kind of an RDMA device, as enum ibv_node_type.
type NodeType int

// Node types, numbered as the kernel's RDMA_NODE_* and ibv_node_type.
const (
	NodeUnknown     NodeType = -1
	NodeCA          NodeType = 1 // InfiniBand channel adapter (also RoCE)
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4 // iWARP
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// String returns the description libibverbs' ibv_node_type_str gives.
func (t NodeType) String() string {
	switch t {
	case NodeCA:
		return "InfiniBand channel adapter"
	case NodeSwitch:
		return "InfiniBand switch"
	case NodeRouter:
		return "InfiniBand router"
	case NodeRNIC:
		return "iWARP NIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	case NodeUnspecified:
		return "unspecified"
	}
	return "unknown"
}

// Transport is the transport of an RDMA device, as enum
// ibv_transport_type.
type Transport int

// Transports, numbered as ibv_transport_type.
const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0 // InfiniBand, also RoCE
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// String returns the name ibv_devinfo prints for the transport.
func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "unknown"
}

// Transport derives the transport from the node type the way libibverbs
// does when it registers a device.
func (t NodeType) Transport() Transport {
	switch t {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

// PortState is the logical state of a port, as enum ibv_port_state.
type PortState int

// Port states, numbered as ibv_port_state and the kernel's ib_port_state.
const (
	PortNOP         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// String returns the name ibv_devinfo prints for the state, such as
// "PORT_ACTIVE".
func (s PortState) String() string {
	switch s {
	case PortNOP:
		return "PORT_NOP"
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	case PortActiveDefer:
		return "PORT_ACTIVE_DEFER"
	}
	return "PortState(" + strconv.Itoa(int(s)) + ")"
}
