package rdmanl

// This file holds RDMA netlink's requests and the decoders of its
// replies, on the shared codec (internal/netlink): no syscalls, so every
// function here is testable on any host and fuzzable.

import (
	"fmt"

	"github.com/purerdma/rdma/internal/netlink"
)

const netlinkRDMA = 20 // NETLINK_RDMA (<linux/netlink.h>)

// RDMA netlink constants from <rdma/rdma_netlink.h>.
const (
	clientNLDEV = 5 // RDMA_NL_NLDEV

	cmdGet     = 1  // RDMA_NLDEV_CMD_GET
	cmdNewLink = 3  // RDMA_NLDEV_CMD_NEWLINK
	cmdDelLink = 4  // RDMA_NLDEV_CMD_DELLINK
	cmdPortGet = 5  // RDMA_NLDEV_CMD_PORT_GET
	cmdSysGet  = 6  // RDMA_NLDEV_CMD_SYS_GET
	cmdChardev = 15 // RDMA_NLDEV_CMD_GET_CHARDEV

	attrDevIndex      = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	attrDevName       = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	attrPortIndex     = 3  // RDMA_NLDEV_ATTR_PORT_INDEX, u32
	attrFWVersion     = 5  // RDMA_NLDEV_ATTR_FW_VERSION, string
	attrNodeGUID      = 6  // RDMA_NLDEV_ATTR_NODE_GUID, u64
	attrSysImageGUID  = 7  // RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, u64
	attrPortState     = 12 // RDMA_NLDEV_ATTR_PORT_STATE, u8
	attrPortPhysState = 13 // RDMA_NLDEV_ATTR_PORT_PHYS_STATE, u8
	attrDevNodeType   = 14 // RDMA_NLDEV_ATTR_DEV_NODE_TYPE, u8
	attrNdevIndex     = 50 // RDMA_NLDEV_ATTR_NDEV_INDEX, u32
	attrNdevName      = 51 // RDMA_NLDEV_ATTR_NDEV_NAME, string
	attrLinkType      = 65 // RDMA_NLDEV_ATTR_LINK_TYPE, string
	attrDevProtocol   = 67 // RDMA_NLDEV_ATTR_DEV_PROTOCOL, string
	attrChardevType   = 69 // RDMA_NLDEV_ATTR_CHARDEV_TYPE, string
	attrChardevName   = 70 // RDMA_NLDEV_ATTR_CHARDEV_NAME, string
	attrChardevABI    = 71 // RDMA_NLDEV_ATTR_CHARDEV_ABI, u64
	attrChardev       = 72 // RDMA_NLDEV_ATTR_CHARDEV, u64 (dev_t)
	attrUverbsDriver  = 73 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, u32
	attrSysCopyOnFork = 93 // RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, u8
)

// nldevType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func nldevType(op uint16) uint16 { return clientNLDEV<<10 + op }

// cmdName names an nldev command for error messages.
func cmdName(op uint16) string {
	switch op {
	case cmdGet:
		return "GET"
	case cmdNewLink:
		return "NEWLINK"
	case cmdDelLink:
		return "DELLINK"
	case cmdPortGet:
		return "PORT_GET"
	case cmdChardev:
		return "GET_CHARDEV"
	case cmdSysGet:
		return "SYS_GET"
	case cmdResGet:
		return "RES_GET"
	case cmdResQPGet:
		return "RES_QP_GET"
	case cmdResCMIDGet:
		return "RES_CM_ID_GET"
	case cmdResCQGet:
		return "RES_CQ_GET"
	case cmdResMRGet:
		return "RES_MR_GET"
	case cmdResPDGet:
		return "RES_PD_GET"
	case cmdResCtxGet:
		return "RES_CTX_GET"
	case cmdResSRQGet:
		return "RES_SRQ_GET"
	case cmdStatGet:
		return "STAT_GET"
	}
	return fmt.Sprintf("command %d", op)
}

// newLinkRequest encodes RDMA_NLDEV_CMD_NEWLINK.
func newLinkRequest(seq uint32, name, linkType, netdev string) []byte {
	// No NLM_F_CREATE|NLM_F_EXCL: EXCL is 0x200, the same bit as
	// NLM_F_MATCH, and the RDMA netlink dispatcher takes any request with a
	// NLM_F_DUMP bit for a dump, which NEWLINK has not (EINVAL).
	e := netlink.NewRequest(nldevType(cmdNewLink), netlink.FlagRequest|netlink.FlagAck, seq)
	e.String(attrDevName, name)
	e.String(attrLinkType, linkType)
	e.String(attrNdevName, netdev)
	return e.Finish()
}

