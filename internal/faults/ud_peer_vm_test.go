//go:build purerdma_peer

package faults

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// UD under loss (docs/reliability.md "Network faults between two
// hosts"): datagrams may be lost, but what is delivered is never
// corrupt and never delivered twice. The client on the first VM sends
// numbered datagrams to the server on the peer, which checks each and
// echoes it; the client checks each echo. Loss applies in both
// directions, so an echo needs both datagrams through.

// udServeRole makes the test binary the peer's UD server.
const udServeRole = "serve-ud"

const (
	udPort   = 7512
	udGRH    = 40   // the GRH space in front of every received datagram
	udSize   = 1024 // a datagram's payload
	udSlots  = 64   // receives posted on each side
	udCount  = 400  // datagrams the client sends
	udQuiet  = 2 * time.Second
	udServer = 10 * time.Second // the server ends after this long without a datagram
)

var udQP = uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: udSlots, MaxSendSGE: 1, MaxRecvSGE: 1}}

// serveUD is the peer's UD server: for each client, every datagram is
// checked (length, content, not seen before) and echoed to its sender.
func serveUD() error {
	local, err := netip.ParseAddr(os.Getenv("RXEVM_LOCAL_ADDR"))
	if err != nil {
		return err
	}
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceUDP)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Bind(netip.AddrPortFrom(local, udPort)); err != nil {
		return err
	}
	if err := l.Listen(0); err != nil {
		return err
	}
	fmt.Println("listening")
	for n := 0; ; n++ {
		ev, err := l.GetRequest(context.Background())
		if err != nil {
			return fmt.Errorf("UD: get request: %w", err)
		}
		go func() {
			if err := serveUDClient(ev); err != nil {
				fmt.Fprintf(os.Stderr, "UD client %d: %v\n", n, err)
			}
		}()
	}
}

func serveUDClient(ev *rdmacm.Event) error {
	s := ev.ID
	defer s.Close()
	if len(ev.PrivateData) < 4 {
		return errors.New("no case number in the private data")
	}
	seq := binary.LittleEndian.Uint32(ev.PrivateData)
	if _, err := s.CreateQP(nil, udQP); err != nil {
		return err
	}
	slot := udGRH + udSize
	buf := make([]byte, (udSlots+1)*slot)
	mr, err := s.RegMsgs(buf)
	if err != nil {
		return err
	}
	defer mr.Close()
	for i := range udSlots {
		if err := s.PostRecv(uint64(i), mr, i*slot, slot); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveLimit)
	defer cancel()
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		return err
	}
	seen := map[uint32]bool{}
	want := make([]byte, udSize)
	var ah *uverbs.AH
	defer func() {
		if ah != nil {
			ah.Close()
		}
	}()
	echo := udSlots * slot // the send buffer
	for {
		rctx, rcancel := context.WithTimeout(ctx, udServer)
		wc, err := s.GetRecvComp(rctx)
		rcancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "UD case %d: %d datagrams received; done: %v\n", seq, len(seen), err)
			return nil
		}
		if err := wcErr("UD receive", wc, nil); err != nil {
			return err
		}
		i := int(wc.WRID)
		if int(wc.ByteLen) != slot {
			fmt.Fprintf(os.Stderr, "%s: UD case %d: a datagram of %d bytes, want %d\n", badData, seq, wc.ByteLen, slot)
			return errors.New("bad datagram")
		}
		got := buf[i*slot+udGRH : (i+1)*slot]
		n := binary.LittleEndian.Uint32(got[4:])
		pattern(want, seq, int(n))
		switch {
		case !bytes.Equal(got, want):
			fmt.Fprintf(os.Stderr, "%s: UD case %d: a %d-byte datagram numbered %d differs at byte %d\n", badData, seq, wc.ByteLen, n, firstDiff(got, want))
			return errors.New("bad datagram")
		case seen[n]:
			fmt.Fprintf(os.Stderr, "%s: UD case %d: datagram %d delivered twice\n", badData, seq, n)
			return errors.New("duplicate datagram")
		}
		seen[n] = true
		if ah == nil {
			if ah, err = s.PD().CreateAHFromWC(s.Port(), &wc, buf[i*slot:i*slot+udGRH]); err != nil {
				return err
			}
		}
		copy(buf[echo:echo+udSize], got)
		if err := s.PostUDSend(uint64(n), mr, echo, udSize, uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: wc.SrcQP}); err != nil {
			return err
		}
		if wc, err := s.GetSendComp(ctx); err != nil || wc.Status != uverbs.WCSuccess {
			return fmt.Errorf("UD echo %d: %v %v", n, wc.Status, err)
		}
		if err := s.PostRecv(uint64(i), mr, i*slot, slot); err != nil {
			return err
		}
	}
}

