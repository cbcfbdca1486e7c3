package rdmacm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/testutils/toolrun"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The interop tests talk to librdmacm's example programs rdma_server and
// rdma_client (rdma-core's rdmacm-utils): each side sends the other one
// 16-byte message over a connection set up by rdma_create_ep, and the
// client disconnects.

func lookTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if testenv.RequireDevice() {
			t.Fatalf("%s (rdmacm-utils) is not installed: %v", name, err)
		}
		t.Skipf("%s (rdmacm-utils) is not installed", name)
	}
	return path
}

// startTool runs a C tool for at most 20 s, and not beyond t's context;
// wait returns its error and output.
func startTool(t testing.TB, path string, args ...string) (wait func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := false
	wait = func() (string, error) {
		if done {
			return out.String(), nil
		}
		done = true
		err := cmd.Wait()
		cancel()
		return out.String(), err
	}
	t.Cleanup(func() { wait() })
	return wait
}

// interopAttempts runs an interop test through toolrun.Attempts: siw's
// accept race (docs/testing.md) can strand the connecting side's first
// message at the accepting side, and a stranded run is run again on a
// new port.
func interopAttempts(t *testing.T, body func(t *toolrun.Attempt)) {
	t.Helper()
	toolrun.Attempts(t, t.Name(), time.Minute, testenv.CurrentFabric().IWARP, body)
}

// TestInteropCServer connects a Go client to librdmacm's rdma_server.
func TestInteropCServer(t *testing.T) {
	needDevices(t)
	path := lookTool(t, "rdma_server")
	port := 17470
	interopAttempts(t, func(a *toolrun.Attempt) {
		port++
		interopCServer(a, path, port)
	})
}

func interopCServer(t *toolrun.Attempt, path string, port int) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // the watchdog's too
	t.Cleanup(cancel)
	wait := startTool(t, path, "-s", serverIP.String(), "-p", strconv.Itoa(port))
	t.Watch(port)
	addr := netip.AddrPortFrom(serverIP, uint16(port))

	// The server may not listen yet: retry while the port rejects.
	var c *rdmacm.ID
	var mr *uverbs.MR
	buf := make([]byte, 32)
	for deadline := time.Now().Add(5 * time.Second); ; {
		id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		err = id.Resolve(ctx, clientAP, addr)
		if err == nil {
			_, err = id.CreateQP(nil, qpConfig())
		}
		if err == nil {
			mr, err = id.RegMsgs(buf)
		}
		if err == nil {
			err = id.PostRecv(1, mr, 0, 16)
		}
		if err == nil {
			_, err = id.ConnectContext(ctx, nil)
		}
		if err == nil {
			c = id
			break
		}
		if mr != nil {
			mr.Close()
			mr = nil
		}
		id.Close()
		var ee *rdmacm.EventError
		// Nobody listening yet: a REJECTED event with INVALID_SERVICE_ID
		// on RoCE; on iWARP the TCP connect is refused in Connect.
		notYet := errors.As(err, &ee) && ee.Event.RejectReason() == rdmacm.RejectInvalidServiceID ||
			testenv.CurrentFabric().IWARP && errors.Is(err, syscall.ECONNREFUSED)
		if !notYet || time.Now().After(deadline) {
			out, _ := wait()
			t.Fatalf("connect to rdma_server: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	defer mr.Close()
	wc := sendThenReceive(t, ctx, c, mr, 16, "go client hello!")
	if wc.ByteLen != 16 {
		t.Errorf("received %d bytes from rdma_server, want 16", wc.ByteLen)
	}
	ev, err := c.Channel().Next(ctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Errorf("after the exchange: %v, %v; want DISCONNECTED", ev, err)
	}
	if err := c.Disconnect(); err != nil {
		t.Error(err)
	}
	if out, err := wait(); err != nil {
		t.Errorf("rdma_server: %v\n%s", err, out)
	}
}

// TestInteropCClient serves librdmacm's rdma_client from Go.
func TestInteropCClient(t *testing.T) {
	needDevices(t)
	path := lookTool(t, "rdma_client")
	interopAttempts(t, func(a *toolrun.Attempt) { interopCClient(a, path) })
}

func interopCClient(t *toolrun.Attempt, path string) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // the watchdog's too
	t.Cleanup(cancel)
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	t.Watch(int(addr.Port()))
	wait := startTool(t, path, "-s", addr.Addr().String(), "-p", strconv.Itoa(int(addr.Port())))
	err := func() error {
		s, mr, msg, err := acceptRequest(ctx, l, 32, 16, nil) // rdma_client waits for no gate
		if err != nil {
			return err
		}
		defer s.Close()
		defer mr.Close()
		if len(msg) != 16 {
			return fmt.Errorf("received %d bytes from rdma_client, want 16", len(msg))
		}
		n := copy(mr.Bytes()[16:], "go server hello!")
		if err := s.PostSend(2, mr, 16, n, uverbs.SendSignaled); err != nil {
			return err
		}
		if _, err := s.GetSendComp(ctx); err != nil {
			return err
		}
		ev, err := s.Channel().Next(ctx)
		if err != nil {
			return err
		}
		if ev.Type != rdmacm.EventDisconnected {
			return fmt.Errorf("after the exchange: %v, want DISCONNECTED", ev)
		}
		return s.Disconnect()
	}()
	out, werr := wait()
	if err != nil {
		t.Fatalf("%v\nrdma_client: %s", err, out)
	}
	if werr != nil {
		t.Errorf("rdma_client: %v\n%s", werr, out)
	}
}
