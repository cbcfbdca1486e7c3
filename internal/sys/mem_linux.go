package sys

import (
	"encoding/binary"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the memory calls behind registered memory: anonymous
// mappings for buffers that never move, madvise for fork protection, and
// the one RDMA netlink question that decides whether fork protection is
// needed at all.

// MmapAnon maps length bytes of private anonymous memory, read-write and
// page aligned. The memory is outside the Go heap: the garbage collector
// neither moves nor frees it. Release it with Munmap.
func MmapAnon(length int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	return b, errnoErr("mmap anonymous", err)
}

// DontFork marks the pages of [addr, addr+length) so that a child process
// does not inherit them (madvise MADV_DONTFORK). addr and length must be
// page aligned, and the memory must stay mapped across the call.
func DontFork(addr, length uint64) error {
	return madvise("madvise MADV_DONTFORK", addr, length, unix.MADV_DONTFORK)
}

// DoFork undoes DontFork (madvise MADV_DOFORK).
func DoFork(addr, length uint64) error {
	return madvise("madvise MADV_DOFORK", addr, length, unix.MADV_DOFORK)
}

func madvise(op string, addr, length uint64, advice int) error {
	_, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(addr), uintptr(length), uintptr(advice))
	if e != 0 {
		return &Error{Op: fmt.Sprintf("%s %#x+%#x", op, addr, length), Err: e}
	}
	return nil
}

// RDMA netlink numbers from <rdma/rdma_netlink.h> and <linux/netlink.h>.
const (
	nlRDMA         = 20 // NETLINK_RDMA
	nlHeaderLen    = 16 // sizeof(struct nlmsghdr)
	nlTypeError    = 2  // NLMSG_ERROR
	nlTypeDone     = 3  // NLMSG_DONE
	nlFlagRequest  = 1  // NLM_F_REQUEST
	nldevSysGetMsg = 5<<10 | 6
	// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_GET)
)

// KernelRefused is the error of an RDMA netlink request the kernel
// answered with NLMSG_ERROR: a definite answer (an older kernel that does
// not know the request), unlike a socket that could not be opened.
type KernelRefused struct {
	Errno unix.Errno
}

func (e *KernelRefused) Error() string { return "refused by the kernel: " + e.Errno.Error() }
func (e *KernelRefused) Unwrap() error { return e.Errno }

// RDMASysGet asks the kernel for its RDMA system attributes
// (RDMA_NLDEV_CMD_SYS_GET, Linux 5.3) and returns the attributes of the
// answer, undecoded: a sequence of struct nlattr. An NLMSG_ERROR answer is
// a *KernelRefused inside the returned *Error.
//
// The request is small enough that it lives here rather than in
// internal/rdmanl; it belongs there as a Conn method.
func RDMASysGet() ([]byte, error) {
	const op = "rdma netlink SYS_GET"
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, nlRDMA)
	if err != nil {
		return nil, errnoErr(op, err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; a timeout turns a lost answer into an
	// error instead of a hang.
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, errnoErr(op, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, errnoErr(op, err)
	}
	const seq = 1
	req := make([]byte, nlHeaderLen)
	binary.NativeEndian.PutUint32(req[0:], nlHeaderLen)
	binary.NativeEndian.PutUint16(req[4:], nldevSysGetMsg)
	binary.NativeEndian.PutUint16(req[6:], nlFlagRequest)
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, errnoErr(op, err)
	}
	buf := make([]byte, 8192)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, errnoErr(op, err)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not from the kernel
		}
		for b := buf[:n]; len(b) >= nlHeaderLen; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			typ := binary.NativeEndian.Uint16(b[4:])
			if l < nlHeaderLen || l > len(b) {
				return nil, &Error{Op: op, Err: fmt.Errorf("bad message length %d", l)}
			}
			msg := b[nlHeaderLen:l]
			if binary.NativeEndian.Uint32(b[8:]) == seq {
				switch typ {
				case nlTypeError:
					if len(msg) < 4 {
						return nil, &Error{Op: op, Err: fmt.Errorf("short error message")}
					}
					code := int32(binary.NativeEndian.Uint32(msg))
					if code == 0 {
						return nil, &Error{Op: op, Err: fmt.Errorf("acknowledged without an answer")}
					}
					return nil, &Error{Op: op, Err: &KernelRefused{Errno: unix.Errno(-code)}}
				case nlTypeDone:
					return nil, &Error{Op: op, Err: fmt.Errorf("no answer")}
				case nldevSysGetMsg:
					return append([]byte(nil), msg...), nil
				}
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