// TestPeerUDLoss sends numbered datagrams under netem loss on both ends
// of the link: some are lost, none of what arrives (at the server, or
// back at the client) is corrupt or a second copy.
func TestPeerUDLoss(t *testing.T) {
	p := testenv.PeerHost(t)
	if p == nil {
		return
	}
	server := p.StartEnv(t, []string{roleEnv + "=" + udServeRole}, os.Args[0])
	server.WaitOutput(t, "listening")
	for c, loss := range []string{"loss 1%", "loss 5%"} {
		t.Run(strings.ReplaceAll(loss, " ", "-"), func(t *testing.T) {
			p.PortsActive(t)
			delivered := udRun(t, p, uint32(1000+c), loss)
			t.Logf("UD under %s: %d of %d datagrams echoed, each checked", loss, delivered, udCount)
			if delivered == 0 {
				t.Errorf("UD under %s: no datagram came back of %d", loss, udCount)
			}
			if _, errOut := server.Output(); strings.Contains(errOut, badData) {
				t.Fatalf("the server on the peer saw bad data:\n%s", errOut)
			}
		})
	}
	_, errOut := server.Output()
	t.Logf("the server's reports:\n%s", errOut)
}

// udRun connects to the peer's UD server, puts loss on the link, sends
// udCount datagrams and returns how many echoes came back, every one
// checked.
func udRun(t *testing.T, p *testenv.Peer, seq uint32, loss string) int {
	ctx, cancel := context.WithTimeout(context.Background(), caseLimit)
	defer cancel()
	c, err := rdmacm.CreateID(nil, rdmacm.PortSpaceUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dst := netip.AddrPortFrom(p.Addr, udPort)
	if err := c.Resolve(ctx, netip.AddrPortFrom(p.LocalAddr, 0), dst); err != nil {
		t.Fatalf("resolve %v: %v", dst, err)
	}
	if _, err := c.CreateQP(nil, udQP); err != nil {
		t.Fatal(err)
	}
	slot := udGRH + udSize
	buf := make([]byte, (udSlots+1)*slot)
	mr, err := c.RegMsgs(buf)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	for i := range udSlots {
		if err := c.PostRecv(uint64(i), mr, i*slot, slot); err != nil {
			t.Fatal(err)
		}
	}
	pd := make([]byte, 4)
	binary.LittleEndian.PutUint32(pd, seq)
	ev, err := c.ConnectContext(ctx, &rdmacm.ConnParam{PrivateData: pd})
	if err != nil || ev.UD == nil {
		t.Fatalf("UD connect to %v: %v (%v)", dst, err, ev)
	}
	ah, err := ev.UD.CreateAH(c.PD())
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	remove := p.LinkFault(t, loss)
	defer remove()

	seen := map[uint32]bool{}
	want := make([]byte, udSize)
	send := udSlots * slot
	// receive takes the echoes that have come, or waits up to wait for
	// one; it reports whether one came.
	receive := func(wait time.Duration) bool {
		rctx, rcancel := context.WithTimeout(ctx, wait)
		defer rcancel()
		wc, err := c.GetRecvComp(rctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return false
			}
			t.Fatalf("UD receive: %v", err)
		}
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("UD receive: %v", wc.Status)
		}
		i := int(wc.WRID)
		if int(wc.ByteLen) != slot {
			t.Fatalf("%s: an echo of %d bytes, want %d", badData, wc.ByteLen, slot)
		}
		got := buf[i*slot+udGRH : (i+1)*slot]
		n := binary.LittleEndian.Uint32(got[4:])
		pattern(want, seq, int(n))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: an echo of %d bytes numbered %d differs from datagram %d at byte %d", badData, wc.ByteLen, n, n, firstDiff(got, want))
		}
		if seen[n] || int(n) >= udCount {
			t.Fatalf("%s: echo %d came twice, or was never sent", badData, n)
		}
		seen[n] = true
		if err := c.PostRecv(uint64(i), mr, i*slot, slot); err != nil {
			t.Fatal(err)
		}
		return true
	}
	for n := range udCount {
		pattern(buf[send:send+udSize], seq, n)
		if err := c.PostUDSend(uint64(n), mr, send, udSize, uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: ev.UD.QPNum}); err != nil {
			t.Fatalf("UD send %d: %v", n, err)
		}
		if wc, err := c.GetSendComp(ctx); err != nil || wc.Status != uverbs.WCSuccess {
			t.Fatalf("UD send %d: %v %v", n, wc.Status, err)
		}
		// Take the echoes that have come, so the client's receives do
		// not run out (a datagram without a posted receive is dropped,
		// which would count as loss).
		for receive(time.Millisecond) {
		}
	}
	for receive(udQuiet) {
	}
	return len(seen)
}
