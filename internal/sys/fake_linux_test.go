package sys

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerdma/rdma/internal/abi"
)

// recorder is a Fake that answers one path and records the calls.
type recorder struct {
	path   string
	calls  []string
	hdr    abi.IoctlHdr
	mapped []byte
}

func (r *recorder) Open(path string) (int, bool, error) {
	if path != r.path {
		return 0, false, nil
	}
	fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	r.calls = append(r.calls, "open")
	return fd, true, err
}

func (r *recorder) Ioctl(raw int, req uintptr, arg uintptr) error {
	r.calls = append(r.calls, "ioctl")
	r.hdr = **(**abi.IoctlHdr)(unsafe.Pointer(&arg))
	return unix.EPROTONOSUPPORT
}

func (r *recorder) Write(raw int, b []byte) (int, error) {
	r.calls = append(r.calls, "write")
	return len(b), nil
}

func (r *recorder) Mmap(raw int, offset int64, length int) ([]byte, error) {
	r.calls = append(r.calls, "mmap")
	r.mapped = make([]byte, length)
	return r.mapped, nil
}

func (r *recorder) Munmap(b []byte) (bool, error) {
	if len(b) == 0 || len(r.mapped) == 0 || &b[0] != &r.mapped[0] {
		return false, nil
	}
	r.calls = append(r.calls, "munmap")
	return true, nil
}

func (r *recorder) Close(raw int) { r.calls = append(r.calls, "close") }

// TestFake: an installed Fake answers the fds it opens, and only while
// installed; other paths and memory are the kernel's.
func TestFake(t *testing.T) {
	r := &recorder{path: "/dev/infiniband/uverbs9"}
	uninstall := InstallFake(r)
	f, err := Open(r.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Command("test", abi.IB_USER_VERBS_CMD_ALLOC_PD, make([]byte, 8), nil); err != nil {
		t.Fatal(err)
	}
	m := NewMethod("test", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT)
	m.InUint(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1, 1)
	if err := m.Exec(f, 7); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("Exec: %v, want the fake's EPROTONOSUPPORT", err)
	}
	if r.hdr.ObjectID != abi.UVERBS_OBJECT_DEVICE || r.hdr.MethodID != abi.UVERBS_METHOD_QUERY_PORT || r.hdr.DriverID != 7 || r.hdr.NumAttrs != 1 {
		t.Errorf("the fake saw header %+v", r.hdr)
	}
	b, err := f.Mmap("test", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := Munmap(b); err != nil {
		t.Fatal(err)
	}
	// Memory the fake does not own is the kernel's.
	anon, err := MmapAnon(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := Munmap(anon); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"open", "write", "ioctl", "mmap", "munmap", "close"}
	if len(r.calls) != len(want) {
		t.Fatalf("calls %v, want %v", r.calls, want)
	}
	for i := range want {
		if r.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", r.calls, want)
		}
	}
	if _, err := Open("/nonexistent/uverbs"); err == nil {
		t.Error("a path the fake does not answer opened")
	}
	uninstall()
	if _, err := Open(r.path); err == nil {
		t.Error("the fake answered after it was uninstalled")
	}
}
