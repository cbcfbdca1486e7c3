package rdmacm_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// TestBindIPv6 binds and listens on veth0's IPv6 link-local address: the
// ID lands on rxe0 (whose GID table holds that address as a RoCE v2 GID)
// and reports the address, zone and a kernel-chosen port back.
func TestBindIPv6(t *testing.T) {
	needDevices(t)
	a := linkLocal(t, "veth0")
	id := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := id.Bind(netip.AddrPortFrom(a, 0)); err != nil {
		t.Fatalf("Bind([%v]:0): %v", a, err)
	}
	if d, ok := id.Device(); !ok || d.Name != "rxe0" {
		t.Errorf("bound to %q (%v), want rxe0", d.Name, ok)
	}
	if err := id.Listen(0); err != nil {
		t.Fatal(err)
	}
	got, err := id.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr().WithZone("") != a.WithZone("") || got.Port() == 0 {
		t.Errorf("LocalAddr = %v, want [%v] with a port", got, a)
	}
	t.Logf("listening on %v", got)
}

// linkLocal returns the interface's IPv6 link-local address, with the
// interface as zone, once duplicate address detection has finished (a
// tentative address cannot be bound).
func linkLocal(t testing.TB, ifname string) netip.Addr {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if a, ok := settledLinkLocal(t, ifi); ok {
			return a.WithZone(ifname)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no settled IPv6 link-local address after 10 s", ifname)
		}
	}
}

// settledLinkLocal reads /proc/net/if_inet6: address, index, prefix
// length, scope, flags (0x40: tentative), name.
func settledLinkLocal(t testing.TB, ifi *net.Interface) (netip.Addr, bool) {
	b, err := os.ReadFile("/proc/net/if_inet6")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[5] != ifi.Name || f[3] != "20" { // 0x20: link scope
			continue
		}
		var flags int
		if _, err := fmt.Sscanf(f[4], "%x", &flags); err != nil || flags&0x40 != 0 {
			continue
		}
		var raw [16]byte
		for i := range raw {
			var v int
			if _, err := fmt.Sscanf(f[0][2*i:2*i+2], "%02x", &v); err != nil {
				t.Fatalf("if_inet6 line %q: %v", line, err)
			}
			raw[i] = byte(v)
		}
		return netip.AddrFrom16(raw), true
	}
	return netip.Addr{}, false
}

// The VM's IPv6 addresses: veth0 (rxe0) and veth1 (rxe1).
var (
	serverIP6 = netip.MustParseAddr("fd00:198:18::1")
	clientIP6 = netip.MustParseAddr("fd00:198:18::2")
)

// TestRCConnectIPv6 connects over IPv6 from rxe1 to rxe0 and sends a
// message each way: address and route resolution, the CM exchange and
// the QP's RoCE v2 path all on IPv6 GIDs.
func TestRCConnectIPv6(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	l, addr := listenOn(t, rdmacm.PortSpaceTCP, serverIP6)
	const fromServer, fromClient = "over IPv6 from the server", "over IPv6 from the client"
	gate := newAcceptGate()
	wait := goRun(t, func() error {
		s, mr, msg, err := acceptRequest(ctx, l, 256, 64, gate)
		if err != nil {
			return err
		}
		defer s.Close()
		defer mr.Close()
		if peer, err := s.RemoteAddr(); err != nil || peer.Addr() != clientIP6 {
			return fmt.Errorf("server sees the client at %v (%v), want %v", peer, err, clientIP6)
		}
		if string(msg) != fromClient {
			return fmt.Errorf("server received %q, want %q", msg, fromClient)
		}
		copy(mr.Bytes()[128:], fromServer)
		if err := s.PostSend(2, mr, 128, len(fromServer), uverbs.SendSignaled); err != nil {
			return err
		}
		_, err = s.GetSendComp(ctx)
		return err
	})
	defer wait()
	c := newID(t, nil, rdmacm.PortSpaceTCP)
	if err := c.Resolve(ctx, netip.AddrPortFrom(clientIP6, 0), addr); err != nil {
		t.Fatal(err)
	}
	if d, ok := c.Device(); !ok || d.Name != "rxe1" {
		t.Errorf("client bound to %q (%v), want rxe1", d.Name, ok)
	}
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	mr, buf := regMsgs(t, c, 256)
	if err := c.PostRecv(10, mr, 0, 64); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	gate.wait(t, ctx)
	wc := sendThenReceive(t, ctx, c, mr, 128, fromClient)
	if got := string(buf[:wc.ByteLen]); got != fromServer {
		t.Errorf("client received %q, want %q", got, fromServer)
	}
	wait()
}
