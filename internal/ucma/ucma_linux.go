// Package ucma speaks the kernel's rdma_cm ABI: the write() commands of
// /dev/infiniband/rdma_cm (drivers/infiniband/core/ucma.c). Each command
// has one typed wrapper here; the header, the response pointers and the
// pinning of the memory the kernel writes stay inside this package. The
// rdmacm package gives them meaning.
//
// A command is a write() of struct rdma_ucm_cmd_hdr followed by the
// command's struct; unlike uverbs, the header's in and out fields count
// bytes. A command with a response carries the response's address in its
// struct; the kernel copies the response there and the write returns the
// number of bytes written.
//
// The fd is non-blocking and registered with the Go runtime poller:
// GET_EVENT, which blocks in the kernel on a blocking fd, returns EAGAIN
// instead, and GetEvent parks the goroutine until the fd polls readable
// (the kernel reports EPOLLIN while its event list is not empty).
package ucma

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/evfd"
	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// Path is the rdma_cm character device.
const Path = "/dev/infiniband/rdma_cm"

// File is an open rdma_cm fd: an event channel.
type File struct {
	f *evfd.File
	// kernel, if set, takes the commands instead of the fd: the fake
	// kernel of the tests. It gets the whole write and returns its
	// result.
	kernel func(b []byte) error
}

// Open opens the rdma_cm device, close-on-exec and non-blocking.
func Open() (*File, error) {
	fd, err := unix.Open(Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &sys.Error{Op: "open " + Path, Err: err}
	}
	f, err := evfd.New(fd, "rdma_cm")
	if err != nil {
		return nil, err
	}
	return &File{f: f}, nil
}

// Close closes the fd: the kernel destroys every ID still on it. A
// waiting GetEvent returns sys.ErrClosed.
func (f *File) Close() error { return f.f.Close() }

// Fd is the descriptor number, valid until Close.
func (f *File) Fd() int { return f.f.Fd() }

// SyscallConn is the channel fd's raw connection (see evfd.File).
func (f *File) SyscallConn() evfd.RawConn { return f.f.SyscallConn() }

const sizeofHdr = int(unsafe.Sizeof(abi.UCMCmdHdr{}))

// Commands are built in sys.Scratch blocks, outside the Go heap: the
// request at offset 0, the response the kernel writes at respOffset. The
// kernel's addresses then stay valid without pinning, and a command
// allocates nothing.
const respOffset = 1024

// The largest request and response must fit their halves of the block.
var _ = [respOffset - sizeofHdr - int(unsafe.Sizeof(abi.UCMResolveAddr{}))]struct{}{}
var _ = [sys.ScratchSize - respOffset - int(unsafe.Sizeof(abi.UCMEventResp{}))]struct{}{}

// command writes one write()'s bytes into s: the header, then in.
func command(s *sys.Scratch, cmd uint32, in []byte, outLen int) []byte {
	b := s.Zero(0, sizeofHdr+len(in))
	h := (*abi.UCMCmdHdr)(unsafe.Pointer(&b[0]))
	h.Cmd = cmd
	h.In = uint16(len(in))
	h.Out = uint16(outLen)
	copy(b[sizeofHdr:], in)
	return b
}

// addr is the address of a response struct, for a command's response member.
func addr[T any](p *T) abi.Pointer { return abi.Pointer(uintptr(unsafe.Pointer(p))) }

// call runs one command that has a response: resp points into s at
// respOffset, cleared, for the request's response field; run builds and
// writes the request.
func call[Resp any](run func(s *sys.Scratch, resp *Resp) error) (Resp, error) {
	s, err := sys.GetScratch()
	if err != nil {
		var zero Resp
		return zero, err
	}
	defer s.Release()
	resp := sys.ScratchAt[Resp](s, respOffset)
	err = run(s, resp)
	return *resp, err
}

// write issues one command built in s.
func (f *File) write(s *sys.Scratch, op string, cmd uint32, in []byte, outLen int) error {
	b := command(s, cmd, in, outLen)
	if f.kernel != nil {
		return wrap(op, f.kernel(b))
	}
	n, err := f.f.Write(b)
	if err != nil {
		return wrap(op, err)
	}
	if n != len(b) {
		return &sys.Error{Op: op, Err: fmt.Errorf("short write: %d of %d bytes", n, len(b))}
	}
	return nil
}

