package pingpong

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// FuzzPPExchange runs the pingpong address exchange against a peer that
// sends arbitrary bytes, as either side with one to four QPs. The
// exchange never panics; it returns the peer's addresses exactly when
// the peer sent that many valid messages (and, to a server, a done
// message after them), each as parsePPDest reads it; the server connects
// once, to exactly those addresses, before it sends its own; and each
// side writes only what the examples write at that point. Every address
// read prints in the examples' address line with a GID that reads back
// as the same address.
func FuzzPPExchange(f *testing.F) {
	f.Add([]byte(ppWireRxe0+"done\x00"), uint8(1), false)
	f.Add([]byte(ppWireRxe0), uint8(1), true)
	f.Add([]byte(ppWireRxe0+ppWireRxe0+"do"), uint8(2), false)
	f.Add([]byte("ffff:ffffff:ffffff:fe80000000000000505400fffe123456\x00"+ppWireRxe0[:30]), uint8(2), true)
	f.Add([]byte(strings.Repeat("x", ppMsgLen)), uint8(1), false)
	f.Fuzz(func(t *testing.T, peer []byte, qps uint8, client bool) {
		n := int(qps%4) + 1
		mine := make([]ppDest, n)
		for i := range mine {
			mine[i] = ppDest{LID: uint16(i), QPN: uint32(0x100 + i), PSN: uint32(0xabc + i)}
		}
		var mineWire []byte
		for _, d := range mine {
			m, err := d.marshal()
			if err != nil {
				t.Fatal(err)
			}
			mineWire = append(mineWire, m[:]...)
		}
		// The reference: how many messages the peer's bytes hold and
		// what they say.
		var want []ppDest
		valid := len(peer) >= n*ppMsgLen
		for i := 0; valid && i < n; i++ {
			d, err := parsePPDest(peer[i*ppMsgLen : (i+1)*ppMsgLen])
			valid = err == nil
			want = append(want, d)
		}
		rw := &ppRecorder{Reader: bytes.NewReader(peer)}
		var got []ppDest
		var err error
		if client {
			got, err = ppClientExchange(rw, mine)
			wantWrote := mineWire
			if valid {
				wantWrote = append(bytes.Clone(mineWire), ppDone...)
			}
			if !bytes.Equal(rw.wrote.Bytes(), wantWrote) {
				t.Fatalf("the client wrote %q, want %q", rw.wrote.Bytes(), wantWrote)
			}
		} else {
			var connected [][]ppDest
			got, err = ppServerExchange(rw, mine, func(d []ppDest) error {
				if rw.wrote.Len() != 0 {
					t.Fatalf("the server wrote %q before connecting", rw.wrote.Bytes())
				}
				connected = append(connected, append([]ppDest(nil), d...))
				return nil
			})
			if valid != (len(connected) == 1) || len(connected) > 1 {
				t.Fatalf("the server connected %d times; the peer's addresses are valid: %v", len(connected), valid)
			}
			if valid && !equalDests(connected[0], want) {
				t.Fatalf("the server connected to %+v, want %+v", connected[0], want)
			}
			valid = valid && len(peer) >= n*ppMsgLen+len(ppDone)
			wantWrote := mineWire
			if len(connected) == 0 {
				wantWrote = nil
			}
			if !bytes.Equal(rw.wrote.Bytes(), wantWrote) {
				t.Fatalf("the server wrote %q, want %q", rw.wrote.Bytes(), wantWrote)
			}
		}
		if (err == nil) != valid {
			t.Fatalf("exchange = %v; the peer's bytes are valid: %v", err, valid)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pingpong: ") {
				t.Fatalf("error %q does not name the command", err)
			}
			return
		}
		if !equalDests(got, want) {
			t.Fatalf("exchange = %+v, want %+v", got, want)
		}
		for _, d := range got {
			line := ppAddressLine("remote", d, ", ")
			gid, ok := strings.CutPrefix(line[strings.LastIndex(line, " GID ")+1:], "GID ")
			a, perr := netip.ParseAddr(strings.TrimSuffix(gid, "\n"))
			if !ok || perr != nil || uverbs.GID(a.As16()) != d.GID {
				t.Fatalf("address line %q does not name GID %x: %v", line, d.GID[:], perr)
			}
		}
	})
}

func equalDests(a, b []ppDest) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
