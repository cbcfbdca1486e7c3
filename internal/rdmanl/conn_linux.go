//go:build linux

package rdmanl

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/netlink"
	"golang.org/x/sys/unix"
)

// Conn is a NETLINK_RDMA socket. Its methods may be called from several
// goroutines; requests are serialized.
type Conn struct {
	nl     *netlink.Conn
	closed atomic.Bool
	fake   *Fake // answers instead of the kernel (fake_linux.go)
}

// Dial opens a NETLINK_RDMA socket. On a kernel without RDMA support
// (CONFIG_INFINIBAND unset, or ib_core not loaded) it fails with an
// *OpError wrapping unix.EPROTONOSUPPORT.
func Dial() (*Conn, error) {
	if f := fake.Load(); f != nil {
		return &Conn{fake: f}, nil
	}
	return dial(netlinkRDMA)
}

// dial opens a netlink socket of the given protocol; tests use another
// protocol to exercise the socket code on hosts without RDMA.
func dial(proto int) (*Conn, error) {
	nl, err := netlink.Dial(proto)
	if err != nil {
		oe := &OpError{Op: "socket", Err: err}
		var ne *netlink.Error
		if errors.As(err, &ne) {
			oe.Op, oe.Err = ne.Op, ne.Err
		}
		if errors.Is(err, unix.EPROTONOSUPPORT) && proto == netlinkRDMA {
			oe.Message = "the kernel offers no RDMA netlink: it needs CONFIG_INFINIBAND and the ib_core module"
		}
		return nil, oe
	}
	return &Conn{nl: nl}, nil
}

// Close closes the socket. It is safe to call more than once and wakes a
// request blocked in another goroutine.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) || c.fake != nil {
		return nil
	}
	if err := c.nl.Close(); err != nil {
		return &OpError{Op: "close", Err: err}
	}
	return nil
}

// SetDeadline sets a deadline for the requests on c; a zero time clears
// it. A request past the deadline fails with an error matching
// os.ErrDeadlineExceeded.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.fake != nil {
		return nil
	}
	return c.nl.SetDeadline(t)
}

// NewLink creates a software RDMA device name of type linkType ("rxe" or
// "siw") on top of the network device netdev, like
// "rdma link add NAME type TYPE netdev NETDEV". It needs CAP_NET_ADMIN.
func (c *Conn) NewLink(name, linkType, netdev string) error {
	if c.fake != nil {
		c.fake.record("NewLink " + name + " " + linkType + " " + netdev)
		return nil
	}
	_, err := c.execute(cmdNewLink, name, false, func(seq uint32) []byte {
		return newLinkRequest(seq, name, linkType, netdev)
	})
	var oe *OpError
	if errors.As(err, &oe) && errors.Is(oe.Err, unix.ENODEV) && oe.Message == "" {
		oe.Message = fmt.Sprintf("network device %q not found", netdev)
	}
	return err
}

// DelLink removes the software RDMA device name, like "rdma link delete
// NAME". A missing device gives an error matching os.ErrNotExist.
func (c *Conn) DelLink(name string) error {
	devs, err := c.Devices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Name == name {
			if c.fake != nil {
				c.fake.record("DelLink " + name)
				return nil
			}
			_, err := c.execute(cmdDelLink, name, false, func(seq uint32) []byte {
				return delLinkRequest(seq, d.Index)
			})
			return err
		}
	}
	return &OpError{Op: cmdName(cmdDelLink), Device: name, Err: ErrNoDevice}
}

