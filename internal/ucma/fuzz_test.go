package ucma

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// FuzzGetEvent: GET_EVENT asks for a whole struct rdma_ucm_event_resp
// and returns exactly the bytes the kernel wrote, followed by zeros
// where it wrote less (an older kernel's shorter struct), never what an
// earlier command left in the scratch block; a failed write returns the
// kernel's errno, named as GET_EVENT.
func FuzzGetEvent(f *testing.F) {
	var ev abi.UCMEventResp
	ev.UID, ev.ID, ev.Event = 42, 3, 9
	f.Add(abi.Bytes(&ev), uint8(0))
	f.Add(abi.Bytes(&ev)[:unsafe.Offsetof(ev.ECE)], uint8(0)) // Linux before 5.8: no ECE
	f.Add([]byte{}, uint8(syscall.EINVAL))
	f.Add(bytes.Repeat([]byte{0xff}, sizeof[abi.UCMEventResp]()), uint8(syscall.ENODEV))
	f.Fuzz(func(t *testing.T, resp []byte, errno uint8) {
		if len(resp) > sizeof[abi.UCMEventResp]() {
			resp = resp[:sizeof[abi.UCMEventResp]()]
		}
		// Leave the next scratch block dirty, as an earlier command would.
		s, err := sys.GetScratch()
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Bytes() {
			s.Bytes()[i] = 0xee
		}
		s.Release()
		k := &fakeKernel{respOff: 0, resp: resp}
		if errno != 0 {
			k.err = syscall.Errno(errno)
		}
		f := &File{kernel: k.write}
		var got abi.UCMEventResp
		err = f.GetEvent(context.Background(), &got)
		if k.hdr.Cmd != abi.RDMA_USER_CM_CMD_GET_EVENT || int(k.hdr.In) != sizeof[abi.UCMGetEvent]() ||
			int(k.hdr.Out) != sizeof[abi.UCMEventResp]() || len(k.payload) != int(k.hdr.In) {
			t.Fatalf("command header %+v with %d payload bytes", k.hdr, len(k.payload))
		}
		if errno != 0 {
			var se *sys.Error
			if !errors.Is(err, syscall.Errno(errno)) || !errors.As(err, &se) || se.Op != "rdma_cm GET_EVENT" {
				t.Fatalf("GetEvent with errno %d = %v, want the errno named as rdma_cm GET_EVENT", errno, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, sizeof[abi.UCMEventResp]())
		copy(want, resp)
		if !bytes.Equal(abi.Bytes(&got), want) {
			t.Fatalf("event\n%x\nwant the kernel's %d bytes, then zeros\n%x", abi.Bytes(&got), len(resp), want)
		}
	})
}
