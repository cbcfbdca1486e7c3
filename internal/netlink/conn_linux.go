//go:build linux

package netlink

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

// Conn is a netlink socket of one protocol. Its methods may be called from
// several goroutines; requests are serialized.
type Conn struct {
	mu     sync.Mutex // serializes requests
	f      *os.File
	rc     syscall.RawConn
	pid    uint32 // the socket's netlink port id
	seq    uint32 // last sequence number used, under mu
	closed atomic.Bool
}

// Error is a failure of the socket itself (as opposed to the kernel's
// answer, a KernelError): the operation and the error, usually an errno.
type Error struct {
	Op  string // "socket", "bind", "sendto", "recvfrom", ...
	Err error
}

func (e *Error) Error() string { return "netlink " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Dial opens a netlink socket of protocol proto (unix.NETLINK_ROUTE,
// unix.NETLINK_RDMA, ...), non-blocking on the runtime poller, with
// extended and capped ACKs where the kernel has them.
func Dial(proto int) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
	if err != nil {
		return nil, &Error{Op: "socket", Err: err}
	}
	if err := setup(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, &Error{Op: "getsockname", Err: err}
	}
	nsa, ok := sa.(*unix.SockaddrNetlink)
	if !ok {
		unix.Close(fd)
		return nil, &Error{Op: "getsockname", Err: fmt.Errorf("unexpected address type %T", sa)}
	}
	// The fd is non-blocking; os.File parks waiting goroutines on the
	// runtime poller, and Close wakes them.
	f := os.NewFile(uintptr(fd), "netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, &Error{Op: "socket", Err: err}
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
			return &Error{Op: "setsockopt " + opt.name, Err: err}
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return &Error{Op: "bind", Err: err}
	}
	return nil
}

// PID is the socket's netlink port id.
func (c *Conn) PID() uint32 { return c.pid }

// Close closes the socket. It is safe to call more than once and wakes a
// request blocked in another goroutine.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := c.f.Close(); err != nil {
		return &Error{Op: "close", Err: err}
	}
	return nil
}

// SetDeadline sets a deadline for the requests on c; a zero time clears
// it. A request past the deadline fails with an error matching
// os.ErrDeadlineExceeded.
func (c *Conn) SetDeadline(t time.Time) error { return c.f.SetDeadline(t) }

// Execute sends the request build makes for a fresh sequence number and
// collects the replies that belong to it: up to the ACK for a plain
// request (build sets NLM_F_ACK), up to NLMSG_DONE for a dump. The
// kernel's refusal is a KernelError; a closed Conn gives os.ErrClosed;
// socket failures are *Error.
func (c *Conn) Execute(dump bool, build func(seq uint32) []byte) ([]Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, os.ErrClosed
	}
	c.seq++
	seq := c.seq
	if err := c.send(build(seq)); err != nil {
		return nil, err
	}
	x := Exchange{Dump: dump, Seq: seq, PID: c.pid}
	for {
		msgs, err := c.receive()
		if err != nil {
			return nil, err
		}
		done, err := x.Handle(msgs)
		if err != nil {
			return nil, err
		}
		if done {
			return x.Replies, nil
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
		return &Error{Op: "sendto", Err: err}
	}
	if serr != nil {
		return &Error{Op: "sendto", Err: serr}
	}
	return nil
}

// receive reads one datagram and splits it into messages. Datagrams from
// anyone but the kernel are dropped.
func (c *Conn) receive() ([]Message, error) {
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
			return nil, &Error{Op: "recvfrom", Err: fmt.Errorf("datagram of %d bytes truncated to %d", n, len(buf))}
		}
		return ParseMessages(buf[:n:n])
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
		return 0, nil, &Error{Op: "recvfrom", Err: err}
	}
	if rerr != nil {
		return 0, nil, &Error{Op: "recvfrom", Err: rerr}
	}
	return n, from, nil
}