// Devices lists the RDMA devices in the kernel's index order.
func (c *Conn) Devices() ([]Device, error) {
	if c.fake != nil {
		return c.fake.Devices, nil
	}
	msgs, err := c.execute(cmdGet, "", true, getDumpRequest)
	if err != nil {
		return nil, err
	}
	devs := make([]Device, 0, len(msgs))
	for _, m := range msgs {
		if m.Header.Type != nldevType(cmdGet) {
			continue
		}
		d, err := parseDevice(m.Data)
		if err != nil {
			return nil, &OpError{Op: cmdName(cmdGet), Err: err}
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// Chardev asks which character device client (e.g. "uverbs") exposes for
// the RDMA device at index, with its ABI version and, for uverbs, the
// driver id the kernel expects in ioctl headers.
func (c *Conn) Chardev(index uint32, client string) (Chardev, error) {
	if c.fake != nil {
		return c.fake.chardev(index, client)
	}
	msgs, err := c.execute(cmdChardev, client, false, func(seq uint32) []byte {
		return chardevRequest(seq, index, client)
	})
	if err != nil {
		return Chardev{}, err
	}
	for _, m := range msgs {
		if m.Header.Type == nldevType(cmdChardev) {
			cd, err := parseChardev(m.Data)
			if err != nil {
				return Chardev{}, &OpError{Op: cmdName(cmdChardev), Err: err}
			}
			return cd, nil
		}
	}
	return Chardev{}, &OpError{Op: cmdName(cmdChardev), Err: errors.New("no reply")}
}

// System asks for the subsystem's global settings (RDMA_NLDEV_CMD_SYS_GET).
func (c *Conn) System() (System, error) {
	if c.fake != nil {
		return c.fake.System, nil
	}
	msgs, err := c.execute(cmdSysGet, "", false, sysGetRequest)
	if err != nil {
		return System{}, err
	}
	for _, m := range msgs {
		if m.Header.Type == nldevType(cmdSysGet) {
			s, err := parseSystem(m.Data)
			if err != nil {
				return System{}, &OpError{Op: cmdName(cmdSysGet), Err: err}
			}
			return s, nil
		}
	}
	return System{}, &OpError{Op: cmdName(cmdSysGet), Err: errors.New("no reply")}
}

// Links lists the ports of every RDMA device, like "rdma link show".
// The kernel dumps ports one device at a time, so this is one GET dump
// followed by a PORT_GET dump per device.
func (c *Conn) Links() ([]Link, error) {
	if c.fake != nil {
		return c.fake.Links, nil
	}
	devs, err := c.Devices()
	if err != nil {
		return nil, err
	}
	var links []Link
	for _, d := range devs {
		msgs, err := c.execute(cmdPortGet, d.Name, true, func(seq uint32) []byte {
			return portDumpRequest(seq, d.Index)
		})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Type != nldevType(cmdPortGet) {
				continue
			}
			l, err := parseLink(m.Data)
			if err != nil {
				return nil, &OpError{Op: cmdName(cmdPortGet), Device: d.Name, Err: err}
			}
			links = append(links, l)
		}
	}
	return links, nil
}

// execute sends one request and collects the replies that belong to it:
// up to the ACK for a plain request, up to NLMSG_DONE for a dump.
func (c *Conn) execute(op uint16, dev string, dump bool, build func(seq uint32) []byte) ([]netlink.Message, error) {
	if c.closed.Load() {
		return nil, &OpError{Op: cmdName(op), Device: dev, Err: os.ErrClosed}
	}
	msgs, err := c.nl.Execute(dump, build)
	if err != nil {
		oe := &OpError{Op: cmdName(op), Device: dev, Err: err}
		var ke netlink.KernelError
		if errors.As(err, &ke) {
			oe.Err, oe.Message, oe.Kernel = ke.Errno, ke.Message, true
		}
		return nil, oe
	}
	return msgs, nil
}

// Summary asks for the resource counts of the device at index, like
// "rdma resource show" (RDMA_NLDEV_CMD_RES_GET).
func (c *Conn) Summary(index uint32, dev string) (Summary, error) {
	if c.fake != nil {
		return c.fake.summary(index, dev)
	}
	msgs, err := c.execute(cmdResGet, dev, false, func(seq uint32) []byte {
		return resGetRequest(seq, index)
	})
	if err != nil {
		return Summary{}, err
	}
	for _, m := range msgs {
		if m.Header.Type == nldevType(cmdResGet) {
			s, err := parseSummary(m.Data)
			if err != nil {
				return Summary{}, &OpError{Op: cmdName(cmdResGet), Device: dev, Err: err}
			}
			return s, nil
		}
	}
	return Summary{}, &OpError{Op: cmdName(cmdResGet), Device: dev, Err: errors.New("no reply")}
}

// Res dumps the resource table k of the device at index, like "rdma
// resource show qp" for one device. The kernel spreads a long table over
// several messages; Res joins them.
func (c *Conn) Res(k ResKind, index uint32, dev string) (Res, error) {
	t, ok := resTables[k]
	if !ok {
		return Res{}, &OpError{Op: "RES", Device: dev, Err: fmt.Errorf("unknown resource kind %d", k)}
	}
	if c.fake != nil {
		return c.fake.res(k, index, dev)
	}
	msgs, err := c.execute(t.cmd, dev, true, func(seq uint32) []byte {
		return resDumpRequest(seq, t.cmd, index)
	})
	if err != nil {
		return Res{}, err
	}
	return joinRes(msgs, k, index, dev)
}

// joinRes decodes the messages of a resource dump into one Res.
func joinRes(msgs []netlink.Message, k ResKind, index uint32, dev string) (Res, error) {
	t := resTables[k]
	all := Res{DevIndex: index, DevName: dev}
	for _, m := range msgs {
		if m.Header.Type != nldevType(t.cmd) {
			continue
		}
		r, err := parseRes(m.Data, k)
		if err != nil {
			return Res{}, &OpError{Op: cmdName(t.cmd), Device: dev, Err: err}
		}
		all.DevIndex, all.DevName = r.DevIndex, r.DevName
		all.Entries = append(all.Entries, r.Entries...)
	}
	return all, nil
}

// Stat asks for the hardware counters of a port (RDMA_NLDEV_CMD_STAT_GET),
// like "rdma statistic show link DEV/PORT". A device without hardware
// counters (siw) gets EINVAL from the kernel, as does a port it lacks.
func (c *Conn) Stat(index, port uint32, dev string) (PortStats, error) {
	if c.fake != nil {
		return c.fake.stat(index, port, dev)
	}
	msgs, err := c.execute(cmdStatGet, dev, false, func(seq uint32) []byte {
		return statGetRequest(seq, index, port)
	})
	if err != nil {
		return PortStats{}, err
	}
	for _, m := range msgs {
		if m.Header.Type == nldevType(cmdStatGet) {
			s, err := parseStat(m.Data)
			if err != nil {
				return PortStats{}, &OpError{Op: cmdName(cmdStatGet), Device: dev, Err: err}
			}
			return s, nil
		}
	}
	return PortStats{}, &OpError{Op: cmdName(cmdStatGet), Device: dev, Err: errors.New("no reply")}
}
