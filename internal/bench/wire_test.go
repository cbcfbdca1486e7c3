package bench

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testHello = Hello{
	Test: WriteLat, Size: 64, Iters: 1000, Warmup: 100, QPN: 0x11, PSN: 0xabcdef,
	GID: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 1}, MTU: 3, OutReads: 128,
	RKey: 0x1234, Addr: 0x7f0000001000, Len: 4096,
}

func TestHelloEncoding(t *testing.T) {
	b, err := testHello.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The wire format, field by field (big-endian).
	want := "50524442" + "0001" + "01" + "03" + "80" + "000000" + // magic, version, test, MTU, out reads, reserved
		"00000040" + "000003e8" + "00000064" + "00000011" + "00abcdef" + "00001234" + // size, iters, warm-up, QPN, PSN, rkey
		"00000000000000000000ffffc6120001" + // GID
		"00007f0000001000" + "0000000000001000" // address, length
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("MarshalBinary =\n%s, want\n%s", got, want)
	}
	var h Hello
	if err := h.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testHello, h); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestHelloDecodeErrors(t *testing.T) {
	good, _ := testHello.MarshalBinary()
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	with := func(f func(*Hello)) []byte {
		h := testHello
		f(&h)
		b, _ := h.MarshalBinary()
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:67], "67 bytes"},
		{"long", append(bytes.Clone(good), 0), "69 bytes"},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"version", edit(func(b []byte) []byte { b[5] = 2; return b }), "version 2"},
		{"reserved", edit(func(b []byte) []byte { b[10] = 1; return b }), "reserved"},
		{"test", with(func(h *Hello) { h.Test = 0 }), "unknown test 0"},
		{"test 8", with(func(h *Hello) { h.Test = 8 }), "unknown test 8"},
		{"MTU 0", with(func(h *Hello) { h.MTU = 0 }), "MTU code 0"},
		{"MTU 6", with(func(h *Hello) { h.MTU = 6 }), "MTU code 6"},
		{"size 0", with(func(h *Hello) { h.Size = 0 }), "message size 0"},
		{"size huge", with(func(h *Hello) { h.Size = MaxSize + 1 }), "message size"},
		{"atomic size", with(func(h *Hello) { h.Test = AtomicLat }), "atomic_lat hello with size 64"},
		{"no iterations", with(func(h *Hello) { h.Iters = 0 }), "0 iterations"},
		{"warm-up", with(func(h *Hello) { h.Warmup = MaxIters + 1 }), "warm-up"},
		{"QPN", with(func(h *Hello) { h.QPN = 1 << 24 }), "24 bits"},
		{"PSN", with(func(h *Hello) { h.PSN = 1 << 24 }), "24 bits"},
		{"memory too small", with(func(h *Hello) { h.Len = 63 }), "63 bytes of memory"},
		{"memory wraps", with(func(h *Hello) { h.Addr = ^uint64(0) - 10 }), "bytes of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Hello
			err := h.UnmarshalBinary(tt.b)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UnmarshalBinary = %v, want ErrMalformed saying %q", err, tt.want)
			}
			if h != (Hello{}) {
				t.Errorf("a failed decode changed the Hello: %+v", h)
			}
		})
	}
}

func TestCheckPeer(t *testing.T) {
	if err := CheckPeer(testHello, testHello); err != nil {
		t.Errorf("CheckPeer of equal hellos = %v", err)
	}
	peer := testHello
	peer.QPN, peer.PSN, peer.GID, peer.RKey, peer.Addr, peer.MTU = 1, 2, [16]byte{}, 3, 4, 5
	if err := CheckPeer(testHello, peer); err != nil {
		t.Errorf("CheckPeer with another QP and memory = %v", err)
	}
	for _, f := range []func(*Hello){
		func(h *Hello) { h.Test = SendLat },
		func(h *Hello) { h.Size = 8 },
		func(h *Hello) { h.Iters = 5 },
		func(h *Hello) { h.Warmup = 0 },
	} {
		p := testHello
		f(&p)
		if err := CheckPeer(testHello, p); err == nil || !strings.Contains(err.Error(), "the peer runs") {
			t.Errorf("CheckPeer(%+v) = %v, want a mismatch", p, err)
		}
	}
}

