package rdmacm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
)

// The peer process: the test binary run again with helperEnv set
// (TestMain), which connects or accepts one RC connection, says so on
// stdout and waits to be killed. Its ConnParam is DefaultConnParam with
// the retry count and ACK timeout of the environment.
const (
	helperEnv      = "RDMACM_TEST_HELPER"       // "connect" or "serve"
	helperAddrEnv  = "RDMACM_TEST_HELPER_ADDR"  // connect: the listener's address
	helperRetryEnv = "RDMACM_TEST_HELPER_RETRY" // RetryCount; unset: DefaultConnParam's
	helperAckEnv   = "RDMACM_TEST_HELPER_ACK"   // AckTimeout; unset: DefaultConnParam's
)

// peerBufSize is the size of the peer's buffer that the survivor may
// write; the peer announces its address and rkey in its private data.
const peerBufSize = 1 << 16

// helperMain is the peer process. "connect" connects to the address in
// helperAddrEnv from the client address; "serve" listens on the server
// address, prints "listening ADDR" and accepts one connection. Either
// way it registers a buffer for RDMA writes, sends its address and rkey
// in its private data, prints "established" and sleeps until killed.
func helperMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := rdmacm.DefaultConnParam()
	for env, v := range map[string]*uint8{helperRetryEnv: &p.RetryCount, helperAckEnv: &p.AckTimeout} {
		if s := os.Getenv(env); s != "" {
			n, err := strconv.ParseUint(s, 10, 8)
			if err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				return 2
			}
			*v = uint8(n)
		}
	}
	var err error
	switch mode := os.Getenv(helperEnv); mode {
	case "connect":
		err = helperConnect(ctx, p)
	case "serve":
		err = helperServe(ctx, p)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("established")
	time.Sleep(time.Minute) // until killed
	return 3
}

// peerData is the private data that tells the other side where it may
// write: a buffer's address and rkey.
func peerData(id *rdmacm.ID) ([]byte, error) {
	mr, err := id.RegWrite(make([]byte, peerBufSize))
	if err != nil {
		return nil, err
	}
	var b [12]byte
	binary.BigEndian.PutUint64(b[0:], mr.Addr())
	binary.BigEndian.PutUint32(b[8:], mr.RKey())
	return b[:], nil
}

// parsePeerData is peerData's address and rkey.
func parsePeerData(b []byte) (addr uint64, rkey uint32, err error) {
	if len(b) < 12 {
		return 0, 0, fmt.Errorf("%d bytes of private data, want at least 12", len(b))
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), nil
}

func helperConnect(ctx context.Context, p *rdmacm.ConnParam) error {
	addr, err := netip.ParseAddrPort(os.Getenv(helperAddrEnv))
	if err != nil {
		return err
	}
	c, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return err
	}
	if err := c.Resolve(ctx, clientAP, addr); err != nil {
		return err
	}
	if p.PrivateData, err = peerData(c); err != nil {
		return err
	}
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		return err
	}
	_, err = c.ConnectContext(ctx, p)
	return err
}

func helperServe(ctx context.Context, p *rdmacm.ConnParam) error {
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return err
	}
	if err := l.Bind(netip.AddrPortFrom(serverIP, 0)); err != nil {
		return err
	}
	if err := l.Listen(0); err != nil {
		return err
	}
	a, err := l.LocalAddr()
	if err != nil {
		return err
	}
	fmt.Println("listening", a)
	req, err := l.GetRequest(ctx)
	if err != nil {
		return err
	}
	s := req.ID
	if p.PrivateData, err = peerData(s); err != nil {
		return err
	}
	if _, err := s.CreateQP(nil, qpConfig()); err != nil {
		return err
	}
	_, err = s.AcceptContext(ctx, p)
	return err
}

// peerProc is a running peer process.
type peerProc struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr bytes.Buffer
	done   bool
}

// startPeer starts the peer process in mode ("connect" or "serve") with
// the extra environment env; the test's cleanup kills it if the test
// did not.
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
	t.Cleanup(func() {
		if !p.done {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// expect reads the peer's next line of output and fails the test unless
// it starts with prefix; it returns the rest of the line.
func (p *peerProc) expect(t testing.TB, prefix string) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if !strings.HasPrefix(line, prefix) {
		p.kill(t)
		t.Fatalf("peer said %q (%v), want %q; stderr: %s", line, err, prefix, p.stderr.String())
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// kill sends the peer SIGKILL and waits for it to end.
func (p *peerProc) kill(t testing.TB) {
	t.Helper()
	if p.done {
		return
	}
	p.done = true
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}
