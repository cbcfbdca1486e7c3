package rpma_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestPostAfterPeerDisconnected: the server disconnects, then the
// client posts an RDMA write. The write must fail at once or complete
// with an error; it must never be left waiting. On iWARP the kernel
// runs nothing posted after the connection ended (docs/providers.md,
// "siw"): the post fails once this side saw DISCONNECTED, and before
// that the CQ's wait reports the end (rdmacm.ErrDisconnected). On rxe
// the QP stays in RTS until Disconnect, so the write goes out and fails
// at the peer (retries exhausted). The client either reads its
// ConnClosed first or only knows that the event is queued; either way
// NextEvent reports ConnClosed afterwards.
func TestPostAfterPeerDisconnected(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		name := "event queued"
		if readFirst {
			name = "event read"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a safety net only
			defer cancel()
			sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
			dst := regMR(t, sp, 4096, rpma.UsageWriteDst)
			p := connect(t, ctx, sp, cp, nil, nil, nil, dst.Descriptor())
			rmr, err := rpma.RemoteMRFromDescriptor(p.cpdata)
			if err != nil {
				t.Fatal(err)
			}
			src := regMR(t, cp, 4096, rpma.UsageWriteSrc)
			// One write while connected: the path works.
			if err := p.c.Write(rmr, 0, src, 0, 64, rpma.CompletionAlways, 1); err != nil {
				t.Fatal(err)
			}
			if wc := waitWC(t, ctx, p.c.CQ()); wc.Status != uverbs.WCSuccess {
				t.Fatalf("write while connected: %v", wc.Status)
			}

			if err := p.s.Disconnect(); err != nil {
				t.Fatal(err)
			}
			if readFirst {
				if ev, err := p.c.NextEvent(ctx); err != nil || ev != rpma.ConnClosed {
					t.Fatalf("client NextEvent after the server's Disconnect: %v, %v; want closed", ev, err)
				}
			} else {
				waitReadable(t, ctx, p.c.EventFd())
			}

			werr := p.c.Write(rmr, 0, src, 0, 64, rpma.CompletionAlways, 2)
			var outcome string
			if werr != nil {
				if !errors.Is(werr, rpma.ErrInvalid) {
					t.Errorf("write after the peer disconnected: %v; want ErrInvalid (the QP is in ERR)", werr)
				}
				outcome = "post failed: " + werr.Error()
			} else {
				wc := make([]uverbs.WorkCompletion, 1)
				n, err := p.c.CQ().WaitWC(ctx, wc)
				switch {
				case err != nil && ctx.Err() != nil:
					t.Fatalf("no completion and no error for a write after the peer disconnected: %v", err)
				case err != nil:
					if !errors.Is(err, rdmacm.ErrDisconnected) || !errors.Is(err, rpma.ErrNoCompletion) {
						t.Errorf("WaitWC after the peer disconnected: %v; want ErrNoCompletion and rdmacm.ErrDisconnected", err)
					}
					if !testenv.CurrentFabric().IWARP {
						t.Errorf("WaitWC on %s: %v; only iWARP's waits watch the connection", testenv.CurrentFabric().Name, err)
					}
					outcome = "wait failed: " + err.Error()
				case n != 1:
					t.Fatalf("WaitWC = %d completions", n)
				case wc[0].Status == uverbs.WCSuccess:
					t.Fatalf("write %d after the peer disconnected completed successfully", wc[0].WRID)
				default:
					if wc[0].WRID != 2 {
						t.Errorf("completion for %d, want 2", wc[0].WRID)
					}
					outcome = "completed with " + wc[0].Status.String()
				}
			}
			t.Logf("%s, %s: %s", testenv.CurrentFabric().Name, name, outcome)
			if !readFirst {
				// The event a wait may have taken from the channel is
				// kept for NextEvent.
				if ev, err := p.c.NextEvent(ctx); err != nil || ev != rpma.ConnClosed {
					t.Fatalf("client NextEvent after the write: %v, %v; want closed", ev, err)
				}
			}
			// A second post fails at once on iWARP: DISCONNECTED moved
			// the QP to ERR.
			if testenv.CurrentFabric().IWARP {
				if err := p.c.Write(rmr, 0, src, 0, 64, rpma.CompletionAlways, 3); err == nil {
					t.Errorf("write on iWARP after ConnClosed was taken")
				}
			}
			if err := p.c.Disconnect(); err != nil {
				t.Errorf("client Disconnect: %v", err)
			}
		})
	}
}

// waitReadable waits until fd is readable, polling in short steps so
// that ctx bounds the wait.
func waitReadable(t testing.TB, ctx context.Context, fd int) {
	t.Helper()
	for ctx.Err() == nil {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 100)
		if err != nil && err != unix.EINTR {
			t.Fatalf("poll: %v", err)
		}
		if n == 1 {
			return
		}
	}
	t.Fatalf("fd %d not readable: %v", fd, ctx.Err())
}
