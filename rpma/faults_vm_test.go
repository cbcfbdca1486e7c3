package rpma_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The peer process of the fault tests: the test binary run again with
// helperEnv set (init, below, runs it before the tests). "serve"
// listens on serverAddr, prints "listening PORT" and accepts one
// connection; "connect" connects to the port in helperPortEnv. Either
// way it hands the other side the descriptor of a region it may write
// (private data), prints "established" and sleeps until killed.
const (
	helperEnv     = "RPMA_TEST_HELPER"
	helperPortEnv = "RPMA_TEST_HELPER_PORT"
	peerMRSize    = 1 << 16
)

func init() {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := peerMain(mode); err != nil {
			fmt.Fprintln(os.Stderr, "rpma helper:", err)
			os.Exit(1)
		}
		os.Exit(3)
	}
}

func peerMain(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	side := rpma.Local
	if mode == "connect" {
		side = rpma.Remote
	}
	dc, err := rpma.DeviceContext(ctx, serverAddr, side)
	if err != nil {
		return err
	}
	p, err := rpma.NewPeer(dc)
	if err != nil {
		return err
	}
	mr, err := p.RegMR(make([]byte, peerMRSize), rpma.UsageWriteDst|rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	var req *rpma.ConnReq
	switch mode {
	case "serve":
		ep, err := p.Listen(ctx, serverAddr, "0")
		if err != nil {
			return err
		}
		fmt.Println("listening", ep.Addr().Port())
		if req, err = ep.NextConnReq(ctx, nil); err != nil {
			return err
		}
	case "connect":
		if req, err = p.NewConnReq(ctx, serverAddr, os.Getenv(helperPortEnv), nil); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	c, err := req.Connect(mr.Descriptor())
	if err != nil {
		return err
	}
	if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		return fmt.Errorf("first event %v, %v", ev, err)
	}
	fmt.Println("established", hex.EncodeToString(c.PrivateData()))
	time.Sleep(time.Minute) // until killed
	return nil
}

// peerProc is a running peer process.
type peerProc struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr bytes.Buffer
	done   bool
}

func startPeer(t testing.TB, mode string, env ...string) *peerProc {
	t.Helper()
	p := &peerProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	return p
}

