package vm

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/rdmanl"
)

// testLookups names the guest's devices without sysfs.
var testLookups = lookups{
	index: func(name string) (uint32, error) {
		for i, n := range []string{"lo", "veth0", "veth1", "veth2", "veth3", "eth0", "eth1", "link0", "mgmt0"} {
			if n == name {
				return uint32(i + 1), nil
			}
		}
		return 0, fmt.Errorf("no device %s", name)
	},
	mac: func(name string) (string, error) { return "02:00:00:00:00:01", nil },
}

// encodeAll encodes every step of n with testLookups.
func encodeAll(t *testing.T, n *network) map[string]string {
	t.Helper()
	if err := n.check(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, st := range n.steps() {
		r, err := st(testLookups)
		if err != nil {
			t.Fatal(err)
		}
		b := r.encode(1)
		if len(b)%4 != 0 || int(b[0])|int(b[1])<<8 != len(b) {
			t.Errorf("%s: %d bytes, header says %d", r.what, len(b), int(b[0])|int(b[1])<<8)
		}
		out[r.what] = fmt.Sprintf("%x", b[16:])
	}
	return out
}

// TestNetworkRequests encodes every change of the guest's networks and
// checks two byte for byte. Each request of rxeNetwork and siwNetwork
// was compared with iproute2 6.1's for the same `ip` command line in a
// scratch network namespace (strace -xx -e sendmsg ip ...): the same
// message but for the sequence number.
func TestNetworkRequests(t *testing.T) {
	got := encodeAll(t, &rxeNetwork)
	for what, want := range map[string]string{
		// ip rule add pref 10 iif lo from 198.18.0.1 to 198.18.0.2 lookup 101
		"rule add pref 10": "02202000" + "65000001" + "00000000" + // fib_rule_hdr: AF_INET, dst_len 32, src_len 32, table 101, FR_ACT_TO_TBL
			"08000600" + "0a000000" + // FRA_PRIORITY 10
			"07000300" + "6c6f0000" + // FRA_IIFNAME "lo"
			"08000200" + "c6120001" + // FRA_SRC
			"08000100" + "c6120002", // FRA_DST
		// ip link add veth0 type veth peer name veth1
		"link add veth0 type veth peer name veth1": "00000000" + "00000000" + "00000000" + "00000000" + // ifinfomsg
			"0a000300" + "76657468" + "30000000" + // IFLA_IFNAME "veth0"
			"30001200" + // IFLA_LINKINFO {
			"08000100" + "76657468" + // IFLA_INFO_KIND "veth" (no NUL)
			"24000200" + "20000100" + // IFLA_INFO_DATA { VETH_INFO_PEER {
			"00000000" + "00000000" + "00000000" + "00000000" + // ifinfomsg
			"0a000300" + "76657468" + "31000000", // IFLA_IFNAME "veth1" }}}
	} {
		if got[what] != want {
			t.Errorf("%s:\n got %s\nwant %s", what, got[what], want)
		}
	}
	if n, want := len(got), len(rxeNetwork.steps()); n != want {
		t.Errorf("rxeNetwork's %d changes describe themselves in %d ways, want one each", want, n)
	}
	encodeAll(t, &siwNetwork)

	bed, err := bedNetwork(0, func(mac string) (string, error) {
		return map[string]string{linkMACs[0]: "eth0", mgmtMACs[0]: "eth1"}[mac], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got = encodeAll(t, bed)
	for what, want := range map[string]string{
		"link set dev eth0 name link0": "00000000" + "06000000" + "00000000" + "00000000" + // ifinfomsg: index 6 (eth0)
			"0a000300" + "6c696e6b" + "30000000", // IFLA_IFNAME "link0"
		"link set dev link0 mtu 4200": "00000000" + "08000000" + "00000000" + "00000000" + // ifinfomsg: index 8 (link0)
			"08000400" + "68100000", // IFLA_MTU 4200
	} {
		if got[what] != want {
			t.Errorf("%s:\n got %s\nwant %s", what, got[what], want)
		}
	}
}

// TestNetworkCheck: values that cannot be sent are refused before any
// request.
func TestNetworkCheck(t *testing.T) {
	a := netip.MustParseAddr("198.18.0.1")
	for name, n := range map[string]network{
		"veth without peer":    {Veths: []veth{{Name: "veth0"}}},
		"link without name":    {Links: []link{{Up: true}}},
		"address without dev":  {Addrs: []addr{{Prefix: prefix("198.18.0.1/24")}}},
		"nodad on IPv4":        {Addrs: []addr{{Dev: "veth0", Prefix: prefix("198.18.0.1/24"), NoDAD: true}}},
		"rule family mismatch": {Rules: []rule{{IPv6: true, Pref: 1, To: host("198.18.0.1"), Table: 101}}},
		"rule add no table":    {Rules: []rule{{Pref: 1}}},
		"route mixed families": {Routes: []route{{Dst: host("fd00::1"), Dev: "veth0", Src: a, Table: 101}}},
		"route without table":  {Routes: []route{{Dst: host("198.18.0.2"), Dev: "veth0", Src: a}}},
		"neigh two MACs":       {Neighs: []neigh{{Addr: a, Dev: "veth0", MAC: "02:00:00:00:00:01", MACOf: "veth1"}}},
		"neigh bad MAC":        {Neighs: []neigh{{Addr: a, Dev: "veth0", MAC: "02:00:00:00:00"}}},
	} {
		if err := n.check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	n := network{Routes: []route{{Dst: host("198.18.0.2"), Dev: "nosuch", Src: a, Table: 101}}}
	if _, err := n.steps()[0](testLookups); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("route on a missing device: err = %v", err)
	}
}

func TestListenersIn(t *testing.T) {
	entry := func(state uint8, ap string) rdmanl.ResAttrs {
		var e rdmanl.ResAttrs
		e.State, e.PID, e.SrcAddr = state, 42, netip.MustParseAddrPort(ap)
		e.SetAttr(rdmanl.AttrState, rdmanl.AttrPID, rdmanl.AttrSrcAddr)
		return e
	}
	noPID := entry(rdmaCMListen, "198.18.0.1:7402")
	noPID = rdmanl.ResAttrs{State: noPID.State, SrcAddr: noPID.SrcAddr}
	noPID.SetAttr(rdmanl.AttrState, rdmanl.AttrSrcAddr)
	res := rdmanl.Res{Entries: []rdmanl.ResAttrs{
		entry(rdmaCMListen, "198.18.0.1:7400"),
		entry(rdmaCMListen, "[fd00::1]:7401"),
		entry(rdmaCMListen-1, "198.18.0.1:7403"), // not listening
		noPID,
	}}
	var got []string
	for _, l := range listenersIn(res) {
		got = append(got, fmt.Sprintf("%v tid %d", l.Addr, l.TID))
	}
	want := []string{"198.18.0.1:7400 tid 42", "[fd00::1]:7401 tid 42"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listenersIn = %q, want %q", got, want)
	}
}
