package ucma

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/abi"
)

func TestTryGetEvent(t *testing.T) {
	var ev abi.UCMEventResp
	ev.UID, ev.ID, ev.Event = 42, 3, 10
	k := &fakeKernel{respOff: 0, resp: abi.Bytes(&ev)}
	f := &File{kernel: k.write}
	var got abi.UCMEventResp
	if ok, err := f.TryGetEvent(&got); !ok || err != nil {
		t.Fatalf("TryGetEvent with an event queued = %v, %v", ok, err)
	}
	if k.hdr.Cmd != abi.RDMA_USER_CM_CMD_GET_EVENT || int(k.hdr.Out) != sizeof[abi.UCMEventResp]() {
		t.Errorf("header %+v", k.hdr)
	}
	if got != ev {
		t.Errorf("event %+v, want %+v", got, ev)
	}

	// None queued: the non-blocking fd's EAGAIN is "no event", not an error.
	empty := &File{kernel: (&fakeKernel{respOff: -1, err: syscall.EAGAIN}).write}
	got = abi.UCMEventResp{}
	if ok, err := empty.TryGetEvent(&got); ok || err != nil || got != (abi.UCMEventResp{}) {
		t.Errorf("TryGetEvent with none queued = %v, %v, %+v; want false, nil, nothing", ok, err, got)
	}
	bad := &File{kernel: (&fakeKernel{respOff: -1, err: syscall.EBADF}).write}
	if ok, err := bad.TryGetEvent(&got); ok || !errors.Is(err, syscall.EBADF) {
		t.Errorf("TryGetEvent on a failing fd = %v, %v; want the errno", ok, err)
	}
}
