// Package rdmanl is a small client for the kernel's RDMA netlink device
// interface (NETLINK_RDMA, client RDMA_NL_NLDEV): the interface behind
// iproute2's "rdma" tool. It lists RDMA devices and their ports, creates
// and removes software RDMA links (rxe, siw), and reads the kernel's
// resource tables and ports' hardware counters (res.go), which the
// public package rdmactl presents.
//
// The requests and reply decoders are written here on the project's
// netlink codec and socket (internal/netlink); no netlink library and no
// cgo are used.
//
// A Conn is safe for concurrent use: requests on one Conn are serialized.
package rdmanl

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
)

// Device is one RDMA device as reported by RDMA_NLDEV_CMD_GET. Attributes
// the kernel does not send stay zero.
type Device struct {
	Index        uint32 // RDMA_NLDEV_ATTR_DEV_INDEX
	Name         string // RDMA_NLDEV_ATTR_DEV_NAME, e.g. "rxe0"
	NodeGUID     uint64 // in host byte order
	SysImageGUID uint64 // in host byte order
	FWVersion    string
	NodeType     uint8  // RDMA_NODE_*: 1 is an InfiniBand CA
	Protocol     string // "ib", "roce", "iw", "opa" or "usnic"
	PortCount    uint32 // the number of the last port
}

// Link is one port of an RDMA device as reported by RDMA_NLDEV_CMD_PORT_GET.
type Link struct {
	DevIndex    uint32
	DevName     string
	Port        uint32 // 1-based
	State       uint8  // IB port state: 4 is ACTIVE
	PhysState   uint8  // IB physical port state: 5 is LINK_UP
	NetdevIndex uint32 // ifindex of the network device, 0 if none
	Netdev      string // name of the network device, "" if none
}

var linkStates = [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}

var physStates = [...]string{
	"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
	"LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE",
	"UNKNOWN", "OPA_TEST",
}

// StateName returns the port state the way "rdma link" prints it: NOP,
// DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, or UNKNOWN.
func (l Link) StateName() string {
	if int(l.State) < len(linkStates) {
		return linkStates[l.State]
	}
	return "UNKNOWN"
}

// PhysStateName returns the physical port state the way "rdma link" prints
// it: SLEEP, POLLING, DISABLED, LINK_UP, ..., or UNKNOWN.
func (l Link) PhysStateName() string {
	if int(l.PhysState) < len(physStates) {
		return physStates[l.PhysState]
	}
	return "UNKNOWN"
}

// OpError is the error returned for a failed RDMA netlink operation. It
// keeps the kernel's errno, so errors.Is(err, unix.EEXIST) works.
type OpError struct {
	Op      string // "NEWLINK", "DELLINK", "GET", "PORT_GET", "socket", ...
	Device  string // the RDMA device the operation was about, if any
	Err     error  // usually a unix.Errno
	Message string // the kernel's extended ACK message, or a hint
	// Kernel is set when the kernel answered the request with an error,
	// as opposed to the request not reaching it.
	Kernel bool
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("rdma netlink ")
	b.WriteString(e.Op)
	if e.Device != "" {
		b.WriteString(" ")
		b.WriteString(e.Device)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown error")
	}
	if e.Message != "" {
		b.WriteString(" (")
		b.WriteString(e.Message)
		b.WriteString(")")
	}
	return b.String()
}

func (e *OpError) Unwrap() error { return e.Err }

// ErrNoDevice is returned (inside an *OpError) when a named RDMA device
// does not exist. It matches fs.ErrNotExist (and so os.ErrNotExist).
var ErrNoDevice error = noDeviceError{}

type noDeviceError struct{}

func (noDeviceError) Error() string        { return "no such RDMA device" }
func (noDeviceError) Is(target error) bool { return target == fs.ErrNotExist }

// Chardev is a character device an RDMA device exposes to a client.
type Chardev struct {
	Name     string // e.g. "uverbs0"
	Dev      uint64 // dev_t
	ABI      uint64 // the client's ABI version
	DriverID uint32 // uverbs: enum rdma_driver_id
}

// System is the RDMA subsystem's global settings (rdma system show).
type System struct {
	// CopyOnFork reports that the kernel copies pinned pages on fork
	// (Linux 5.13+), so registered memory needs no MADV_DONTFORK.
	CopyOnFork bool
}

// Refused reports whether err is the kernel's EINVAL or EOPNOTSUPP: the
// answer to a request for something a device does not have (STAT_GET on
// a device without hardware counters).
func Refused(err error) bool {
	var oe *OpError
	if !errors.As(err, &oe) || !oe.Kernel {
		return false
	}
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}
