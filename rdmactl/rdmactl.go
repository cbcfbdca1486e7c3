// Package rdmactl inspects and controls RDMA devices over RDMA netlink, as
// iproute2's rdma tool does: the kernel's tables of RDMA objects (QPs,
// CQs, MRs, PDs, rdma_cm IDs, user contexts; "rdma resource show"), the
// per-port hardware counters ("rdma statistic show"), and software
// devices (rxe, siw; "rdma link add" and "rdma link delete").
//
// A Client holds one NETLINK_RDMA socket: a listing takes a device dump
// and then one request per device, and a program that watches counters
// asks again and again, so the socket is opened once, by Open, and
// closed by Close. The kernel answers at once, so the calls take no
// context; SetDeadline bounds them if that is wanted.
//
// The values are the kernel's. Each type says which fields the kernel
// may leave out (an Optional whose Valid is false). The owner of an
// object is a task (its PID, which the kernel records per thread; Comm is
// read from /proc/PID/comm, as rdma does) or, for an object the kernel made for itself, a kernel module
// (Kernel is set and Comm is its name, such as "ib_core").
//
// A Client is safe for concurrent use: its requests are serialized.
// Listing and reading counters need no privilege; AddLink and DeleteLink
// need CAP_NET_ADMIN, and the kernel shows the keys of MRs (RKey, LKey)
// only to a caller with CAP_NET_ADMIN.
package rdmactl

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
)

// ErrNoDevice is returned (inside an *Error) when a named RDMA device or
// port does not exist. It matches fs.ErrNotExist.
var ErrNoDevice = rdmanl.ErrNoDevice

// ErrNoCounters is returned (inside an *Error) by Counters for a port
// whose device keeps no hardware counters: the kernel answers EINVAL,
// which the error still matches (siw has none).
var ErrNoCounters error = noCountersError{}

type noCountersError struct{}

func (noCountersError) Error() string        { return "the device has no hardware counters" }
func (noCountersError) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrClosed is returned (inside an *Error) by the methods of a closed
// Client. It is os.ErrClosed.
var ErrClosed = os.ErrClosed

// Error is the error of a failed operation: it names the operation and
// the device and wraps the cause, usually the kernel's errno, so
// errors.Is(err, syscall.EPERM) and errors.Is(err, ErrNoDevice) work.
type Error struct {
	Op     string // "QPs", "Counters", "AddLink", ...
	Device string // the device (and "/PORT") the operation was about, if any
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("rdmactl ")
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
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Client is a connection to the kernel's RDMA netlink interface.
type Client struct {
	c *rdmanl.Conn
}

// Open opens a NETLINK_RDMA socket. On a kernel without RDMA support it
// fails with an error matching syscall.EPROTONOSUPPORT.
func Open() (*Client, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, &Error{Op: "Open", Err: err}
	}
	return &Client{c: c}, nil
}

// Close closes the socket. It is safe to call more than once.
func (c *Client) Close() error {
	if err := c.c.Close(); err != nil {
		return &Error{Op: "Close", Err: err}
	}
	return nil
}

// SetDeadline bounds the calls on c; a zero time clears the deadline. A
// call past it fails with an error matching os.ErrDeadlineExceeded.
func (c *Client) SetDeadline(t time.Time) error {
	if err := c.c.SetDeadline(t); err != nil {
		return &Error{Op: "SetDeadline", Err: err}
	}
	return nil
}

// Device is an RDMA device as the netlink interface names it.
type Device struct {
	Index    uint32 // the kernel's device index ("ifindex" in rdma -j)
	Name     string // e.g. "rxe0"
	Ports    int    // the number of ports, numbered from 1
	Protocol string // "ib", "roce", "iw", ...
}

// Devices lists the RDMA devices in the kernel's index order.
func (c *Client) Devices() ([]Device, error) {
	devs, err := c.c.Devices()
	if err != nil {
		return nil, &Error{Op: "Devices", Err: err}
	}
	out := make([]Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, Device{Index: d.Index, Name: d.Name, Ports: int(d.PortCount), Protocol: d.Protocol})
	}
	return out, nil
}

// AddLink creates the software RDMA device name of type linkType ("rxe"
// or "siw") on the network device netdev, like "rdma link add NAME type
// TYPE netdev NETDEV". It needs CAP_NET_ADMIN; an existing name fails
// with an error matching syscall.EEXIST.
func (c *Client) AddLink(name, linkType, netdev string) error {
	if err := c.c.NewLink(name, linkType, netdev); err != nil {
		return &Error{Op: "AddLink", Device: name, Err: err}
	}
	return nil
}

// DeleteLink removes the software RDMA device name, like "rdma link
// delete NAME". A missing device gives an error matching ErrNoDevice.
func (c *Client) DeleteLink(name string) error {
	if err := c.c.DelLink(name); err != nil {
		return &Error{Op: "DeleteLink", Device: name, Err: err}
	}
	return nil
}

