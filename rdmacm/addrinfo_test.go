package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

func TestGetAddrInfo(t *testing.T) {
	ap := netip.MustParseAddrPort
	rc := func(src, dst string) rdmacm.AddrInfo {
		ai := rdmacm.AddrInfo{PortSpace: rdmacm.PortSpaceTCP, QPType: uverbs.QPTypeRC}
		if src != "" {
			ai.Src = ap(src)
		}
		if dst != "" {
			ai.Dst = ap(dst)
		}
		return ai
	}
	passive := func(src string) rdmacm.AddrInfo {
		ai := rc(src, "")
		ai.Flags = rdmacm.Passive
		return ai
	}
	for _, tc := range []struct {
		name          string
		node, service string
		hints         *rdmacm.AddrInfoHints
		want          []rdmacm.AddrInfo
	}{
		{"numeric IPv4", "198.18.0.1", "7471", nil, []rdmacm.AddrInfo{rc("", "198.18.0.1:7471")}},
		{"numeric IPv6 with zone", "fe80::1%1", "7471", nil, []rdmacm.AddrInfo{rc("", "[fe80::1%1]:7471")}},
		{"IPv4-mapped", "::ffff:198.18.0.1", "1", nil, []rdmacm.AddrInfo{rc("", "198.18.0.1:1")}},
		{"with a source", "198.18.0.1", "7471", &rdmacm.AddrInfoHints{Src: ap("198.18.0.2:0")},
			[]rdmacm.AddrInfo{rc("198.18.0.2:0", "198.18.0.1:7471")}},
		{"passive any", "", "7471", &rdmacm.AddrInfoHints{Flags: rdmacm.Passive},
			[]rdmacm.AddrInfo{passive("0.0.0.0:7471"), passive("[::]:7471")}},
		{"passive any IPv6", "", "7471", &rdmacm.AddrInfoHints{Flags: rdmacm.Passive, Network: "ip6"},
			[]rdmacm.AddrInfo{passive("[::]:7471")}},
		{"passive address", "198.18.0.1", "", &rdmacm.AddrInfoHints{Flags: rdmacm.Passive | rdmacm.NumericHost},
			[]rdmacm.AddrInfo{passive("198.18.0.1:0")}},
		{"active loopback", "", "7471", &rdmacm.AddrInfoHints{Network: "ip4"}, []rdmacm.AddrInfo{rc("", "127.0.0.1:7471")}},
		{"service name", "198.18.0.1", "http", nil, []rdmacm.AddrInfo{rc("", "198.18.0.1:80")}},
		{"UDP", "198.18.0.1", "domain", &rdmacm.AddrInfoHints{PortSpace: rdmacm.PortSpaceUDP},
			[]rdmacm.AddrInfo{{PortSpace: rdmacm.PortSpaceUDP, QPType: uverbs.QPTypeUD, Dst: ap("198.18.0.1:53")}}},
		{"host name", "localhost", "7471", &rdmacm.AddrInfoHints{Network: "ip4"}, []rdmacm.AddrInfo{rc("", "127.0.0.1:7471")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rdmacm.GetAddrInfo(context.Background(), tc.node, tc.service, tc.hints)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetAddrInfoErrors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		node, service string
		hints         *rdmacm.AddrInfoHints
		want          error
	}{
		{"nothing", "", "", nil, syscall.EINVAL},
		{"name with NumericHost", "localhost", "1", &rdmacm.AddrInfoHints{Flags: rdmacm.NumericHost}, syscall.EINVAL},
		{"bad network", "198.18.0.1", "1", &rdmacm.AddrInfoHints{Network: "tcp"}, syscall.EINVAL},
		{"IB port space", "198.18.0.1", "1", &rdmacm.AddrInfoHints{PortSpace: 0x13f}, rdmacm.ErrNotSupported},
		{"family mismatch", "::1", "1", &rdmacm.AddrInfoHints{Network: "ip4"}, nil},
		{"port out of range", "198.18.0.1", "65536", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rdmacm.GetAddrInfo(context.Background(), tc.node, tc.service, tc.hints)
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want an error matching %v", err, tc.want)
			}
		})
	}
}