// delLinkRequest encodes RDMA_NLDEV_CMD_DELLINK.
func delLinkRequest(seq, index uint32) []byte {
	e := netlink.NewRequest(nldevType(cmdDelLink), netlink.FlagRequest|netlink.FlagAck, seq)
	e.Uint32(attrDevIndex, index)
	return e.Finish()
}

// getDumpRequest encodes a RDMA_NLDEV_CMD_GET dump of all devices.
func getDumpRequest(seq uint32) []byte {
	return netlink.NewRequest(nldevType(cmdGet), netlink.FlagRequest|netlink.FlagDump, seq).Finish()
}

// portDumpRequest encodes a RDMA_NLDEV_CMD_PORT_GET dump of the ports of
// one device. The kernel's nldev_port_get_dumpit requires the device
// index: it answers EINVAL without one.
func portDumpRequest(seq, index uint32) []byte {
	e := netlink.NewRequest(nldevType(cmdPortGet), netlink.FlagRequest|netlink.FlagDump, seq)
	e.Uint32(attrDevIndex, index)
	return e.Finish()
}

// parseDevice decodes the attributes of one RDMA_NLDEV_CMD_GET reply.
func parseDevice(b []byte) (Device, error) {
	var d Device
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return d, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrDevIndex:
			d.Index, err = a.Uint32()
		case attrDevName:
			d.Name = a.String()
		case attrPortIndex:
			d.PortCount, err = a.Uint32()
		case attrFWVersion:
			d.FWVersion = a.String()
		case attrNodeGUID:
			d.NodeGUID, err = a.Uint64()
		case attrSysImageGUID:
			d.SysImageGUID, err = a.Uint64()
		case attrDevNodeType:
			d.NodeType, err = a.Uint8()
		case attrDevProtocol:
			d.Protocol = a.String()
		}
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// parseLink decodes the attributes of one RDMA_NLDEV_CMD_PORT_GET reply.
func parseLink(b []byte) (Link, error) {
	var l Link
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return l, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrDevIndex:
			l.DevIndex, err = a.Uint32()
		case attrDevName:
			l.DevName = a.String()
		case attrPortIndex:
			l.Port, err = a.Uint32()
		case attrPortState:
			l.State, err = a.Uint8()
		case attrPortPhysState:
			l.PhysState, err = a.Uint8()
		case attrNdevIndex:
			l.NetdevIndex, err = a.Uint32()
		case attrNdevName:
			l.Netdev = a.String()
		}
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// chardevRequest encodes RDMA_NLDEV_CMD_GET_CHARDEV: which character
// device a client (e.g. "uverbs") exposes for the device at index.
func chardevRequest(seq, index uint32, client string) []byte {
	e := netlink.NewRequest(nldevType(cmdChardev), netlink.FlagRequest|netlink.FlagAck, seq)
	e.Uint32(attrDevIndex, index)
	e.String(attrChardevType, client)
	return e.Finish()
}

// parseChardev decodes a RDMA_NLDEV_CMD_GET_CHARDEV reply.
func parseChardev(b []byte) (Chardev, error) {
	var c Chardev
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return c, err
	}
	for _, a := range attrs {
		switch a.Type {
		case attrChardevName:
			c.Name = a.String()
		case attrChardevABI:
			c.ABI, err = a.Uint64()
		case attrChardev:
			c.Dev, err = a.Uint64()
		case attrUverbsDriver:
			c.DriverID, err = a.Uint32()
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func sysGetRequest(seq uint32) []byte {
	return netlink.NewRequest(nldevType(cmdSysGet), netlink.FlagRequest|netlink.FlagAck, seq).Finish()
}

// parseSystem decodes a RDMA_NLDEV_CMD_SYS_GET reply. A kernel before
// 5.13 sends no copy-on-fork attribute: it does not copy pinned pages.
func parseSystem(b []byte) (System, error) {
	var s System
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return s, err
	}
	for _, a := range attrs {
		if a.Type == attrSysCopyOnFork {
			v, err := a.Uint8()
			if err != nil {
				return s, err
			}
			s.CopyOnFork = v != 0
		}
	}
	return s, nil
}
