package evfd

import (
	"context"
	"encoding/binary"
	"sync"
	"unsafe"

	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// Set waits until one of a few fds is readable: an epoll instance,
// itself registered with the runtime poller, so that a wait parks the
// goroutine as File.Read does and no goroutine is started per member.
// rdmacm's blocking completion calls wait on a CQ's completion channel
// and the ID's rdma_cm channel at once with one.
//
// Members are numbered 0, 1, ... in the order Add added them; Wait
// returns a mask of the ready ones. One goroutine waits at a time (a
// second, concurrent Wait fails at once with sys.ErrBusy). Close wakes
// a waiting Wait with sys.ErrClosed. A member's fd that is closed
// leaves the set by itself (epoll drops closed files).
type Set struct {
	f      *File
	n      int
	events [maxSetMembers]unix.EpollEvent
	ready  uint32
	poll   func(int, []byte) (int, error) // s.pollOnce, bound once: Wait allocates nothing
}

// maxSetMembers bounds a Set: one epoll_wait reports them all.
const maxSetMembers = 8

// NewSet creates an empty set; op names it in errors.
func NewSet(op string) (*Set, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, &sys.Error{Op: op + ": epoll_create1", Err: err}
	}
	f, err := New(fd, op) // closes fd on failure
	if err != nil {
		return nil, err
	}
	s := &Set{f: f}
	s.poll = s.pollOnce
	return s, nil
}

// Add adds fd and returns its member number. With edge, the member is
// reported when fd becomes readable (each time the kernel signals it,
// EPOLLET) rather than for as long as it is: for an fd whose data
// another goroutine may take, so that a Wait does not spin on data it
// cannot read. An fd already readable when it is added is reported
// once either way.
func (s *Set) Add(fd int, edge bool) (int, error) {
	if s.n == maxSetMembers {
		return 0, &sys.Error{Op: s.f.op + ": add", Err: unix.ENOSPC}
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.n)} // Fd is the event's user data
	if edge {
		ev.Events |= unix.EPOLLET
	}
	err := s.f.Control(func(epfd int) error { return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev) })
	if err != nil {
		return 0, &sys.Error{Op: s.f.op + ": add", Err: err}
	}
	s.n++
	return s.n - 1, nil
}

// Wait blocks until a member is readable and returns the mask of the
// ready members (bit i for member i). It returns ctx.Err() when ctx
// ends first and an error matching sys.ErrClosed after Close. When a
// member is ready at once, Wait allocates nothing.
func (s *Set) Wait(ctx context.Context) (uint32, error) {
	if _, err := s.f.wait(ctx, s.poll, nil); err != nil {
		return 0, err
	}
	return s.ready, nil
}

// Close closes the epoll fd (not the members') and wakes a waiting
// Wait.
func (s *Set) Close() error { return s.f.Close() }

// pollOnce is the poller's try: epoll_wait without waiting (a raw
// system call, see internal/sys), EAGAIN when no member is ready.
func (s *Set) pollOnce(epfd int, _ []byte) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&s.events[0])),
		uintptr(len(s.events)), 0, 0, 0)
	if e != 0 {
		if e == unix.EINTR {
			return 0, unix.EAGAIN
		}
		return 0, e
	}
	if r == 0 {
		return 0, unix.EAGAIN
	}
	s.ready = 0
	for _, ev := range s.events[:r] {
		s.ready |= 1 << uint32(ev.Fd)
	}
	return int(r), nil
}

// Latch is a flag that a Set can wait for: an eventfd that Set makes
// readable for good. One goroutine records a state change the others
// would otherwise learn of only by polling (rdmacm: the peer
// disconnected), and waiters that have the latch in their Set wake.
// Set and Close are safe for concurrent use; Set after Close does
// nothing.
type Latch struct {
	mu sync.Mutex
	fd int // -1 once closed
}

// NewLatch creates an unset latch.
func NewLatch() (*Latch, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, &sys.Error{Op: "eventfd", Err: err}
	}
	return &Latch{fd: fd}, nil
}

// Fd is the latch's fd, to Add to a Set (level-triggered: once set, it
// stays readable); -1 after Close.
func (l *Latch) Fd() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fd
}

// Set makes the fd readable.
func (l *Latch) Set() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return nil
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := sys.RawWrite(l.fd, one[:]); err != nil && err != unix.EAGAIN { // EAGAIN: the counter is full, so set
		return &sys.Error{Op: "eventfd write", Err: err}
	}
	return nil
}

// Close closes the fd, which leaves every Set it was in.
func (l *Latch) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return &sys.Error{Op: "eventfd", Err: sys.ErrClosed}
	}
	err := sys.RawClose(l.fd)
	l.fd = -1
	if err != nil {
		return &sys.Error{Op: "eventfd close", Err: err}
	}
	return nil
}
