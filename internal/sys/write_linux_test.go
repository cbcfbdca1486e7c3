package sys

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// commandBytes runs fn on an FD whose writes land in a pipe, after
// leaving the scratch pool's next block full of 0xff, and returns what
// was written.
func commandBytes(t *testing.T, fn func(f *FD) error) []byte {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	f := &FD{raw: p[1]}
	defer f.Close()
	s, err := GetScratch()
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Bytes() {
		s.Bytes()[i] = 0xff
	}
	s.Release()
	if err := fn(f); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	n, err := unix.Read(p[0], b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// Scratch blocks are reused dirty: the commands built in them must set
// every header byte (the kernel refuses a nonzero reserved field, and a
// response address with no response).
func TestCommandExHeaderFromDirtyScratch(t *testing.T) {
	in := make([]byte, 16)
	in[0] = 7
	b := commandBytes(t, func(f *FD) error {
		_, err := f.CommandEx("test", 3, in, nil, 0, 0)
		return err
	})
	if len(b) != 24+16 {
		t.Fatalf("wrote %d bytes, want 40", len(b))
	}
	if got := binary.NativeEndian.Uint64(b[8:]); got != 0 {
		t.Errorf("response address %#x with no response, want 0", got)
	}
	if got := binary.NativeEndian.Uint32(b[20:]); got != 0 {
		t.Errorf("cmd_hdr_reserved = %#x, want 0", got)
	}
	if b[24] != 7 || b[25] != 0 {
		t.Errorf("request bytes %x, want the request", b[24:])
	}
}

func TestCommandFromDirtyScratch(t *testing.T) {
	in := make([]byte, 8)
	b := commandBytes(t, func(f *FD) error { return f.Command("test", 5, in, nil) })
	if len(b) != 16 {
		t.Fatalf("wrote %d bytes, want 16", len(b))
	}
	want := []byte{5, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	for i := range want {
		if b[i] != want[i] {
			t.Fatalf("wrote %x, want %x", b, want)
		}
	}
}