func TestMessages(t *testing.T) {
	var buf bytes.Buffer
	msgs := []struct {
		t MsgType
		p []byte
	}{{MsgHello, []byte("hello")}, {MsgReady, nil}, {MsgDone, []byte("{}")}, {MsgError, []byte("oops")}}
	for _, m := range msgs {
		if err := WriteMessage(&buf, m.t, m.p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := buf.Len(), 4*4+5+2+4; got != want {
		t.Errorf("%d bytes written, want %d", got, want)
	}
	for _, m := range msgs {
		typ, p, err := ReadMessage(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if typ != m.t || !bytes.Equal(p, m.p) {
			t.Errorf("ReadMessage = %v %q, want %v %q", typ, p, m.t, m.p)
		}
	}
	if _, _, err := ReadMessage(&buf); err != io.EOF {
		t.Errorf("ReadMessage at the end = %v, want io.EOF", err)
	}
	if err := WriteMessage(io.Discard, MsgDone, make([]byte, MaxPayload+1)); err == nil {
		t.Error("WriteMessage of an oversized payload succeeded")
	}
}

func TestReadMessageErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string // hex
		err  error
	}{
		{"empty", "", io.EOF},
		{"short header", "0100", io.ErrUnexpectedEOF},
		{"short payload", "01000004aabb", io.ErrUnexpectedEOF},
		{"type 0", "00000000", ErrMalformed},
		{"type 5", "05000000", ErrMalformed},
		{"flags", "02010000", ErrMalformed},
		{"too long", "03001001", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tt.in)
			if _, _, err := ReadMessage(bytes.NewReader(b)); !errors.Is(err, tt.err) {
				t.Errorf("ReadMessage(%s) = %v, want %v", tt.in, err, tt.err)
			}
		})
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct{ in, want string }{
		{"device rxe9 not found", "peer: device rxe9 not found"},
		{"line\nbreak\x1b[31m", "peer: line break [31m"},
		{"bad \xff utf8", "peer: bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		if got := DecodeError([]byte(tt.in)).Error(); got != tt.want {
			t.Errorf("DecodeError(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzDecode feeds arbitrary bytes from the network to the decoders:
// they must not panic, a Hello that decodes must encode back to the same
// bytes, and a Done that decodes must hold a valid result.
func FuzzDecode(f *testing.F) {
	good, _ := testHello.MarshalBinary()
	var msg bytes.Buffer
	WriteMessage(&msg, MsgHello, good)
	f.Add(msg.Bytes())
	f.Add(good)
	f.Add([]byte(`{"test":"write_bw","role":"client","size":8,"iterations":5,"bandwidth":{"seconds":1}}`))
	f.Add([]byte{3, 0, 0, 2, '{', '}'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Hello
		if err := h.UnmarshalBinary(b); err == nil {
			back, _ := h.MarshalBinary()
			if !bytes.Equal(back, b) {
				t.Errorf("hello %x decodes to %+v, which encodes to %x", b, h, back)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("UnmarshalBinary error %v does not match ErrMalformed", err)
		}
		if r, err := DecodeDone(b); err == nil && r != nil {
			if err := r.Validate(); err != nil {
				t.Errorf("DecodeDone(%q) returned an invalid result: %v", b, err)
			}
		}
		DecodeError(b)
		r := bytes.NewReader(b)
		for {
			typ, p, err := ReadMessage(r)
			if err != nil {
				break
			}
			if len(p) > MaxPayload || typ < MsgHello || typ > MsgError {
				t.Fatalf("ReadMessage returned %v with %d bytes", typ, len(p))
			}
		}
	})
}
