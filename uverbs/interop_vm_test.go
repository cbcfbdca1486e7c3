package uverbs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The interoperability tests run testdata/peer.c, a small C program on
// Debian's libibverbs (and so rdma-core's rxe provider), as the other
// side of a connection to the Go provider: Go on rxe0, C on rxe1. They
// exchange QPNs, GIDs and region keys over the peer's stdin and stdout,
// and the Go test drives both sides, so each operation is checked in
// both directions with the data on both sides.

// libibverbs' completion opcodes and flags as the peer prints them (a
// successful completion has status 0).
const (
	ibvWCSend            = 0
	ibvWCRDMAWrite       = 1
	ibvWCRDMARead        = 2
	ibvWCCompSwap        = 3
	ibvWCFetchAdd        = 4
	ibvWCRecv            = 128
	ibvWCRecvRDMAWithImm = 129
	ibvWCWithImm         = 1 << 1
)

const (
	peerTimeout      = 2 * time.Minute // the whole peer process
	peerReplyTimeout = 20 * time.Second
	grhBytes         = 40
	goDevice         = 0 // rxe0
	peerDevice       = 1 // rxe1

	interopImm             = 0x600dcafe
	interopImmFromC uint32 = 0xc0ffee01
)

// buildPeer compiles testdata/peer.c. Missing gcc or libibverbs headers
// fail the test in the VM, which promises them, and skip it elsewhere.
func buildPeer(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		unavailableTool(t, "gcc is not installed")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		unavailableTool(t, "libibverbs headers (libibverbs-dev) are not installed")
	}
	bin := filepath.Join(t.TempDir(), "peer")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gcc, "-O2", "-Wall", "-Werror", "-o", bin, "testdata/peer.c", "-libverbs").CombinedOutput()
	if err != nil {
		t.Fatalf("compiling testdata/peer.c: %v\n%s", err, out)
	}
	return bin
}

func unavailableTool(t *testing.T, why string) {
	t.Helper()
	if testenv.RequireDevice() {
		t.Fatalf("PURERDMA_REQUIRE_DEVICE=1: %s (scripts/install-deps installs it)", why)
	}
	t.Skip(why)
}

// peer is a running testdata/peer.c.
type peer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	done   chan struct{} // closed when stdout is drained
	stderr bytes.Buffer
	qpn    uint32
	gid    uverbs.GID
	addr   uint64
	rkey   uint32
}

// startPeer runs the peer on device dev with a QP of type typ ("rc" or
// "ud"), bounded by peerTimeout, and reads its INFO line.
func startPeer(t *testing.T, bin string, dev int, typ string) *peer {
	t.Helper()
	name := testenv.Devices(t, dev+1)[dev].Name
	gidx, _ := roceV2GID(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	p := &peer{t: t, lines: make(chan string, 16), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, name, strconv.Itoa(int(gidx)), typ)
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		defer cancel()
		fmt.Fprintln(p.stdin, "QUIT")
		p.stdin.Close()
		for range p.lines { // drain until the peer closes stdout
		}
		<-p.done
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("peer: %v\nstderr:\n%s", err, p.stderr.String())
		}
	})
	f := strings.Fields(p.read())
	if len(f) != 5 || f[0] != "INFO" {
		t.Fatalf("peer said %q, want INFO qpn gid addr rkey", strings.Join(f, " "))
	}
	qpn, err1 := strconv.ParseUint(f[1], 10, 32)
	gid, err2 := hex.DecodeString(f[2])
	addr, err3 := strconv.ParseUint(f[3], 10, 64)
	rkey, err4 := strconv.ParseUint(f[4], 10, 32)
	if err := errors.Join(err1, err2, err3, err4); err != nil || len(gid) != 16 {
		t.Fatalf("peer INFO %q: %v", f, err)
	}
	p.qpn, p.addr, p.rkey = uint32(qpn), addr, uint32(rkey)
	copy(p.gid[:], gid)
	return p
}

// read returns the peer's next line.
func (p *peer) read() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("peer exited\nstderr:\n%s", p.stderr.String())
		}
		return l
	case <-time.After(peerReplyTimeout):
		p.t.Fatalf("peer did not answer within %v", peerReplyTimeout)
	}
	return ""
}

