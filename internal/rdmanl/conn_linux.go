//go:build linux

package rdmanl

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a NETLINK_RDMA socket. Its methods may be called from several
// goroutines; requests are serialized.
type Conn struct {
	mu     sync.Mutex // serializes requests
	f      *os.File
	rc     syscall.RawConn
	pid    uint32 // the socket's netlink port id
	seq    uint32 // last sequence number used, under mu
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
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
	if err != nil {
		oe := &OpError{Op: "socket", Err: err}
		if errors.Is(err, unix.EPROTONOSUPPORT) && proto == netlinkRDMA {
			oe.Message = "the kernel offers no RDMA netlink: it needs CONFIG_INFINIBAND and the ib_core module"
		}
		return nil, oe
	}
	if err := setup(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, &OpError{Op: "getsockname", Err: err}
	}
	nsa, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		unix.Close(fd)
		return nil, &OpError{Op: "getsockname", Err: fmt.Errorf("unexpected address type %T", sa)}
	}
	// The fd is non-blocking; os.File parks waiting goroutines on the
	// runtime poller, and Close wakes them.
	f := os.NewFile(uintptr(fd), "rdma-netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, &OpError{Op: "socket", Err: err}
	}
	return &Conn{f: f, rc: rc, pid: nsa.Pid, seq: rand.Uint32()}, nil
}

func setup(fd int) error {
	// Extended ACKs carry the kernel's error text; capped ACKs keep the
	// kernel from echoing our request back. Kernels before 4.12 lack
	// these options, which only cost error detail.
	for _, opt := range []struct {
		name string
		opt  int
	}{{"NETLINK_EXT_ACK", unix.NETLINK_EXT_ACK}, {"NETLINK_CAP_ACK", unix.NETLINK_CAP_ACK}} {
		err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, opt.opt, 1)
		if err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
			return &OpError{Op: "setsockopt " + opt.name, Err: err}
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return &OpError{Op: "bind", Err: err}
	}
	return nil
}

// Close closes the socket. It is safe to call more than once and wakes a
// request blocked in another goroutine.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) || c.fake != nil {
		return nil
	}
	if err := c.f.Close(); err != nil {
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
	return c.f.SetDeadline(t)
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
func (c *Conn) execute(op uint16, dev string, dump bool, build func(seq uint32) []byte) ([]message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(err error, msg string) error {
		return &OpError{Op: cmdName(op), Device: dev, Err: err, Message: msg}
	}
	if c.closed.Load() {
		return nil, fail(os.ErrClosed, "")
	}
	c.seq++
	seq := c.seq
	if err := c.send(build(seq)); err != nil {
		return nil, fail(err, "")
	}
	x := exchange{dump: dump, seq: seq, pid: c.pid}
	for {
		msgs, err := c.recv()
		if err != nil {
			return nil, fail(err, "")
		}
		done, err := x.handle(msgs)
		if err != nil {
			var ke kernelError
			if errors.As(err, &ke) {
				err := fail(ke.Errno, ke.Message).(*OpError)
				err.Kernel = true
				return nil, err
			}
			return nil, fail(err, "")
		}
		if done {
			return x.replies, nil
		}
	}
}

// send writes one request to the kernel (port id 0).
func (c *Conn) send(b []byte) error {
	var serr error
	err := c.rc.Write(func(fd uintptr) bool {
		for {
			serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
			if serr != unix.EINTR {
				break
			}
		}
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("sendto: %w", serr)
	}
	return nil
}

// recv reads one datagram and splits it into messages. Datagrams from
// anyone but the kernel are dropped.
func (c *Conn) recv() ([]message, error) {
	buf := make([]byte, os.Getpagesize())
	for {
		// Peek with MSG_TRUNC to learn the datagram's full size.
		n, _, err := c.recvfrom(buf, unix.MSG_PEEK|unix.MSG_TRUNC)
		if err != nil {
			return nil, err
		}
		if n > len(buf) {
			buf = make([]byte, n)
		}
		n, from, err := c.recvfrom(buf, 0)
		if err != nil {
			return nil, err
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue
		}
		if n > len(buf) {
			return nil, fmt.Errorf("recvfrom: datagram of %d bytes truncated to %d", n, len(buf))
		}
		msgs, err := parseMessages(buf[:n:n])
		if err != nil {
			return nil, err
		}
		return msgs, nil
	}
}

func (c *Conn) recvfrom(buf []byte, flags int) (int, unix.Sockaddr, error) {
	var (
		n    int
		from unix.Sockaddr
		rerr error
	)
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, from, rerr = unix.Recvfrom(int(fd), buf, flags)
			if rerr != unix.EINTR {
				break
			}
		}
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return 0, nil, err
	}
	if rerr != nil {
		return 0, nil, fmt.Errorf("recvfrom: %w", rerr)
	}
	return n, from, nil
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
func joinRes(msgs []message, k ResKind, index uint32, dev string) (Res, error) {
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