// expect reads the peer's next line and fails unless it starts with
// prefix; it returns the rest.
func (p *peerProc) expect(t testing.TB, prefix string) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if !strings.HasPrefix(line, prefix) {
		p.kill()
		t.Fatalf("peer said %q (%v), want %q; stderr: %s", line, err, prefix, p.stderr.String())
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

func (p *peerProc) kill() {
	if p.done {
		return
	}
	p.done = true
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// TestFaultPeerKilled kills the peer process of an rpma connection in
// the middle of a stream of RDMA writes, with the survivor as client
// and as server. The survivor's CQ gets an error completion (the writes
// still queued are flushed) and its NextEvent reports ConnClosed (the
// dying process's kernel sends a DREQ, or on iWARP resets the TCP
// connection); Disconnect and Close succeed. On iWARP a write posted
// after the kernel ended the connection never completes (siw flushes
// only what the queue held when the QP stopped, docs/providers.md), so
// there the stream may instead end with the CQ's wait reporting the
// disconnect, or with a post refused once DISCONNECTED moved the QP to
// ERR. Every wait is bounded, so nothing blocks for ever.
func TestFaultPeerKilled(t *testing.T) {
	iwarp := testenv.CurrentFabric().IWARP
	for _, role := range []string{"client", "server"} {
		t.Run("survivor "+role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var peer *peerProc
			var c *rpma.Conn
			var desc []byte
			var p *rpma.Peer
			if role == "client" {
				cp := newPeer(t, ctx, rpma.Remote)
				p = cp
				peer = startPeer(t, "serve")
				port := peer.expect(t, "listening ")
				req, err := cp.NewConnReq(ctx, serverAddr, port, nil)
				if err != nil {
					t.Fatal(err)
				}
				if c, err = req.Connect(nil); err != nil {
					t.Fatal(err)
				}
				if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
					t.Fatalf("first event %v, %v", ev, err)
				}
				peer.expect(t, "established")
				desc = c.PrivateData()
			} else {
				sp := newPeer(t, ctx, rpma.Local)
				p = sp
				ep, err := sp.Listen(ctx, serverAddr, "0")
				if err != nil {
					t.Fatal(err)
				}
				defer ep.Close()
				peer = startPeer(t, "connect", helperPortEnv+"="+itoa(int(ep.Addr().Port())))
				req, err := ep.NextConnReq(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				desc = req.PrivateData()
				if c, err = req.Connect(nil); err != nil {
					t.Fatal(err)
				}
				if ev, err := c.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
					t.Fatalf("first event %v, %v", ev, err)
				}
				peer.expect(t, "established")
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					c.Close()
				}
			})
			rmr, err := rpma.RemoteMRFromDescriptor(desc)
			if err != nil {
				t.Fatal(err)
			}
			src := regMR(t, p, 4096, rpma.UsageWriteSrc)

			const window, before = 8, 64
			posted, done := 0, 0
			post := func() error {
				off := (posted % (peerMRSize / 4096)) * 4096
				if err := c.Write(rmr, off, src, 0, 4096, rpma.CompletionAlways, uint64(posted)); err != nil {
					return fmt.Errorf("write %d: %w", posted, err)
				}
				posted++
				return nil
			}
			for posted < window {
				if err := post(); err != nil {
					t.Fatal(err)
				}
			}
			var killed time.Time
			var first uverbs.WorkCompletion
			var ended error // iWARP: the wait's disconnect, or a refused post, ended the stream
			// iWARP's end of the stream: the error says the connection
			// ended, and it comes after the kill.
			iwarpEnd := func(err error, wantIs error) bool {
				if !iwarp || killed.IsZero() || !errors.Is(err, wantIs) {
					return false
				}
				ended = err
				return true
			}
			wc := make([]uverbs.WorkCompletion, window)
			wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
			defer wcancel()
		stream:
			for {
				n, err := c.CQ().GetWC(wc[:1]) // one at a time: none is lost at the first error
				if err != nil && !isNoCompletion(err) {
					t.Fatalf("GetWC: %v", err)
				}
				for _, w := range wc[:n] {
					done++
					if w.Status != uverbs.WCSuccess {
						if killed.IsZero() {
							t.Fatalf("write %d to a live peer: %v", w.WRID, w.Status)
						}
						first = w
						break stream
					}
					if done == before {
						peer.kill()
						killed = time.Now()
					}
					if err := post(); err != nil {
						if iwarpEnd(err, rpma.ErrInvalid) {
							break stream
						}
						t.Fatal(err)
					}
				}
				if n == 0 {
					if err := c.CQ().Wait(wctx); err != nil {
						if iwarpEnd(err, rdmacm.ErrDisconnected) {
							break stream
						}
						t.Fatalf("no error completion %v after the peer was killed (%d writes done): %v", time.Since(killed), done, err)
					}
				}
			}
			took := time.Since(killed)
			if ended == nil {
				if err := rpma.CompletionErr(&first); err == nil {
					t.Fatalf("completion %+v has no error", first)
				}
			}
			ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
			defer ecancel()
			ev, err := c.NextEvent(ectx)
			how := fmt.Sprintf("first error completion %q", first.Status)
			if ended != nil {
				how = fmt.Sprintf("no error completion, then %v", ended)
			}
			t.Logf("%s %s: survivor %s: %s, %v after the kill; NextEvent %v, %v",
				os.Getenv("PURERDMA_VM"), testenv.CurrentFabric().Name, role, how, took.Round(time.Millisecond), ev, err)
			if err != nil || ev != rpma.ConnClosed {
				t.Errorf("NextEvent after the kill: %v, %v; want %v", ev, err, rpma.ConnClosed)
			}
			switch {
			case ended != nil:
			case iwarp && (first.Status == uverbs.WCWRFlushErr || first.Status == uverbs.WCLocQPOpErr):
				// siw ends the write it was sending when the TCP
				// connection was reset with a local QP operation error
				// and flushes what the QP held.
			case !iwarp && (first.Status == uverbs.WCRetryExcErr || first.Status == uverbs.WCRemAccessErr):
				// The two that docs/reliability.md describes: nothing
				// answers any more, or the peer's region went first.
			default:
				t.Errorf("first error completion %v on %s", first.Status, testenv.CurrentFabric().Name)
			}
			// Once the survivor saw ConnClosed, a post fails at once on
			// iWARP (DISCONNECTED moved the QP to ERR).
			if iwarp {
				if err := post(); !errors.Is(err, rpma.ErrInvalid) {
					t.Errorf("post after ConnClosed: %v; want ErrInvalid", err)
				}
			}
			if err := c.Disconnect(); err != nil {
				t.Errorf("Disconnect: %v", err)
			}
			// The writes still queued complete, flushed (on iWARP, the
			// one siw was sending may end as the first did). On iWARP those
			// posted after the kernel stopped the QP never complete: the
			// wait says the connection ended once the CQ is empty.
			for done < posted {
				n, err := c.CQ().GetWC(wc)
				if err != nil && !isNoCompletion(err) {
					t.Fatal(err)
				}
				for _, w := range wc[:n] {
					done++
					if w.Status != uverbs.WCWRFlushErr && !(iwarp && w.Status == uverbs.WCLocQPOpErr) {
						t.Errorf("write %d after the first error: %v, want flushed", w.WRID, w.Status)
					}
				}
				if n == 0 {
					if err := c.CQ().Wait(wctx); err != nil {
						if iwarp && errors.Is(err, rdmacm.ErrDisconnected) {
							t.Logf("%d of %d writes completed; the rest were posted after the kernel stopped the QP", done, posted)
							break
						}
						t.Fatalf("%d of %d writes completed: %v", done, posted, err)
					}
				}
			}
			closed = true
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}
