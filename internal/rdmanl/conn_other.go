//go:build !linux

package rdmanl

import (
	"errors"
	"time"
)

// Conn is a NETLINK_RDMA socket; RDMA netlink exists only on Linux.
type Conn struct{}

func errUnsupported(op string) error {
	return &OpError{Op: op, Err: errors.ErrUnsupported, Message: "RDMA netlink needs Linux"}
}

// Dial fails: RDMA netlink exists only on Linux.
func Dial() (*Conn, error) { return nil, errUnsupported("socket") }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// SetDeadline fails: RDMA netlink exists only on Linux.
func (c *Conn) SetDeadline(time.Time) error { return errUnsupported("socket") }

// NewLink fails: RDMA netlink exists only on Linux.
func (c *Conn) NewLink(name, linkType, netdev string) error {
	return errUnsupported(cmdName(cmdNewLink))
}

// DelLink fails: RDMA netlink exists only on Linux.
func (c *Conn) DelLink(name string) error { return errUnsupported(cmdName(cmdDelLink)) }

// Devices fails: RDMA netlink exists only on Linux.
func (c *Conn) Devices() ([]Device, error) { return nil, errUnsupported(cmdName(cmdGet)) }

// Links fails: RDMA netlink exists only on Linux.
func (c *Conn) Links() ([]Link, error) { return nil, errUnsupported(cmdName(cmdPortGet)) }

func (c *Conn) Chardev(index uint32, client string) (Chardev, error) {
	return Chardev{}, errUnsupported(cmdName(cmdChardev))
}

func (c *Conn) System() (System, error) { return System{}, errUnsupported(cmdName(cmdSysGet)) }

// Summary fails: RDMA netlink exists only on Linux.
func (c *Conn) Summary(index uint32, dev string) (Summary, error) {
	return Summary{}, errUnsupported(cmdName(cmdResGet))
}

// Res fails: RDMA netlink exists only on Linux.
func (c *Conn) Res(k ResKind, index uint32, dev string) (Res, error) {
	return Res{}, errUnsupported("RES")
}

// Stat fails: RDMA netlink exists only on Linux.
func (c *Conn) Stat(index, port uint32, dev string) (PortStats, error) {
	return PortStats{}, errUnsupported(cmdName(cmdStatGet))
}
