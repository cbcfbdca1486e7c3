package rpma_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rpma"
)

// soakConnections is how many connections the soak makes and breaks.
const soakConnections = 1000

// soakRSSGrowth bounds the RSS growth over the soak (docs/reliability.md).
const soakRSSGrowth = 4 << 20

// TestSoakConnect connects and disconnects an rpma connection
// soakConnections times (make soak: PURERDMA_SOAK=1) between two peers
// through one endpoint: each cycle the client connects, writes 8 bytes
// into the server's region (its descriptor is the server's private
// data) and waits for the completion, disconnects, and both sides see
// ConnClosed and close. Afterwards the process has the descriptors and
// goroutines it had, the kernel's object counts (rdma res) are back at
// the baseline, and RSS grew by less than soakRSSGrowth. The baseline
// is taken after 20 warm-up cycles.
func TestSoakConnect(t *testing.T) {
	testutils.Soak(t, 2)
	ctx := context.Background()
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, rpma.UsageWriteDst)
	src := regMR(t, cp, 4096, rpma.UsageWriteSrc)
	copy(src.Bytes(), "soaked!!")
	ep, err := sp.Listen(ctx, serverAddr, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	port := itoa(int(ep.Addr().Port()))
	noEstablished := 0 // server connections closed before ESTABLISHED

	cycle := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srvDone := make(chan error, 1)
		go func() {
			srvDone <- func() error {
				req, err := ep.NextConnReq(ctx, nil)
				if err != nil {
					return err
				}
				c, err := req.Connect(smr.Descriptor())
				if err != nil {
					return err
				}
				defer c.Close()
				for established := false; ; established = true {
					ev, err := c.NextEvent(ctx)
					if err != nil {
						return fmt.Errorf("server: %w", err)
					}
					switch {
					case ev == rpma.ConnClosed:
						if !established {
							noEstablished++
						}
						return nil
					case ev != rpma.ConnEstablished || established:
						return fmt.Errorf("server: %v", ev)
					}
				}
			}()
		}()
		err := func() error {
			req, err := cp.NewConnReq(ctx, serverAddr, port, nil)
			if err != nil {
				return err
			}
			c, err := req.Connect(nil)
			if err != nil {
				return err
			}
			defer c.Close()
			if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
				return fmt.Errorf("client: %v, %v", ev, err)
			}
			rmr, err := rpma.RemoteMRFromDescriptor(c.PrivateData())
			if err != nil {
				return err
			}
			if err := c.Write(rmr, 0, src, 0, 8, rpma.CompletionAlways, 1); err != nil {
				return err
			}
			wc := waitWC(t, ctx, c.CQ())
			if err := rpma.CompletionErr(&wc); err != nil {
				return err
			}
			if err := c.Disconnect(); err != nil {
				return err
			}
			if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnClosed {
				return fmt.Errorf("client after Disconnect: %v, %v", ev, err)
			}
			return nil
		}()
		if serr := <-srvDone; err == nil {
			err = serr
		}
		return err
	}
	run := func(n int) time.Duration {
		start := time.Now()
		for i := range n {
			if err := cycle(); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
		return time.Since(start)
	}
	run(20)
	base := testutils.MeasureUsage(t)
	t.Logf("%s: before: %v", os.Getenv("PURERDMA_VM"), base)
	d := run(soakConnections)
	t.Logf("%d connections in %v (%v each); %d closed on the server before ESTABLISHED", soakConnections, d.Round(time.Millisecond), (d / soakConnections).Round(time.Microsecond), noEstablished)
	after := testutils.MeasureUsage(t)
	t.Logf("after: %v", after)
	testutils.CheckUsage(t, "after the soak", base, after, soakRSSGrowth)
	if string(smr.Bytes()[:8]) != "soaked!!" {
		t.Errorf("server region %q", smr.Bytes()[:8])
	}
}
