package uverbs

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ipv4GRH builds the header area rxe delivers for a RoCE v2 datagram
// over IPv4: 20 zero bytes, then the IPv4 header.
func ipv4GRH(src, dst [4]byte, ttl, tos uint8) []byte {
	b := make([]byte, GRHLen)
	h := b[20:]
	h[0], h[1], h[8], h[9] = 0x45, tos, ttl, 17
	binary.BigEndian.PutUint16(h[2:], 60)
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
	return b
}

func TestParseGRH(t *testing.T) {
	v6 := make([]byte, GRHLen)
	binary.BigEndian.PutUint32(v6, 6<<28|0x2a<<20|0x12345)
	v6[6], v6[7] = 17, 64
	src6 := netip.MustParseAddr("fe80::1").As16()
	dst6 := netip.MustParseAddr("fe80::2").As16()
	copy(v6[8:], src6[:])
	copy(v6[24:], dst6[:])
	for _, tc := range []struct {
		name string
		in   []byte
		want GRH
		err  bool
	}{
		{"ipv4", ipv4GRH([4]byte{198, 18, 0, 2}, [4]byte{198, 18, 0, 1}, 64, 0x10), GRH{Version: 4,
			Src: GID(netip.MustParseAddr("::ffff:198.18.0.2").As16()), Dst: GID(netip.MustParseAddr("::ffff:198.18.0.1").As16()),
			HopLimit: 64, TrafficClass: 0x10}, false},
		{"ipv6", v6, GRH{Version: 6, Src: src6, Dst: dst6, HopLimit: 64, TrafficClass: 0x2a, FlowLabel: 0x12345, NextHeader: 17}, false},
		{"short", make([]byte, 39), GRH{}, true},
		{"garbage", make([]byte, GRHLen), GRH{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseGRH(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseGRH(f *testing.F) {
	f.Add(ipv4GRH([4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8}, 1, 2))
	f.Add(make([]byte, GRHLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGRH(b)
		if err == nil && g.Version != 4 && g.Version != 6 {
			t.Fatalf("version %d without an error", g.Version)
		}
	})
}

func TestCheckTransition(t *testing.T) {
	req := QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
	for _, tc := range []struct {
		typ       QPType
		cur, next QPState
		mask      QPAttrMask
		ok        bool
	}{
		{QPTypeRC, QPStateReset, QPStateInit, QPAttrState | req, true},
		{QPTypeRC, QPStateReset, QPStateInit, QPAttrState | QPAttrPort, false},
		{QPTypeUD, QPStateReset, QPStateInit, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey, true},
		{QPTypeUD, QPStateReset, QPStateInit, QPAttrState | req, false},
		{QPTypeRC, QPStateReset, QPStateErr, QPAttrState, false},
		{QPTypeRC, QPStateInit, QPStateErr, QPAttrState, true},
		{QPTypeRC, QPStateRTS, QPStateReset, QPAttrState, true},
		{QPTypeRC, QPStateRTS, QPStateReset, QPAttrState | QPAttrQKey, false},
		{QPTypeUD, QPStateInit, QPStateRTR, QPAttrState, true},
		{QPTypeUC, QPStateInit, QPStateRTR, QPAttrState, false},
		{QPTypeRC, QPStateRTS, QPStateSQE, QPAttrState, false},
		{QPTypeUC, QPStateSQE, QPStateRTS, QPAttrState | QPAttrCurState, true},
		{QPTypeRC, QPStateInit, QPStateInit, QPAttrState | QPAttrCurState, false}, // CUR_STATE not from INIT
		{QPTypeRC, QPStateRTS, QPStateRTS, QPAttrMinRNRTimer, true},               // no state change
		{QPTypeUC, QPStateRTS, QPStateRTS, QPAttrMinRNRTimer, false},
		{QPTypeRC, 9, QPStateInit, QPAttrState, false},
	} {
		err := checkTransition(tc.typ, tc.cur, tc.next, tc.mask)
		if (err == nil) != tc.ok {
			t.Errorf("%v %v->%v %v: %v, want ok=%v", tc.typ, tc.cur, tc.next, tc.mask, err, tc.ok)
		}
	}
}
