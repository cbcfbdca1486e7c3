package rpma_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/purerdma/rdma/rpma"
)

// A descriptor as C librpma 1.2 writes it (rpma_mr_get_descriptor):
// address 0x1122334455667788, size 4096, rkey 0xdeadbeef, usage
// READ_SRC|WRITE_DST (0x09), all little-endian.
var cDescriptor = []byte{
	0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	0x00, 0x10, 0, 0, 0, 0, 0, 0,
	0xef, 0xbe, 0xad, 0xde,
	0x09,
}

func TestRemoteMRFromDescriptor(t *testing.T) {
	r, err := rpma.RemoteMRFromDescriptor(cDescriptor)
	if err != nil {
		t.Fatal(err)
	}
	want := rpma.RemoteMR{Addr: 0x1122334455667788, Len: 4096, RKey: 0xdeadbeef, Usage: rpma.UsageReadSrc | rpma.UsageWriteDst}
	if *r != want {
		t.Fatalf("decoded %+v, want %+v", *r, want)
	}
	if r.Size() != 4096 || r.FlushType() != 0 {
		t.Errorf("Size %d, FlushType %v", r.Size(), r.FlushType())
	}
	if got := r.Descriptor(); !bytes.Equal(got, cDescriptor) {
		t.Errorf("re-encoded %x, want %x", got, cDescriptor)
	}
	// Longer input: the rest is ignored, as in C.
	if r2, err := rpma.RemoteMRFromDescriptor(append(append([]byte{}, cDescriptor...), 1, 2, 3)); err != nil || *r2 != want {
		t.Errorf("with trailing bytes: %+v, %v", r2, err)
	}
	flush := append([]byte{}, cDescriptor...)
	flush[20] = byte(rpma.UsageFlushPersistent | rpma.UsageFlushVisibility | rpma.UsageWriteDst)
	if r3, _ := rpma.RemoteMRFromDescriptor(flush); r3.FlushType() != rpma.UsageFlushPersistent|rpma.UsageFlushVisibility {
		t.Errorf("FlushType %v", r3.FlushType())
	}
}

func TestRemoteMRFromDescriptorBad(t *testing.T) {
	zeroUsage := append([]byte{}, cDescriptor...)
	zeroUsage[20] = 0
	wrap := append([]byte{}, cDescriptor...)
	binary.LittleEndian.PutUint64(wrap[0:], ^uint64(0)-10)
	for name, d := range map[string][]byte{
		"nil":        nil,
		"short":      cDescriptor[:20],
		"zero usage": zeroUsage,
		"wraps":      wrap,
	} {
		r, err := rpma.RemoteMRFromDescriptor(d)
		if !errors.Is(err, rpma.ErrInvalid) || r != nil {
			t.Errorf("%s: %v, %v; want ErrInvalid", name, r, err)
		}
	}
}

func TestPeerCfgDescriptor(t *testing.T) {
	c := rpma.NewPeerCfg()
	if d := c.Descriptor(); !bytes.Equal(d, []byte{0}) {
		t.Errorf("default descriptor %x, want 00 (C's one byte)", d)
	}
	c.SetDirectWriteToPMem(true)
	if d := c.Descriptor(); !bytes.Equal(d, []byte{1}) {
		t.Errorf("direct write descriptor %x, want 01", d)
	}
	c.SetNativeFlush(true)
	d := c.Descriptor()
	if !bytes.Equal(d, []byte{1, 1}) {
		t.Errorf("native flush descriptor %x, want 01 01", d)
	}
	back, err := rpma.PeerCfgFromDescriptor(d)
	if err != nil || !back.DirectWriteToPMem() || !back.NativeFlush() {
		t.Errorf("round trip: %v, %v", back, err)
	}
	c.SetNativeAtomicWrite(true)
	if d := c.Descriptor(); !bytes.Equal(d, []byte{1, 3}) {
		t.Errorf("native flush and atomic write descriptor %x, want 01 03", d)
	}
	c.SetNativeFlush(false)
	d = c.Descriptor()
	if !bytes.Equal(d, []byte{1, 2}) {
		t.Errorf("native atomic write descriptor %x, want 01 02", d)
	}
	back, err = rpma.PeerCfgFromDescriptor(d)
	if err != nil || !back.DirectWriteToPMem() || back.NativeFlush() || !back.NativeAtomicWrite() {
		t.Errorf("round trip of %x: %v, %v", d, back, err)
	}
	c.SetNativeAtomicWrite(false)
	if d := c.Descriptor(); !bytes.Equal(d, []byte{1}) {
		t.Errorf("descriptor with both flags off again %x, want 01", d)
	}
	// C's decoder reads only the first byte; ours reads C's one byte.
	back, err = rpma.PeerCfgFromDescriptor([]byte{1})
	if err != nil || !back.DirectWriteToPMem() || back.NativeFlush() || back.NativeAtomicWrite() {
		t.Errorf("C descriptor 01: %v, %v", back, err)
	}
	if _, err := rpma.PeerCfgFromDescriptor(nil); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("empty descriptor: %v, want ErrInvalid", err)
	}
}

func FuzzRemoteMRFromDescriptor(f *testing.F) {
	f.Add(cDescriptor)
	f.Add(cDescriptor[:20])
	f.Add(append(append([]byte{}, cDescriptor...), 0xff))
	f.Fuzz(func(t *testing.T, d []byte) {
		r, err := rpma.RemoteMRFromDescriptor(d)
		if err != nil {
			if r != nil || !errors.Is(err, rpma.ErrInvalid) {
				t.Fatalf("error %v with result %v", err, r)
			}
			if len(d) >= rpma.MRDescriptorSize && d[20] != 0 {
				addr, size := binary.LittleEndian.Uint64(d), binary.LittleEndian.Uint64(d[8:])
				if addr+size >= addr {
					t.Fatalf("refused a valid descriptor %x: %v", d, err)
				}
			}
			return
		}
		if len(d) < rpma.MRDescriptorSize || r.Usage == 0 || r.Addr+r.Len < r.Addr {
			t.Fatalf("accepted %x as %+v", d, r)
		}
		if got := r.Descriptor(); !bytes.Equal(got, d[:rpma.MRDescriptorSize]) {
			t.Fatalf("round trip %x -> %x", d[:rpma.MRDescriptorSize], got)
		}
	})
}

func FuzzPeerCfgFromDescriptor(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1})
	f.Add([]byte{1, 1})
	f.Add([]byte{2, 0xfe, 7})
	f.Fuzz(func(t *testing.T, d []byte) {
		c, err := rpma.PeerCfgFromDescriptor(d)
		if len(d) == 0 {
			if err == nil || !errors.Is(err, rpma.ErrInvalid) {
				t.Fatalf("empty: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%x: %v", d, err)
		}
		if c.DirectWriteToPMem() != (d[0] != 0) {
			t.Fatalf("%x: direct write %v", d, c.DirectWriteToPMem())
		}
		if c.NativeFlush() != (len(d) > 1 && d[1]&1 != 0) {
			t.Fatalf("%x: native flush %v", d, c.NativeFlush())
		}
		if c.NativeAtomicWrite() != (len(d) > 1 && d[1]&2 != 0) {
			t.Fatalf("%x: native atomic write %v", d, c.NativeAtomicWrite())
		}
		// Re-encoding keeps what C reads: the first byte, as 0 or 1.
		if e := c.Descriptor(); (e[0] != 0) != (d[0] != 0) || e[0] > 1 {
			t.Fatalf("%x re-encoded as %x", d, e)
		}
	})
}