// devices returns the devices named dev, or all of them when dev is "".
func (c *Client) devices(op, dev string) ([]rdmanl.Device, error) {
	devs, err := c.c.Devices()
	if err != nil {
		return nil, &Error{Op: op, Device: dev, Err: err}
	}
	if dev == "" {
		return devs, nil
	}
	for _, d := range devs {
		if d.Name == dev {
			return []rdmanl.Device{d}, nil
		}
	}
	return nil, &Error{Op: op, Device: dev, Err: ErrNoDevice}
}

// Count is one line of a device's resource summary.
type Count struct {
	Name    string // "pd", "cq", "qp", "cm_id", "mr", "ctx", "srq", as the kernel names them
	Current uint64 // the number of such objects now
}

// Summary is the number of objects of each kind on a device ("rdma
// resource show").
type Summary struct {
	DevIndex uint32
	Device   string
	Counts   []Count // in the kernel's order
}

// Count returns the number of objects of kind name ("qp", ...) and
// whether the kernel counts that kind.
func (s Summary) Count(name string) (uint64, bool) {
	for _, c := range s.Counts {
		if c.Name == name {
			return c.Current, true
		}
	}
	return 0, false
}

// Resources returns the resource summary of the device dev, or of every
// device when dev is "".
func (c *Client) Resources(dev string) ([]Summary, error) {
	devs, err := c.devices("Resources", dev)
	if err != nil {
		return nil, err
	}
	out := []Summary{}
	for _, d := range devs {
		s, err := c.c.Summary(d.Index, d.Name)
		if err != nil {
			return nil, &Error{Op: "Resources", Device: d.Name, Err: err}
		}
		sum := Summary{DevIndex: s.DevIndex, Device: s.DevName}
		for _, e := range s.Entries {
			sum.Counts = append(sum.Counts, Count{Name: e.Name, Current: e.Current})
		}
		out = append(out, sum)
	}
	return out, nil
}

// res dumps table k of dev (every device when "") and converts each
// entry with conv.
func res[T any](c *Client, op string, k rdmanl.ResKind, dev string, conv func(d *rdmanl.Res, e *rdmanl.ResAttrs) T) ([]T, error) {
	devs, err := c.devices(op, dev)
	if err != nil {
		return nil, err
	}
	out := []T{}
	for _, d := range devs {
		r, err := c.c.Res(k, d.Index, d.Name)
		if err != nil {
			return nil, &Error{Op: op, Device: d.Name, Err: err}
		}
		for i := range r.Entries {
			out = append(out, conv(&r, &r.Entries[i]))
		}
	}
	return out, nil
}

// Optional is a value the kernel may leave out: Valid reports whether it
// was sent.
type Optional[T any] struct {
	Value T
	Valid bool
}

func opt[T any](e *rdmanl.ResAttrs, a rdmanl.Attr, v T) Optional[T] {
	return Optional[T]{Value: v, Valid: e.Has(a)}
}

// Owner is who made an object: a process or the kernel.
type Owner struct {
	// Kernel is set for an object a kernel module made for itself; Comm
	// is then the module's name and PID is 0.
	Kernel bool
	// PID is the id, in the caller's PID namespace, of the task that made
	// the object. The kernel records the thread, so for a multi-threaded
	// program (every Go program) it is one of the process's thread ids,
	// which equals the process id only for its main thread;
	// /proc/self/task/PID exists for the caller's own objects.
	PID uint32
	// Comm is the process's name from /proc/PID/comm, as rdma reads it
	// (up to the first white space), or "" when the process is gone or
	// in another PID namespace.
	Comm string
}

// readComm is /proc/PID/comm's first word, as rdma's fscanf("%ms") reads it.
var readComm = func(pid uint32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func owner(e *rdmanl.ResAttrs) Owner {
	if e.Has(rdmanl.AttrKernName) {
		return Owner{Kernel: true, Comm: e.KernName}
	}
	return Owner{PID: e.PID, Comm: readComm(e.PID)}
}

// isNotSupported reports whether err is the kernel's refusal of a
// request the device does not serve (EINVAL, EOPNOTSUPP).
var isNotSupported = rdmanl.Refused

// Link is one port of an RDMA device ("rdma link show").
type Link struct {
	DevIndex  uint32
	Device    string
	Port      uint32 // 1-based
	State     string // NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER or UNKNOWN
	PhysState string // SLEEP, POLLING, DISABLED, LINK_UP, ..., or UNKNOWN
	// Netdev is the network interface under a RoCE or iWARP port ("" if none).
	Netdev      string
	NetdevIndex uint32
}

// Links lists the ports of every RDMA device, like "rdma link show".
func (c *Client) Links() ([]Link, error) {
	ls, err := c.c.Links()
	if err != nil {
		return nil, &Error{Op: "Links", Err: err}
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, Link{DevIndex: l.DevIndex, Device: l.DevName, Port: l.Port, State: l.StateName(),
			PhysState: l.PhysStateName(), Netdev: l.Netdev, NetdevIndex: l.NetdevIndex})
	}
	return out, nil
}