// do sends a command and returns the fields after "OK".
func (p *peer) do(format string, args ...any) []string {
	p.t.Helper()
	cmd := fmt.Sprintf(format, args...)
	if _, err := fmt.Fprintln(p.stdin, cmd); err != nil {
		p.t.Fatalf("peer %s: %v", cmd, err)
	}
	reply := p.read()
	rest, ok := strings.CutPrefix(reply, "OK")
	if !ok {
		p.t.Fatalf("peer %s: %s", cmd, reply)
	}
	return strings.Fields(rest)
}

func (p *peer) fillPattern(off int, b []byte) { p.do("FILL %d %x", off, b) }

func (p *peer) dump(off, n int) []byte {
	p.t.Helper()
	f := p.do("DUMP %d %d", off, n)
	if n == 0 {
		return nil
	}
	b, err := hex.DecodeString(f[0])
	if err != nil || len(b) != n {
		p.t.Fatalf("DUMP %d %d: %q", off, n, f)
	}
	return b
}

// peerWC is a completion as libibverbs reported it to the peer.
type peerWC struct {
	WRID, Status, Opcode, ByteLen, Flags, Imm, SrcQP, QPNum uint64
}

func (p *peer) poll() peerWC {
	p.t.Helper()
	f := p.do("POLL")
	var v [8]uint64
	if len(f) != len(v) {
		p.t.Fatalf("POLL: %q", f)
	}
	for i := range v {
		var err error
		if v[i], err = strconv.ParseUint(f[i], 10, 64); err != nil {
			p.t.Fatalf("POLL: %q: %v", f, err)
		}
	}
	return peerWC{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
}

// checkPeerWC compares a peer completion, ignoring the flags other than
// WITH_IMM (libibverbs passes rxe's flags through unchanged).
func checkPeerWC(t *testing.T, what string, want, got peerWC) {
	t.Helper()
	got.Flags &= ibvWCWithImm
	if want != got {
		t.Errorf("%s: peer completion %+v, want %+v", what, got, want)
	}
}

func TestInteropC(t *testing.T) {
	testenv.NotIWARP(t, "the C peer connects by QP modify (RC) or uses UD; iWARP has RC QPs only, connected only through the iWARP CM")
	testenv.Devices(t, 2)
	bin := buildPeer(t)
	t.Run("RC", func(t *testing.T) { interopRC(t, bin) })
	t.Run("UD", func(t *testing.T) { interopUD(t, bin) })
}

func interopRC(t *testing.T, bin string) {
	g := newEnd(t, goDevice, pairOpts{typ: uverbs.QPTypeRC})
	c := startPeer(t, bin, peerDevice, "rc")
	connectTo(t, g, c.qpn, c.gid)
	c.do("CONNECT %d %x", g.qp.Num(), g.gid[:])

	// ---- Go -> C ----
	t.Run("Go SEND_WITH_IMM to C", func(t *testing.T) {
		msg := fillPattern(g.buf[:200], 1)
		c.do("RECV 1 0 1024")
		mustPostSend(t, g, &uverbs.SendWR{WRID: 10, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: interopImm,
			SGL: []uverbs.SGE{g.sge(0, len(msg))}})
		checkWCs(t, "Go send", []uverbs.WorkCompletion{withImm(sendWC(g.qp, 10, uverbs.WCSend, len(msg)), 0)}, pollWCs(t, g.cq, 1))
		checkPeerWC(t, "C receive", peerWC{WRID: 1, Opcode: ibvWCRecv, ByteLen: uint64(len(msg)), Flags: ibvWCWithImm, Imm: interopImm, QPNum: uint64(c.qpn)}, c.poll())
		wantBytes(t, "C received", msg, c.dump(0, len(msg)))
	})
	t.Run("Go SEND to C", func(t *testing.T) {
		msg := fillPattern(g.buf[:1500], 2) // two packets
		c.do("RECV 2 2048 2048")
		mustPostSend(t, g, &uverbs.SendWR{WRID: 11, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{g.sge(0, len(msg))}})
		checkWCs(t, "Go send", []uverbs.WorkCompletion{sendWC(g.qp, 11, uverbs.WCSend, len(msg))}, pollWCs(t, g.cq, 1))
		checkPeerWC(t, "C receive", peerWC{WRID: 2, Opcode: ibvWCRecv, ByteLen: uint64(len(msg)), QPNum: uint64(c.qpn)}, c.poll())
		wantBytes(t, "C received", msg, c.dump(2048, len(msg)))
	})
	t.Run("Go RDMA_WRITE to C", func(t *testing.T) {
		msg := fillPattern(g.buf[:3000], 3)
		mustPostSend(t, g, &uverbs.SendWR{WRID: 12, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{g.sge(0, len(msg))}, RemoteAddr: c.addr + 8192, RKey: c.rkey})
		checkWCs(t, "Go write", []uverbs.WorkCompletion{sendWC(g.qp, 12, uverbs.WCRDMAWrite, len(msg))}, pollWCs(t, g.cq, 1))
		wantBytes(t, "C memory", msg, c.dump(8192, len(msg)))
	})
	t.Run("Go RDMA_WRITE_WITH_IMM to C", func(t *testing.T) {
		msg := fillPattern(g.buf[:100], 4)
		c.do("RECV 3 0 16")
		mustPostSend(t, g, &uverbs.SendWR{WRID: 13, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: interopImm + 1,
			SGL: []uverbs.SGE{g.sge(0, len(msg))}, RemoteAddr: c.addr + 12000, RKey: c.rkey})
		checkWCs(t, "Go write", []uverbs.WorkCompletion{withImm(sendWC(g.qp, 13, uverbs.WCRDMAWrite, len(msg)), 0)}, pollWCs(t, g.cq, 1))
		checkPeerWC(t, "C receive", peerWC{WRID: 3, Opcode: ibvWCRecvRDMAWithImm, ByteLen: uint64(len(msg)), Flags: ibvWCWithImm, Imm: interopImm + 1, QPNum: uint64(c.qpn)}, c.poll())
		wantBytes(t, "C memory", msg, c.dump(12000, len(msg)))
	})
	t.Run("Go RDMA_READ from C", func(t *testing.T) {
		data := fillPattern(make([]byte, 1200), 5)
		c.fillPattern(16000, data)
		clear(g.buf[:len(data)])
		mustPostSend(t, g, &uverbs.SendWR{WRID: 14, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{g.sge(0, len(data))}, RemoteAddr: c.addr + 16000, RKey: c.rkey})
		checkWCs(t, "Go read", []uverbs.WorkCompletion{sendWC(g.qp, 14, uverbs.WCRDMARead, len(data))}, pollWCs(t, g.cq, 1))
		wantBytes(t, "read from C", data, g.buf[:len(data)])
	})
	t.Run("Go atomics on C", func(t *testing.T) {
		c.fillPattern(20000, binary.NativeEndian.AppendUint64(nil, 1000))
		mustPostSend(t, g, &uverbs.SendWR{WRID: 15, Opcode: uverbs.WRAtomicFetchAndAdd, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{g.sge(0, 8)}, RemoteAddr: c.addr + 20000, RKey: c.rkey, CompareAdd: 24})
		checkWCs(t, "Go fetch-add", []uverbs.WorkCompletion{sendWC(g.qp, 15, uverbs.WCFetchAdd, 8)}, pollWCs(t, g.cq, 1))
		wantU64(t, "fetch-add original", 1000, g.buf[0:])
		wantU64(t, "C value after fetch-add", 1024, c.dump(20000, 8))
		mustPostSend(t, g, &uverbs.SendWR{WRID: 16, Opcode: uverbs.WRAtomicCmpAndSwp, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{g.sge(8, 8)}, RemoteAddr: c.addr + 20000, RKey: c.rkey, CompareAdd: 1024, Swap: 0xabcdef})
		checkWCs(t, "Go cmp-swap", []uverbs.WorkCompletion{sendWC(g.qp, 16, uverbs.WCCompSwap, 8)}, pollWCs(t, g.cq, 1))
		wantU64(t, "cmp-swap original", 1024, g.buf[8:])
		wantU64(t, "C value after cmp-swap", 0xabcdef, c.dump(20000, 8))
	})

	// ---- C -> Go ----
	t.Run("C SEND_WITH_IMM to Go", func(t *testing.T) {
		msg := fillPattern(make([]byte, 300), 6)
		c.fillPattern(0, msg)
		mustPostRecv(t, g, 20, g.sge(4096, 1024))
		c.do("SEND 30 0 %d %d", len(msg), interopImmFromC)
		checkPeerWC(t, "C send", peerWC{WRID: 30, Opcode: ibvWCSend, ByteLen: uint64(len(msg)), Flags: ibvWCWithImm, QPNum: uint64(c.qpn)}, c.poll())
		checkWCs(t, "Go receive", []uverbs.WorkCompletion{withImm(recvWC(g.qp, 20, uverbs.WCRecv, len(msg)), interopImmFromC)}, pollWCs(t, g.cq, 1))
		wantBytes(t, "Go received", msg, g.buf[4096:4096+len(msg)])
	})
	t.Run("C SEND to Go", func(t *testing.T) {
		msg := fillPattern(make([]byte, 2500), 7) // three packets
		c.fillPattern(0, msg)
		mustPostRecv(t, g, 21, g.sge(4096, 4096))
		c.do("SEND 31 0 %d -", len(msg))
		checkPeerWC(t, "C send", peerWC{WRID: 31, Opcode: ibvWCSend, ByteLen: uint64(len(msg)), QPNum: uint64(c.qpn)}, c.poll())
		checkWCs(t, "Go receive", []uverbs.WorkCompletion{recvWC(g.qp, 21, uverbs.WCRecv, len(msg))}, pollWCs(t, g.cq, 1))
		wantBytes(t, "Go received", msg, g.buf[4096:4096+len(msg)])
	})
	t.Run("C RDMA_WRITE to Go", func(t *testing.T) {
		msg := fillPattern(make([]byte, 2000), 8)
		c.fillPattern(0, msg)
		clear(g.buf[1000:3000])
		c.do("WRITE 32 0 %d %d %d -", len(msg), g.mr.Addr()+1000, g.mr.RKey())
		checkPeerWC(t, "C write", peerWC{WRID: 32, Opcode: ibvWCRDMAWrite, ByteLen: uint64(len(msg)), QPNum: uint64(c.qpn)}, c.poll())
		wantBytes(t, "Go memory", msg, g.buf[1000:3000])
		noMoreWCs(t, g.cq, "a write without immediate data")
	})
	t.Run("C RDMA_WRITE_WITH_IMM to Go", func(t *testing.T) {
		msg := fillPattern(make([]byte, 64), 9)
		c.fillPattern(0, msg)
		mustPostRecv(t, g, 22, g.sge(0, 8))
		c.do("WRITE 33 0 %d %d %d %d", len(msg), g.mr.Addr()+5000, g.mr.RKey(), interopImmFromC+1)
		checkPeerWC(t, "C write", peerWC{WRID: 33, Opcode: ibvWCRDMAWrite, ByteLen: uint64(len(msg)), Flags: ibvWCWithImm, QPNum: uint64(c.qpn)}, c.poll())
		checkWCs(t, "Go receive", []uverbs.WorkCompletion{withImm(recvWC(g.qp, 22, uverbs.WCRecvRDMAWithImm, len(msg)), interopImmFromC+1)}, pollWCs(t, g.cq, 1))
		wantBytes(t, "Go memory", msg, g.buf[5000:5064])
	})
	t.Run("C RDMA_READ from Go", func(t *testing.T) {
		data := fillPattern(g.buf[6000:7500], 10)
		c.do("READ 34 30000 %d %d %d", len(data), g.mr.Addr()+6000, g.mr.RKey())
		checkPeerWC(t, "C read", peerWC{WRID: 34, Opcode: ibvWCRDMARead, ByteLen: uint64(len(data)), QPNum: uint64(c.qpn)}, c.poll())
		wantBytes(t, "C read", data, c.dump(30000, len(data)))
	})
	t.Run("C atomics on Go", func(t *testing.T) {
		binary.NativeEndian.PutUint64(g.buf[7680:], 1<<33)
		c.do("FADD 35 40000 %d %d %d", g.mr.Addr()+7680, g.mr.RKey(), 3)
		checkPeerWC(t, "C fetch-add", peerWC{WRID: 35, Opcode: ibvWCFetchAdd, ByteLen: 8, QPNum: uint64(c.qpn)}, c.poll())
		wantU64(t, "fetch-add original (C)", 1<<33, c.dump(40000, 8))
		wantU64(t, "Go value after fetch-add", 1<<33+3, g.buf[7680:])
		c.do("CAS 36 40008 %d %d %d %d", g.mr.Addr()+7680, g.mr.RKey(), uint64(1<<33+3), 77)
		checkPeerWC(t, "C cmp-swap", peerWC{WRID: 36, Opcode: ibvWCCompSwap, ByteLen: 8, QPNum: uint64(c.qpn)}, c.poll())
		wantU64(t, "cmp-swap original (C)", 1<<33+3, c.dump(40008, 8))
		wantU64(t, "Go value after cmp-swap", 77, g.buf[7680:])
	})
	noMoreWCs(t, g.cq, "interop RC")
}

func interopUD(t *testing.T, bin string) {
	g := newEnd(t, goDevice, pairOpts{typ: uverbs.QPTypeUD})
	c := startPeer(t, bin, peerDevice, "ud")
	connectTo(t, g, c.qpn, c.gid)
	c.do("CONNECT %d %x", g.qp.Num(), g.gid[:])
	ah, err := g.pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: c.gid, SGIDIndex: g.gidx, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	for _, imm := range []bool{true, false} {
		name := "SEND"
		if imm {
			name = "SEND_WITH_IMM"
		}
		t.Run("Go "+name+" to C", func(t *testing.T) {
			msg := fillPattern(g.buf[:512], 11)
			c.do("RECV 1 0 %d", grhBytes+1024)
			wr := &uverbs.SendWR{WRID: 40, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{g.sge(0, len(msg))}, AH: ah, RemoteQPN: c.qpn, RemoteQKey: qkey}
			want := peerWC{WRID: 1, Opcode: ibvWCRecv, ByteLen: uint64(grhBytes + len(msg)), SrcQP: uint64(g.qp.Num()), QPNum: uint64(c.qpn)}
			sent := sendWC(g.qp, 40, uverbs.WCSend, len(msg))
			if imm {
				wr.Opcode, wr.Imm = uverbs.WRSendWithImm, interopImm
				want.Flags, want.Imm = ibvWCWithImm, interopImm
				sent = withImm(sent, 0)
			}
			mustPostSend(t, g, wr)
			checkWCs(t, "Go send", []uverbs.WorkCompletion{sent}, pollWCs(t, g.cq, 1))
			checkPeerWC(t, "C receive", want, c.poll())
			wantBytes(t, "C received", msg, c.dump(grhBytes, len(msg)))
		})
		t.Run("C "+name+" to Go", func(t *testing.T) {
			msg := fillPattern(make([]byte, 700), 12)
			c.fillPattern(4096, msg)
			mustPostRecv(t, g, 50, g.sge(0, grhBytes+1024))
			immArg := "-"
			want := recvWC(g.qp, 50, uverbs.WCRecv, grhBytes+len(msg))
			want.SrcQP = c.qpn
			if imm {
				immArg = strconv.Itoa(int(interopImmFromC))
				want = withImm(want, interopImmFromC)
			}
			c.do("SEND 41 4096 %d %s", len(msg), immArg)
			wantSend := peerWC{WRID: 41, Opcode: ibvWCSend, ByteLen: uint64(len(msg)), QPNum: uint64(c.qpn)}
			if imm {
				wantSend.Flags = ibvWCWithImm
			}
			checkPeerWC(t, "C send", wantSend, c.poll())
			checkWCs(t, "Go receive", []uverbs.WorkCompletion{want}, pollWCs(t, g.cq, 1))
			wantBytes(t, "Go received", msg, g.buf[grhBytes:grhBytes+len(msg)])
			if ip := g.buf[20:40]; ip[0] != 0x45 || !bytes.Equal(ip[12:16], c.gid[12:]) || !bytes.Equal(ip[16:20], g.gid[12:]) {
				t.Errorf("GRH area: IPv4 header % x, want one from %v to %v", ip, c.gid, g.gid)
			}
		})
	}
	noMoreWCs(t, g.cq, "interop UD")
}
