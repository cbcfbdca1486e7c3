package vm_test

import (
	"bytes"
	"context"
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

// The tests of the two-VM bed (rxevm -peer; make vmtest-peer runs them
// with 6.1 and 6.12 on either side). Outside the bed they skip, or fail
// under PURERDMA_REQUIRE_DEVICE=1 (testenv.PeerHost).

// rcRoleEnv makes the test binary the peer's half of TestPeerRC
// (TestMain): "serve" or "connect".
const rcRoleEnv = "VMTEST_PEER_RC_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(rcRoleEnv); role != "" {
		if err := rcPeerMain(role); err != nil {
			fmt.Fprintln(os.Stderr, "rc peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPeerCommand runs commands on the peer through rxevm-peer: output
// on both streams, the exit status, a command that is not found, the
// working directory and the environment naming both ends.
func TestPeerCommand(t *testing.T) {
	p := testenv.PeerHost(t)
	if p == nil {
		return
	}
	r := p.Run(t, "sh", "-c", `echo "out $RXEVM_LOCAL_ADDR $RXEVM_PEER_ADDR $RXEVM_LOCAL_DEV $PWD"; echo err >&2; exit 7`)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("out %s %s %s %s\n", p.Addr, p.LocalAddr, p.Dev, wd); r.ExitCode != 7 || r.Stdout != want || r.Stderr != "err\n" {
		t.Errorf("sh on the peer: exit %d, stdout %q, stderr %q; want 7, %q, %q", r.ExitCode, r.Stdout, r.Stderr, want, "err\n")
	}
	r = p.Run(t, "rxevm-no-such-command")
	if r.ExitCode != 127 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("a missing command on the peer: exit %d, stderr %q; want 127 and \"not found\"", r.ExitCode, r.Stderr)
	}
	// Killing rxevm-peer ends the remote command: its sleep would
	// otherwise outlive the test.
	pp := p.Start(t, "sh", "-c", "echo started; exec sleep 600")
	pp.WaitOutput(t, "started")
	pp.Kill()
	if r := pp.Wait(); r.Err == nil {
		t.Errorf("killed rxevm-peer: exit %d, no error", r.ExitCode)
	}
	// The peer ends the sleep when it sees the connection close; the
	// limit only ends a hang.
	for limit := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = p.Run(t, "sh", "-c", "pgrep -x sleep || echo none")
		if r.Stdout == "none\n" {
			break
		}
		if time.Now().After(limit) {
			t.Errorf("the peer's sleep outlived its rxevm-peer by 30 s: pgrep says %q", r.Stdout)
			break
		}
	}
}

// TestPeerRC exchanges messages over RC across the two VMs (and so across
// two kernels), Go on both ends through rdmacm on the data link's rxe
// devices, in both directions: the server on the peer, then on this VM.
// Every byte of every message is checked on arrival.
func TestPeerRC(t *testing.T) {
	p := testenv.PeerHost(t)
	if p == nil {
		return
	}
	t.Logf("this VM %s (%s, %s), peer %s (%s, %s)", os.Getenv("PURERDMA_VM"), p.LocalAddr, p.LocalDev, p.Kernel, p.Addr, p.Dev)
	t.Run("server-on-peer", func(t *testing.T) {
		pp := p.StartEnv(t, []string{rcRoleEnv + "=serve"}, os.Args[0])
		pp.WaitOutput(t, "listening")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rcConnect(ctx, p.LocalAddr, p.Addr, p.LocalDev); err != nil {
			t.Fatal(err)
		}
		if r := pp.Wait(); r.ExitCode != 0 || r.Err != nil || !strings.Contains(r.Stdout, "served") {
			t.Errorf("the peer's server: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Err, r.Stdout, r.Stderr)
		}
	})
	t.Run("server-here", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := rcListen(ctx, p.LocalAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		served := make(chan error, 1)
		go func() { served <- rcServe(ctx, l, p.LocalDev) }()
		pp := p.StartEnv(t, []string{rcRoleEnv + "=connect"}, os.Args[0])
		r := pp.Wait()
		if r.ExitCode != 0 || r.Err != nil || !strings.Contains(r.Stdout, "connected") {
			t.Errorf("the peer's client: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Err, r.Stdout, r.Stderr)
			cancel()
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}

// The exchange: rcCount messages of rcSize bytes (16 packets at the
// link's 4096-byte MTU) from the client, then as many back.
const (
	rcCount = 8
	rcSize  = 64 << 10
	rcPort  = "7490"
)

// rcPattern is message i's content from side (0 client, 1 server).
func rcPattern(side, i int) []byte {
	b := make([]byte, rcSize)
	for j := range b {
		b[j] = byte(side*131 + i*29 + j*7 + j>>9)
	}
	return b
}

var rcQP = &rdmacm.QPOptions{Config: uverbs.QPConfig{
	Cap: uverbs.QPCap{MaxSendWR: rcCount, MaxRecvWR: rcCount, MaxSendSGE: 1, MaxRecvSGE: 1},
}}

// rcPeerMain is the test binary on the peer VM.
func rcPeerMain(role string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	local, err := netip.ParseAddr(os.Getenv("RXEVM_LOCAL_ADDR"))
	if err != nil {
		return err
	}
	dev := os.Getenv("RXEVM_LOCAL_DEV")
	switch role {
	case "serve":
		l, err := rcListen(ctx, local)
		if err != nil {
			return err
		}
		defer l.Close()
		fmt.Println("listening")
		if err := rcServe(ctx, l, dev); err != nil {
			return err
		}
		fmt.Println("served")
	case "connect":
		peer, err := netip.ParseAddr(os.Getenv("RXEVM_PEER_ADDR"))
		if err != nil {
			return err
		}
		if err := rcConnect(ctx, local, peer, dev); err != nil {
			return err
		}
		fmt.Println("connected")
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

func rcListen(ctx context.Context, addr netip.Addr) (*rdmacm.ID, error) {
	ai, err := rdmacm.GetAddrInfo(ctx, addr.String(), rcPort, &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		return nil, err
	}
	l, err := rdmacm.CreateEP(ctx, &ai[0], rcQP)
	if err != nil {
		return nil, err
	}
	if err := l.Listen(0); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// rcEnd is one end's buffers: rcCount receive slots, then one send slot.
type rcEnd struct {
	id  *rdmacm.ID
	buf []byte
	mr  *uverbs.MR
}

func newRCEnd(id *rdmacm.ID) (*rcEnd, error) {
	e := &rcEnd{id: id, buf: make([]byte, (rcCount+1)*rcSize)}
	var err error
	if e.mr, err = id.RegMsgs(e.buf); err != nil {
		return nil, err
	}
	for i := range rcCount {
		if err := id.PostRecv(uint64(i), e.mr, i*rcSize, rcSize); err != nil {
			e.mr.Close()
			return nil, err
		}
	}
	return e, nil
}

// checkDev fails unless the connection runs on the data link's device.
func (e *rcEnd) checkDev(want string) error {
	d, ok := e.id.Device()
	if !ok || d.Name != want {
		return fmt.Errorf("connection on device %q (%v), want %s", d.Name, ok, want)
	}
	return nil
}

func (e *rcEnd) send(ctx context.Context, side int) error {
	for i := range rcCount {
		copy(e.buf[rcCount*rcSize:], rcPattern(side, i))
		if err := e.id.PostSend(uint64(i), e.mr, rcCount*rcSize, rcSize, uverbs.SendSignaled); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
		if wc, err := e.id.GetSendComp(ctx); err != nil || wc.Status != uverbs.WCSuccess {
			return fmt.Errorf("send %d: completion %v: %v", i, wc.Status, err)
		}
	}
	return nil
}

func (e *rcEnd) recv(ctx context.Context, side int) error {
	for i := range rcCount {
		wc, err := e.id.GetRecvComp(ctx)
		if err != nil || wc.Status != uverbs.WCSuccess {
			return fmt.Errorf("receive %d: completion %v: %v", i, wc.Status, err)
		}
		if wc.WRID != uint64(i) || wc.ByteLen != rcSize {
			return fmt.Errorf("receive %d: work request %d of %d bytes, want %d of %d", i, wc.WRID, wc.ByteLen, i, rcSize)
		}
		got := e.buf[i*rcSize : (i+1)*rcSize]
		if want := rcPattern(side, i); !bytes.Equal(got, want) {
			n := 0
			for n < len(got) && got[n] == want[n] {
				n++
			}
			return fmt.Errorf("receive %d: byte %d is %#x, want %#x", i, n, got[n], want[n])
		}
	}
	return nil
}

// rcConnect is the client: it connects from local to the server at
// server, sends its messages, checks the answers and disconnects.
func rcConnect(ctx context.Context, local, server netip.Addr, dev string) error {
	ai, err := rdmacm.GetAddrInfo(ctx, server.String(), rcPort, &rdmacm.AddrInfoHints{Src: netip.AddrPortFrom(local, 0)})
	if err != nil {
		return err
	}
	id, err := rdmacm.CreateEP(ctx, &ai[0], rcQP)
	if err != nil {
		return err
	}
	defer id.Close()
	e, err := newRCEnd(id)
	if err != nil {
		return err
	}
	defer e.mr.Close()
	if _, err := id.ConnectContext(ctx, nil); err != nil {
		return fmt.Errorf("connect to %s: %w", server, err)
	}
	if err := e.checkDev(dev); err != nil {
		return err
	}
	if err := e.send(ctx, 0); err != nil {
		return err
	}
	if err := e.recv(ctx, 1); err != nil {
		return err
	}
	return id.DisconnectContext(ctx)
}

// rcServe is the server: it accepts one connection on l, checks the
// client's messages, answers and waits for the client's disconnect.
func rcServe(ctx context.Context, l *rdmacm.ID, dev string) error {
	req, err := l.GetRequest(ctx)
	if err != nil {
		return err
	}
	s := req.ID
	defer s.Close()
	e, err := newRCEnd(s)
	if err != nil {
		return err
	}
	defer e.mr.Close()
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		return err
	}
	if err := e.checkDev(dev); err != nil {
		return err
	}
	if err := e.recv(ctx, 0); err != nil {
		return err
	}
	if err := e.send(ctx, 1); err != nil {
		return err
	}
	if _, err := s.GetRecvComp(ctx); !errors.Is(err, rdmacm.ErrDisconnected) {
		return fmt.Errorf("waiting for the client's disconnect: %v", err)
	}
	return s.Disconnect()
}

// TestBedPeerFailures makes the peer VM hang, then crashes its kernel,
// each under a running rxevm-peer command: the command must end with
// status 125 and say what happened, with the peer's console, never hang.
// It leaves the bed without its peer, so it runs alone (make vmtest-peer
// runs it in a bed of its own).
func TestBedPeerFailures(t *testing.T) {
	p := testenv.PeerHost(t)
	if p == nil {
		return
	}
	t.Run("hung", func(t *testing.T) {
		// A real-time spinner on the peer's only vCPU, without RT
		// throttling (and, from Linux 6.12, without the fair server's
		// share for normal tasks), starves every other task,
		// rxevm-peer's server included, for 60 s (more than
		// rxevm-peer's 45 s of silence); timeout, one priority above,
		// ends it.
		pp := p.Start(t, "sh", "-c", `set -e
echo -1 >/proc/sys/kernel/sched_rt_runtime_us
mount -t debugfs debugfs /sys/kernel/debug
for f in /sys/kernel/debug/sched/fair_server/cpu*/runtime; do
	if [ -e "$f" ]; then echo 0 >"$f"; fi
done
echo hanging
sleep 1
exec chrt -f 99 timeout 60 chrt -f 98 sh -c 'while :; do :; done'`)
		pp.WaitOutput(t, "hanging")
		r := pp.Wait()
		if r.ExitCode != 125 || !strings.Contains(r.Stderr, "the peer VM sent nothing for") || !strings.Contains(r.Stderr, "console output of the peer VM") {
			t.Errorf("a command on a hung peer: exit %d, stderr:\n%s\nwant 125, \"the peer VM sent nothing for\" and the peer's console", r.ExitCode, r.Stderr)
		}
		// The peer comes back when the spinner's timeout ends it; the
		// limit only ends a hang.
		for limit := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			r := p.Run(t, "true")
			if r.ExitCode == 0 {
				break
			}
			if time.Now().After(limit) {
				t.Fatalf("the peer did not come back after its spinner ended: exit %d, stderr:\n%s", r.ExitCode, r.Stderr)
			}
		}
	})
	t.Run("crashed", func(t *testing.T) {
		pp := p.Start(t, "sh", "-c", "echo crashing; sync; echo c >/proc/sysrq-trigger; sleep 600")
		pp.WaitOutput(t, "crashing")
		r := pp.Wait()
		for _, want := range []string{"rxevm-peer: sh on the peer VM", "the peer VM stopped (kernel panic)", "console output of the peer VM"} {
			if r.ExitCode != 125 || !strings.Contains(r.Stderr, want) {
				t.Errorf("a command under a crashing peer: exit %d, stderr:\n%s\nwant 125 and %q", r.ExitCode, r.Stderr, want)
			}
		}
		r = p.Run(t, "true")
		if r.ExitCode != 125 || !strings.Contains(r.Stderr, "the peer VM stopped") {
			t.Errorf("a command after the peer crashed: exit %d, stderr:\n%s\nwant 125 and %q", r.ExitCode, r.Stderr, "the peer VM stopped")
		}
	})
}