// send issues one command without a response.
func (f *File) send(op string, cmd uint32, in []byte) error {
	s, err := sys.GetScratch()
	if err != nil {
		return err
	}
	defer s.Release()
	return f.write(s, op, cmd, in, 0)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return &sys.Error{Op: op, Err: err}
}

// CreateID creates an rdma_cm ID (RDMA_USER_CM_CMD_CREATE_ID). uid comes
// back in the ID's events.
func (f *File) CreateID(uid uint64, ps uint16, qpType uint8) (uint32, error) {
	resp, err := call(func(s *sys.Scratch, resp *abi.UCMCreateIDResp) error {
		req := abi.UCMCreateID{UID: uid, PS: ps, QPType: qpType, Response: addr(resp)}
		return f.write(s, "rdma_cm CREATE_ID", abi.RDMA_USER_CM_CMD_CREATE_ID, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
	return resp.ID, err
}

// DestroyID destroys an ID and returns how many events the kernel
// reported for it (RDMA_USER_CM_CMD_DESTROY_ID). Its unreported events
// are discarded.
func (f *File) DestroyID(id uint32) (uint32, error) {
	resp, err := call(func(s *sys.Scratch, resp *abi.UCMDestroyIDResp) error {
		req := abi.UCMDestroyID{ID: id, Response: addr(resp)}
		return f.write(s, "rdma_cm DESTROY_ID", abi.RDMA_USER_CM_CMD_DESTROY_ID, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
	return resp.EventsReported, err
}

// Bind binds an ID to a local address, a struct sockaddr_in or
// sockaddr_in6 (RDMA_USER_CM_CMD_BIND).
func (f *File) Bind(id uint32, sa []byte) error {
	req := abi.UCMBind{ID: id, AddrSize: uint16(len(sa))}
	if len(sa) > len(req.Addr.Raw) {
		return &sys.Error{Op: "rdma_cm BIND", Err: sys.ErrInvalid}
	}
	copy(req.Addr.Raw[:], sa)
	return f.send("rdma_cm BIND", abi.RDMA_USER_CM_CMD_BIND, abi.Bytes(&req))
}

// ResolveAddr starts address resolution (RDMA_USER_CM_CMD_RESOLVE_ADDR);
// src may be empty.
func (f *File) ResolveAddr(id uint32, src, dst []byte, timeoutMs uint32) error {
	req := abi.UCMResolveAddr{ID: id, TimeoutMs: timeoutMs, SrcSize: uint16(len(src)), DstSize: uint16(len(dst))}
	if len(src) > len(req.SrcAddr.Raw) || len(dst) > len(req.DstAddr.Raw) {
		return &sys.Error{Op: "rdma_cm RESOLVE_ADDR", Err: sys.ErrInvalid}
	}
	copy(req.SrcAddr.Raw[:], src)
	copy(req.DstAddr.Raw[:], dst)
	return f.send("rdma_cm RESOLVE_ADDR", abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, abi.Bytes(&req))
}

// ResolveRoute starts route resolution (RDMA_USER_CM_CMD_RESOLVE_ROUTE).
func (f *File) ResolveRoute(id uint32, timeoutMs uint32) error {
	req := abi.UCMResolveRoute{ID: id, TimeoutMs: timeoutMs}
	return f.send("rdma_cm RESOLVE_ROUTE", abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, abi.Bytes(&req))
}

// QueryAddr reads an ID's addresses and device (RDMA_USER_CM_CMD_QUERY,
// RDMA_USER_CM_QUERY_ADDR). IBDevIndex is left at ^0 by kernels that do
// not report it.
func (f *File) QueryAddr(id uint32) (abi.UCMQueryAddrResp, error) {
	return call(func(s *sys.Scratch, resp *abi.UCMQueryAddrResp) error {
		resp.IBDevIndex = ^uint32(0)
		req := abi.UCMQuery{ID: id, Option: abi.RDMA_USER_CM_QUERY_ADDR, Response: addr(resp)}
		return f.write(s, "rdma_cm QUERY_ADDR", abi.RDMA_USER_CM_CMD_QUERY, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
}

// Connect starts connecting (RDMA_USER_CM_CMD_CONNECT). p.Valid must be
// set.
//
// The write runs with signals blocked (sys.RawWriteNoSignals): on iWARP
// the kernel connects a TCP socket inside it, and a signal would abort
// that connect half done.
func (f *File) Connect(id uint32, p *abi.UCMConnParam) error {
	req := abi.UCMConnect{ID: id, ConnParam: *p}
	s, err := sys.GetScratch()
	if err != nil {
		return err
	}
	defer s.Release()
	b := command(s, abi.RDMA_USER_CM_CMD_CONNECT, abi.Bytes(&req), 0)
	const op = "rdma_cm CONNECT"
	if f.kernel != nil {
		return wrap(op, f.kernel(b))
	}
	var n int
	err = f.f.Control(func(fd int) error {
		var err error
		n, err = sys.RawWriteNoSignals(fd, b)
		return err
	})
	if err != nil {
		return wrap(op, err)
	}
	if n != len(b) {
		return &sys.Error{Op: op, Err: fmt.Errorf("short write: %d of %d bytes", n, len(b))}
	}
	return nil
}

// Listen starts listening (RDMA_USER_CM_CMD_LISTEN); the kernel caps the
// backlog at net.rdma_ucm.max_backlog and takes 0 as that maximum.
func (f *File) Listen(id uint32, backlog int) error {
	req := abi.UCMListen{ID: id, Backlog: uint32(backlog)}
	return f.send("rdma_cm LISTEN", abi.RDMA_USER_CM_CMD_LISTEN, abi.Bytes(&req))
}

// Accept accepts a connection request, or, with p nil, completes the
// active side's connection after CONNECT_RESPONSE (sends the RTU)
// (RDMA_USER_CM_CMD_ACCEPT). uid becomes the ID's event uid.
func (f *File) Accept(id uint32, uid uint64, p *abi.UCMConnParam) error {
	req := abi.UCMAccept{ID: id, UID: uid}
	if p != nil {
		req.ConnParam = *p
	}
	return f.send("rdma_cm ACCEPT", abi.RDMA_USER_CM_CMD_ACCEPT, abi.Bytes(&req))
}

// Reject rejects a connection request (RDMA_USER_CM_CMD_REJECT). reason 0
// is the kernel's IB_CM_REJ_CONSUMER_DEFINED.
func (f *File) Reject(id uint32, reason uint8, privateData []byte) error {
	req := abi.UCMReject{ID: id, Reason: reason, PrivateDataLen: uint8(len(privateData))}
	if len(privateData) > len(req.PrivateData) {
		return &sys.Error{Op: "rdma_cm REJECT", Err: sys.ErrInvalid}
	}
	copy(req.PrivateData[:], privateData)
	return f.send("rdma_cm REJECT", abi.RDMA_USER_CM_CMD_REJECT, abi.Bytes(&req))
}

// Disconnect disconnects (RDMA_USER_CM_CMD_DISCONNECT).
func (f *File) Disconnect(id uint32) error {
	req := abi.UCMDisconnect{ID: id}
	return f.send("rdma_cm DISCONNECT", abi.RDMA_USER_CM_CMD_DISCONNECT, abi.Bytes(&req))
}

// InitQPAttr asks the kernel for the QP attributes that move a QP to
// state (RDMA_USER_CM_CMD_INIT_QP_ATTR, rdma_init_qp_attr).
func (f *File) InitQPAttr(id uint32, state uint32) (abi.QPAttr, error) {
	return call(func(s *sys.Scratch, resp *abi.QPAttr) error {
		req := abi.UCMInitQPAttr{ID: id, QPState: state, Response: addr(resp)}
		return f.write(s, "rdma_cm INIT_QP_ATTR", abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
}

// SetOption sets an ID option (RDMA_USER_CM_CMD_SET_OPTION).
func (f *File) SetOption(id, level, name uint32, val []byte) error {
	if len(val) > sys.ScratchSize-respOffset {
		return &sys.Error{Op: "rdma_cm SET_OPTION", Err: sys.ErrInvalid}
	}
	s, err := sys.GetScratch()
	if err != nil {
		return err
	}
	defer s.Release()
	// The value goes where a response would: the kernel reads it through
	// Optval.
	copy(s.Bytes()[respOffset:], val)
	req := abi.UCMSetOption{ID: id, Level: level, Optname: name, Optlen: uint32(len(val))}
	if len(val) > 0 {
		req.Optval = uint64(s.Addr(respOffset))
	}
	return f.write(s, "rdma_cm SET_OPTION", abi.RDMA_USER_CM_CMD_SET_OPTION, abi.Bytes(&req), 0)
}

// Notify reports a QP async event to the CM (RDMA_USER_CM_CMD_NOTIFY).
func (f *File) Notify(id uint32, event uint32) error {
	req := abi.UCMNotify{ID: id, Event: event}
	return f.send("rdma_cm NOTIFY", abi.RDMA_USER_CM_CMD_NOTIFY, abi.Bytes(&req))
}

// JoinMcast joins a multicast group (RDMA_USER_CM_CMD_JOIN_MCAST) and
// returns the kernel's id for the membership, for LeaveMcast. uid comes
// back in its events.
func (f *File) JoinMcast(id uint32, uid uint64, sa []byte, flags uint16) (uint32, error) {
	resp, err := call(func(s *sys.Scratch, resp *abi.UCMCreateIDResp) error {
		req := abi.UCMJoinMcast{ID: id, UID: uid, AddrSize: uint16(len(sa)), JoinFlags: flags, Response: addr(resp)}
		if len(sa) > len(req.Addr.Raw) {
			return &sys.Error{Op: "rdma_cm JOIN_MCAST", Err: sys.ErrInvalid}
		}
		copy(req.Addr.Raw[:], sa)
		return f.write(s, "rdma_cm JOIN_MCAST", abi.RDMA_USER_CM_CMD_JOIN_MCAST, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
	return resp.ID, err
}

// LeaveMcast leaves a multicast group (RDMA_USER_CM_CMD_LEAVE_MCAST) and
// returns how many events the kernel reported for the membership.
func (f *File) LeaveMcast(mcID uint32) (uint32, error) {
	resp, err := call(func(s *sys.Scratch, resp *abi.UCMDestroyIDResp) error {
		req := abi.UCMDestroyID{ID: mcID, Response: addr(resp)}
		return f.write(s, "rdma_cm LEAVE_MCAST", abi.RDMA_USER_CM_CMD_LEAVE_MCAST, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
	})
	return resp.EventsReported, err
}

// MigrateID moves the ID id of from to f (RDMA_USER_CM_CMD_MIGRATE_ID,
// written to the new fd) with its pending events, and returns how many
// events the kernel reported for it.
func (f *File) MigrateID(id uint32, from *File) (uint32, error) {
	resp, err := call(func(s *sys.Scratch, resp *abi.UCMMigrateResp) error {
		return from.control(func(fromFd int) error {
			req := abi.UCMMigrateID{ID: id, FD: uint32(fromFd), Response: addr(resp)}
			return f.write(s, "rdma_cm MIGRATE_ID", abi.RDMA_USER_CM_CMD_MIGRATE_ID, abi.Bytes(&req), int(unsafe.Sizeof(*resp)))
		})
	})
	return resp.EventsReported, err
}

// control runs fn with the raw fd, kept open meanwhile.
func (f *File) control(fn func(fd int) error) error {
	if f.kernel != nil {
		return fn(-1)
	}
	return f.f.Control(fn)
}

// GetEvent waits for the next event and copies it to resp
// (RDMA_USER_CM_CMD_GET_EVENT). It returns ctx.Err() when ctx ends
// first, an error matching sys.ErrClosed after Close, and an error
// matching sys.ErrBusy at once when another GetEvent is waiting.
func (f *File) GetEvent(ctx context.Context, resp *abi.UCMEventResp) error {
	s, err := sys.GetScratch()
	if err != nil {
		return err
	}
	defer s.Release()
	kresp := sys.ScratchAt[abi.UCMEventResp](s, respOffset)
	req := abi.UCMGetEvent{Response: addr(kresp)}
	b := command(s, abi.RDMA_USER_CM_CMD_GET_EVENT, abi.Bytes(&req), int(unsafe.Sizeof(*kresp)))
	if f.kernel != nil {
		err = wrap("rdma_cm GET_EVENT", f.kernel(b))
	} else {
		var n int
		// EAGAIN until an event is queued; the poller waits for it.
		if n, err = f.f.WaitWrite(ctx, b); err == nil && n != len(b) {
			err = &sys.Error{Op: "rdma_cm GET_EVENT", Err: fmt.Errorf("short write: %d of %d bytes", n, len(b))}
		}
	}
	*resp = *kresp
	return err
}
