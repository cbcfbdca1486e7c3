package rpma_test

import (
	"context"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The test VM's addresses on the fabric under test
// (testenv.CurrentFabric): servers listen on device 0's (rxe0 or siw0),
// clients reach it through device 1.
var serverAddr = testenv.Server().String()

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newPeer opens the device of addr on side and makes a peer on it; both
// close with the test.
func newPeer(t testing.TB, ctx context.Context, side rpma.Side) *rpma.Peer {
	t.Helper()
	testenv.NeedFabric(t)
	dc, err := rpma.DeviceContext(ctx, serverAddr, side)
	if err != nil {
		t.Fatalf("DeviceContext(%s, %v): %v", serverAddr, side, err)
	}
	t.Cleanup(func() {
		if err := dc.Close(); err != nil {
			t.Errorf("device context Close: %v", err)
		}
	})
	p, err := rpma.NewPeer(dc)
	if err != nil {
		t.Fatalf("NewPeer: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("peer Close: %v", err)
		}
	})
	return p
}

func regMR(t testing.TB, p *rpma.Peer, n int, u rpma.Usage) *rpma.MR {
	t.Helper()
	mr, err := p.RegMR(make([]byte, n), u)
	if err != nil {
		t.Fatalf("RegMR(%d, %v): %v", n, u, err)
	}
	t.Cleanup(func() {
		if err := mr.Close(); err != nil {
			t.Errorf("MR Close: %v", err)
		}
	})
	return mr
}

// pair is a connected client and server.
type pair struct {
	sp, cp *rpma.Peer
	s, c   *rpma.Conn
	// cpdata is what the client received as private data.
	cpdata []byte
}

// connect listens on the server peer, connects the client with
// clientData as private data, and accepts with serverData; both sides
// see ESTABLISHED. The connections close with the test, disconnected.
func connect(t testing.TB, ctx context.Context, sp, cp *rpma.Peer, scfg, ccfg *rpma.ConnCfg, clientData, serverData []byte) *pair {
	t.Helper()
	ep, err := sp.Listen(ctx, serverAddr, "0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer ep.Close()
	port := ep.Addr().Port()
	type res struct {
		c   *rpma.Conn
		err error
	}
	done := make(chan res, 1)
	go func() {
		req, err := ep.NextConnReq(ctx, scfg)
		if err != nil {
			done <- res{nil, err}
			return
		}
		if got := req.PrivateData(); len(clientData) > 0 && string(got[:len(clientData)]) != string(clientData) {
			t.Errorf("server: request private data %q, want prefix %q", got, clientData)
		}
		c, err := req.Connect(serverData)
		if err != nil {
			done <- res{nil, err}
			return
		}
		ev, err := c.NextEvent(ctx)
		if err == nil && ev != rpma.ConnEstablished {
			t.Errorf("server: first event %v, want established", ev)
		}
		done <- res{c, err}
	}()
	req, err := cp.NewConnReq(ctx, serverAddr, itoa(int(port)), ccfg)
	if err != nil {
		t.Fatalf("NewConnReq: %v", err)
	}
	c, err := req.Connect(clientData)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ev, err := c.NextEvent(ctx)
	if err != nil || ev != rpma.ConnEstablished {
		t.Fatalf("client NextEvent = %v, %v; want established", ev, err)
	}
	r := <-done
	if r.err != nil {
		c.Close()
		t.Fatalf("server: %v", r.err)
	}
	p := &pair{sp: sp, cp: cp, s: r.c, c: c, cpdata: c.PrivateData()}
	t.Cleanup(func() {
		c.Disconnect()
		for _, x := range []*rpma.Conn{c, r.c} {
			if err := x.Close(); err != nil {
				t.Errorf("conn Close: %v", err)
			}
		}
	})
	return p
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// waitWC waits on cq for one completion and returns it.
func waitWC(t testing.TB, ctx context.Context, cq *rpma.CQ) uverbs.WorkCompletion {
	t.Helper()
	wc := make([]uverbs.WorkCompletion, 1)
	for {
		n, err := cq.GetWC(wc)
		if n == 1 {
			return wc[0]
		}
		if err != nil && !isNoCompletion(err) {
			t.Fatalf("GetWC: %v", err)
		}
		if err := cq.Wait(ctx); err != nil {
			t.Fatalf("CQ Wait: %v", err)
		}
	}
}
