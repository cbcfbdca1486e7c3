package ucma

import (
	"context"
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// fakeKernel records each command and answers like ucma_write: it checks
// the header against the write, and writes resp at the address in the
// command's response field (at respOff of the payload).
type fakeKernel struct {
	hdr     abi.UCMCmdHdr
	payload []byte
	respOff int
	resp    []byte
	err     error
}

func (k *fakeKernel) write(b []byte) error {
	if len(b) < 8 {
		return syscall.EINVAL
	}
	copy(abi.Bytes(&k.hdr), b)
	if int(k.hdr.In)+8 > len(b) {
		return syscall.EINVAL
	}
	k.payload = append([]byte(nil), b[8:]...)
	if k.err != nil {
		return k.err
	}
	if k.respOff >= 0 && k.resp != nil {
		if int(k.hdr.Out) < len(k.resp) {
			return syscall.ENOSPC
		}
		// The address is of a scratch block outside the Go heap that
		// the caller holds: read it back as the pointer it was made from.
		p := uintptr(binary.NativeEndian.Uint64(k.payload[k.respOff:]))
		dst := *(*unsafe.Pointer)(unsafe.Pointer(&p))
		copy(unsafe.Slice((*byte)(dst), len(k.resp)), k.resp)
	}
	return nil
}

func sizeof[T any]() int { var v T; return int(unsafe.Sizeof(v)) }

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestCommands(t *testing.T) {
	sa := []byte{2, 0, 0x1d, 0x2f, 198, 18, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	var queryResp abi.UCMQueryAddrResp
	queryResp.NodeGUID, queryResp.PortNum, queryResp.IBDevIndex = 0x1122, 1, 3
	var qpResp abi.QPAttr
	qpResp.QPAttrMask, qpResp.QPState, qpResp.DestQPNum = 0x1, 3, 0x42
	for _, tc := range []struct {
		name    string
		call    func(f *File) (any, error)
		cmd     uint32
		in, out int
		respOff int
		resp    []byte
		want    any
		check   func(t *testing.T, payload []byte)
	}{
		{"CREATE_ID", func(f *File) (any, error) { return f.CreateID(7, abi.RDMA_PS_TCP, 2) },
			abi.RDMA_USER_CM_CMD_CREATE_ID, sizeof[abi.UCMCreateID](), 4, 8, u32(5), uint32(5),
			func(t *testing.T, p []byte) {
				var r abi.UCMCreateID
				copy(abi.Bytes(&r), p)
				if r.UID != 7 || r.PS != abi.RDMA_PS_TCP || r.QPType != 2 {
					t.Errorf("request %+v", r)
				}
			}},
		{"DESTROY_ID", func(f *File) (any, error) { return f.DestroyID(9) },
			abi.RDMA_USER_CM_CMD_DESTROY_ID, sizeof[abi.UCMDestroyID](), 4, 0, u32(3), uint32(3),
			func(t *testing.T, p []byte) {
				var r abi.UCMDestroyID
				copy(abi.Bytes(&r), p)
				if r.ID != 9 {
					t.Errorf("request %+v", r)
				}
			}},
		{"BIND", func(f *File) (any, error) { return nil, f.Bind(4, sa) },
			abi.RDMA_USER_CM_CMD_BIND, sizeof[abi.UCMBind](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMBind
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.AddrSize != 16 || string(r.Addr.Raw[:16]) != string(sa) {
					t.Errorf("request %+v", r)
				}
			}},
		{"RESOLVE_ADDR", func(f *File) (any, error) { return nil, f.ResolveAddr(4, nil, sa, 2000) },
			abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, sizeof[abi.UCMResolveAddr](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMResolveAddr
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.TimeoutMs != 2000 || r.SrcSize != 0 || r.DstSize != 16 || r.DstAddr.Raw[4] != 198 {
					t.Errorf("request %+v", r)
				}
			}},
		{"RESOLVE_ROUTE", func(f *File) (any, error) { return nil, f.ResolveRoute(4, 1000) },
			abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, sizeof[abi.UCMResolveRoute](), 0, -1, nil, nil, nil},
		{"QUERY_ADDR", func(f *File) (any, error) { return f.QueryAddr(4) },
			abi.RDMA_USER_CM_CMD_QUERY, sizeof[abi.UCMQuery](), sizeof[abi.UCMQueryAddrResp](), 0,
			abi.Bytes(&queryResp), queryResp,
			func(t *testing.T, p []byte) {
				var r abi.UCMQuery
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.Option != abi.RDMA_USER_CM_QUERY_ADDR {
					t.Errorf("request %+v", r)
				}
			}},
		{"CONNECT", func(f *File) (any, error) {
			return nil, f.Connect(4, &abi.UCMConnParam{Valid: 1, QPNum: 0x12, PrivateDataLen: 3, PrivateData: [256]uint8{1, 2, 3}})
		}, abi.RDMA_USER_CM_CMD_CONNECT, sizeof[abi.UCMConnect](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMConnect
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.ConnParam.Valid != 1 || r.ConnParam.QPNum != 0x12 || r.ConnParam.PrivateData[2] != 3 {
					t.Errorf("request %+v", r)
				}
			}},
		{"LISTEN", func(f *File) (any, error) { return nil, f.Listen(4, 8) },
			abi.RDMA_USER_CM_CMD_LISTEN, sizeof[abi.UCMListen](), 0, -1, nil, nil, nil},
		{"ACCEPT", func(f *File) (any, error) { return nil, f.Accept(4, 77, &abi.UCMConnParam{Valid: 1}) },
			abi.RDMA_USER_CM_CMD_ACCEPT, sizeof[abi.UCMAccept](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMAccept
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.UID != 77 || r.ConnParam.Valid != 1 {
					t.Errorf("request %+v", r)
				}
			}},
		{"REJECT", func(f *File) (any, error) { return nil, f.Reject(4, 0, []byte("no")) },
			abi.RDMA_USER_CM_CMD_REJECT, sizeof[abi.UCMReject](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMReject
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.PrivateDataLen != 2 || string(r.PrivateData[:2]) != "no" {
					t.Errorf("request %+v", r)
				}
			}},
		{"DISCONNECT", func(f *File) (any, error) { return nil, f.Disconnect(4) },
			abi.RDMA_USER_CM_CMD_DISCONNECT, sizeof[abi.UCMDisconnect](), 0, -1, nil, nil, nil},
		{"INIT_QP_ATTR", func(f *File) (any, error) { return f.InitQPAttr(4, 2) },
			abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, sizeof[abi.UCMInitQPAttr](), sizeof[abi.QPAttr](), 0,
			abi.Bytes(&qpResp), qpResp,
			func(t *testing.T, p []byte) {
				var r abi.UCMInitQPAttr
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.QPState != 2 {
					t.Errorf("request %+v", r)
				}
			}},
		{"SET_OPTION", func(f *File) (any, error) { return nil, f.SetOption(4, 0, 3, []byte{14}) },
			abi.RDMA_USER_CM_CMD_SET_OPTION, sizeof[abi.UCMSetOption](), 0, -1, nil, nil,
			func(t *testing.T, p []byte) {
				var r abi.UCMSetOption
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.Level != 0 || r.Optname != 3 || r.Optlen != 1 || r.Optval == 0 {
					t.Errorf("request %+v", r)
				}
			}},
		{"NOTIFY", func(f *File) (any, error) { return nil, f.Notify(4, 4) },
			abi.RDMA_USER_CM_CMD_NOTIFY, sizeof[abi.UCMNotify](), 0, -1, nil, nil, nil},
		{"JOIN_MCAST", func(f *File) (any, error) { return f.JoinMcast(4, 99, sa, 1) },
			abi.RDMA_USER_CM_CMD_JOIN_MCAST, sizeof[abi.UCMJoinMcast](), 4, 0, u32(11), uint32(11),
			func(t *testing.T, p []byte) {
				var r abi.UCMJoinMcast
				copy(abi.Bytes(&r), p)
				if r.ID != 4 || r.UID != 99 || r.AddrSize != 16 || r.JoinFlags != 1 {
					t.Errorf("request %+v", r)
				}
			}},
		{"LEAVE_MCAST", func(f *File) (any, error) { return f.LeaveMcast(11) },
			abi.RDMA_USER_CM_CMD_LEAVE_MCAST, sizeof[abi.UCMDestroyID](), 4, 0, u32(1), uint32(1), nil},
		{"MIGRATE_ID", func(f *File) (any, error) { return f.MigrateID(4, f) },
			abi.RDMA_USER_CM_CMD_MIGRATE_ID, sizeof[abi.UCMMigrateID](), 4, 0, u32(2), uint32(2), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &fakeKernel{respOff: tc.respOff, resp: tc.resp}
			f := &File{kernel: k.write}
			got, err := tc.call(f)
			if err != nil {
				t.Fatal(err)
			}
			if k.hdr.Cmd != tc.cmd || int(k.hdr.In) != tc.in || int(k.hdr.Out) != tc.out || len(k.payload) != tc.in {
				t.Errorf("header %+v with %d bytes, want cmd %d in %d out %d", k.hdr, len(k.payload), tc.cmd, tc.in, tc.out)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
			if tc.check != nil {
				tc.check(t, k.payload)
			}
		})
	}
}

func TestCommandErrors(t *testing.T) {
	k := &fakeKernel{respOff: -1, err: syscall.EADDRINUSE}
	f := &File{kernel: k.write}
	err := f.Bind(1, make([]byte, 16))
	var se *sys.Error
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &se) || se.Op != "rdma_cm BIND" {
		t.Errorf("Bind = %v, want an error naming rdma_cm BIND that matches EADDRINUSE", err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"bind", func() error { return f.Bind(1, make([]byte, 129)) }},
		{"resolve", func() error { return f.ResolveAddr(1, nil, make([]byte, 129), 1) }},
		{"reject", func() error { return f.Reject(1, 0, make([]byte, 257)) }},
		{"join", func() error { _, err := f.JoinMcast(1, 1, make([]byte, 129), 0); return err }},
	} {
		if err := tc.call(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s with an oversized buffer = %v, want EINVAL", tc.name, err)
		}
	}
}

func TestGetEvent(t *testing.T) {
	var ev abi.UCMEventResp
	ev.UID, ev.ID, ev.Event, ev.Status = 42, 3, 9, 0
	k := &fakeKernel{respOff: 0, resp: abi.Bytes(&ev)}
	f := &File{kernel: k.write}
	var got abi.UCMEventResp
	if err := f.GetEvent(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if k.hdr.Cmd != abi.RDMA_USER_CM_CMD_GET_EVENT || int(k.hdr.Out) != sizeof[abi.UCMEventResp]() {
		t.Errorf("header %+v", k.hdr)
	}
	if got != ev {
		t.Errorf("event %+v, want %+v", got, ev)
	}
}

func TestErrno(t *testing.T) {
	if Errno(0) != nil || !errors.Is(Errno(110), syscall.ETIMEDOUT) {
		t.Errorf("Errno(0) = %v, Errno(110) = %v", Errno(0), Errno(110))
	}
	if got := ErrnoOf(&sys.Error{Op: "x", Err: syscall.ENOENT}); got != int(syscall.ENOENT) {
		t.Errorf("ErrnoOf a wrapped ENOENT = %d", got)
	}
	if got := ErrnoOf(errors.New("plain")); got != int(syscall.EIO) {
		t.Errorf("ErrnoOf a plain error = %d, want EIO", got)
	}
}
