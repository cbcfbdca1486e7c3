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

	"github.com/purerdma/rdma/internal/testutils"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// The fault table (docs/reliability.md "Network faults"): each workload
// connects across the two-VM bed's data link with no fault, then runs
// its operations while a fault disturbs the link, and must deliver every
// byte correct and in order, or fail with the completion status the
// fault's row expects. The server end is this test binary run on the
// peer (roleEnv, TestMain); the client end runs in the test.

// roleEnv makes the test binary the peer's server (TestMain).
const roleEnv = "PURERDMA_FAULTS_ROLE"

// The servers' ports on the peer's data-link address.
const (
	cmPort   = "7510"
	rpmaPort = "7511"
)

// Sizes: small, the VMs are emulated.
const (
	streamBytes = 256 << 10 // the RC stream's region, written and read back
	streamChunk = 16 << 10  // one RDMA write and one RDMA read
	msgCount    = 16        // messages each way
	msgSize     = 16 << 10
	rpmaBytes   = 256 << 10
	rpmaChunk   = 32 << 10 // one write, one flush, one read
)

// badData marks a server's report of corrupt, duplicated or reordered
// data; the test fails if the server prints it.
const badData = "BAD DATA"

// caseLimit ends a case that would hang.
const caseLimit = 90 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "serve":
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, "faults server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case udServeRole:
		if err := serveUD(); err != nil {
			fmt.Fprintln(os.Stderr, "faults UD server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testutils.Main(m)
}

// pattern fills b with the content of chunk (or message) i of a case's
// sequence seq: every byte depends on both, so a stale, duplicated or
// misplaced chunk does not compare equal.
func pattern(b []byte, seq uint32, i int) {
	for j := range b {
		b[j] = byte(int(seq)*61 + i*29 + j*7 + j>>9)
	}
	binary.LittleEndian.PutUint32(b, seq)
	binary.LittleEndian.PutUint32(b[4:], uint32(i))
}

// firstDiff is the first index where got and want differ.
func firstDiff(got, want []byte) int {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	return n
}

// wcErr turns a completion into an error that names the operation and
// matches the status with errors.Is.
func wcErr(op string, wc uverbs.WorkCompletion, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if wc.Status != uverbs.WCSuccess {
		return fmt.Errorf("%s: completion status %w", op, wc.Status)
	}
	return nil
}

// ---- the peer's server ----

var cmQP = &rdmacm.QPOptions{Config: uverbs.QPConfig{
	Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: msgCount, MaxSendSGE: 1, MaxRecvSGE: 1},
}}

// serve is the peer's server: an rdma_cm listener for the RC stream
// ('w' in the connect's private data: a region the client writes and
// reads) and for messaging ('m': every message checked and echoed), and
// an rpma endpoint with a region to write, flush and read. It serves
// until it is killed.
func serve() error {
	ctx := context.Background()
	local, err := netip.ParseAddr(os.Getenv("RXEVM_LOCAL_ADDR"))
	if err != nil {
		return err
	}
	ai, err := rdmacm.GetAddrInfo(ctx, local.String(), cmPort, &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		return err
	}
	l, err := rdmacm.CreateEP(ctx, &ai[0], cmQP)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Listen(0); err != nil {
		return err
	}
	dev, err := rpma.DeviceContext(ctx, local.String(), rpma.Local)
	if err != nil {
		return err
	}
	defer dev.Close()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		return err
	}
	defer peer.Close()
	ep, err := peer.Listen(ctx, local.String(), rpmaPort)
	if err != nil {
		return err
	}
	defer ep.Close()
	fmt.Println("listening")
	go func() {
		for n := 0; ; n++ {
			req, err := ep.NextConnReq(ctx, nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, "rpma: next connection request:", err)
				return
			}
			go func() {
				if err := serveRPMA(peer, req); err != nil {
					fmt.Fprintf(os.Stderr, "rpma connection %d: %v\n", n, err)
				}
			}()
		}
	}()
	for n := 0; ; n++ {
		ev, err := l.GetRequest(ctx)
		if err != nil {
			return fmt.Errorf("rdma_cm: get request: %w", err)
		}
		go func() {
			if err := serveCM(ev); err != nil {
				fmt.Fprintf(os.Stderr, "rdma_cm connection %d: %v\n", n, err)
			}
		}()
	}
}

// serveLimit bounds how long the server keeps a connection, a hang
// guard: the client disconnects well before.
const serveLimit = 3 * time.Minute

func serveCM(ev *rdmacm.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), serveLimit)
	defer cancel()
	s := ev.ID
	defer s.Close()
	if len(ev.PrivateData) == 0 {
		return errors.New("no private data")
	}
	switch ev.PrivateData[0] {
	case 'w':
		buf := make([]byte, streamBytes)
		mrW, err := s.RegWrite(buf)
		if err != nil {
			return err
		}
		defer mrW.Close()
		mrR, err := s.RegRead(buf)
		if err != nil {
			return err
		}
		defer mrR.Close()
		pd := make([]byte, 16)
		binary.LittleEndian.PutUint64(pd, mrW.Addr())
		binary.LittleEndian.PutUint32(pd[8:], mrW.RKey())
		binary.LittleEndian.PutUint32(pd[12:], mrR.RKey())
		if _, err := s.AcceptContext(ctx, withData(pd)); err != nil {
			return err
		}
	case 'm':
		buf := make([]byte, msgCount*msgSize)
		mr, err := s.RegMsgs(buf)
		if err != nil {
			return err
		}
		defer mr.Close()
		for i := range msgCount {
			if err := s.PostRecv(uint64(i), mr, i*msgSize, msgSize); err != nil {
				return err
			}
		}
		if _, err := s.AcceptContext(ctx, nil); err != nil {
			return err
		}
		seq := binary.LittleEndian.Uint32(ev.PrivateData[1:])
		want := make([]byte, msgSize)
		for i := range msgCount {
			wc, err := s.GetRecvComp(ctx)
			if err := wcErr(fmt.Sprintf("receive %d", i), wc, err); err != nil {
				return err
			}
			got := buf[i*msgSize : (i+1)*msgSize]
			pattern(want, seq, i)
			if wc.WRID != uint64(i) || wc.ByteLen != msgSize || !bytes.Equal(got, want) {
				fmt.Fprintf(os.Stderr, "%s: case %d message %d: work request %d, %d bytes, first difference at byte %d\n",
					badData, seq, i, wc.WRID, wc.ByteLen, firstDiff(got, want))
				return errors.New("bad message")
			}
			if err := s.PostSend(uint64(i), mr, i*msgSize, msgSize, uverbs.SendSignaled); err != nil {
				return err
			}
			wc, err = s.GetSendComp(ctx)
			if err := wcErr(fmt.Sprintf("echo %d", i), wc, err); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown workload %q", ev.PrivateData[0])
	}
	// Wait for the client's disconnect.
	if _, err := s.GetRecvComp(ctx); !errors.Is(err, rdmacm.ErrDisconnected) {
		return fmt.Errorf("waiting for the disconnect: %v", err)
	}
	return s.Disconnect()
}

func serveRPMA(peer *rpma.Peer, req *rpma.ConnReq) error {
	ctx, cancel := context.WithTimeout(context.Background(), serveLimit)
	defer cancel()
	mem := make([]byte, rpmaBytes)
	mr, err := peer.RegMR(mem, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	if err != nil {
		req.Close()
		return err
	}
	defer mr.Close()
	pcfg := rpma.NewPeerCfg()
	pcfg.SetNativeFlush(mr.NativeFlush())
	conn, err := req.Connect(append(mr.Descriptor(), pcfg.Descriptor()...))
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		ev, err := conn.NextEvent(ctx)
		if err != nil {
			return err
		}
		if ev == rpma.ConnClosed {
			break
		}
	}
	return conn.Disconnect()
}

// ---- the client workloads ----

// A workload is connected by connect with no fault on the link; run
// then does its operations under the fault and returns how many bytes it
// checked; close disconnects and frees everything.
type workload interface {
	run(ctx context.Context) (checked int, err error)
	close(ctx context.Context)
}

// stream is the RC stream through uverbs (the QP connected by the
// rdma_cm): RDMA writes of a pattern into the server's region, each
// chunk read back with an RDMA read and compared.
type stream struct {
	id       *rdmacm.ID
	src, dst *uverbs.MR
	srcBuf   []byte
	dstBuf   []byte
	remoteW  rdmacm.Remote
	remoteR  rdmacm.Remote
	seq      uint32
}

// withData is rdmacm's default connection parameters (those of a nil
// *ConnParam: DefaultAckTimeout, DefaultRetryCount, RNR retries for ever,
// the device's limits for reads) with private data.
func withData(pd []byte) *rdmacm.ConnParam {
	p := rdmacm.DefaultConnParam()
	p.PrivateData = pd
	return p
}

// connectCM creates the client's ID and QP towards the peer's rdma_cm
// server.
func connectCM(ctx context.Context, p *testenv.Peer) (*rdmacm.ID, error) {
	ai, err := rdmacm.GetAddrInfo(ctx, p.Addr.String(), cmPort, &rdmacm.AddrInfoHints{Src: netip.AddrPortFrom(p.LocalAddr, 0)})
	if err != nil {
		return nil, err
	}
	return rdmacm.CreateEP(ctx, &ai[0], cmQP)
}

func newStream(ctx context.Context, p *testenv.Peer, seq uint32) (workload, error) {
	id, err := connectCM(ctx, p)
	if err != nil {
		return nil, err
	}
	s := &stream{id: id, srcBuf: make([]byte, streamBytes), dstBuf: make([]byte, streamBytes), seq: seq}
	fail := func(err error) (workload, error) {
		s.close(ctx)
		return nil, err
	}
	if s.src, err = id.RegMsgs(s.srcBuf); err != nil {
		return fail(err)
	}
	if s.dst, err = id.RegMsgs(s.dstBuf); err != nil {
		return fail(err)
	}
	ev, err := id.ConnectContext(ctx, withData([]byte{'w'}))
	if err != nil {
		return fail(fmt.Errorf("connect to %s: %w", p.Addr, err))
	}
	if len(ev.PrivateData) < 16 {
		return fail(fmt.Errorf("connect to %s: %d bytes of private data, want 16", p.Addr, len(ev.PrivateData)))
	}
	addr := binary.LittleEndian.Uint64(ev.PrivateData)
	s.remoteW = rdmacm.Remote{Addr: addr, RKey: binary.LittleEndian.Uint32(ev.PrivateData[8:])}
	s.remoteR = rdmacm.Remote{Addr: addr, RKey: binary.LittleEndian.Uint32(ev.PrivateData[12:])}
	return s, nil
}

func (s *stream) run(ctx context.Context) (int, error) {
	checked := 0
	for i := range streamBytes / streamChunk {
		off := i * streamChunk
		src := s.srcBuf[off : off+streamChunk]
		pattern(src, s.seq, i)
		w := rdmacm.Remote{Addr: s.remoteW.Addr + uint64(off), RKey: s.remoteW.RKey}
		if err := s.id.PostWrite(uint64(2*i), s.src, off, streamChunk, uverbs.SendSignaled, w); err != nil {
			return checked, fmt.Errorf("RDMA write %d: %w", i, err)
		}
		wc, err := s.id.GetSendComp(ctx)
		if err := wcErr(fmt.Sprintf("RDMA write %d", i), wc, err); err != nil {
			return checked, err
		}
		r := rdmacm.Remote{Addr: s.remoteR.Addr + uint64(off), RKey: s.remoteR.RKey}
		if err := s.id.PostRead(uint64(2*i+1), s.dst, off, streamChunk, uverbs.SendSignaled, r); err != nil {
			return checked, fmt.Errorf("RDMA read %d: %w", i, err)
		}
		wc, err = s.id.GetSendComp(ctx)
		if err := wcErr(fmt.Sprintf("RDMA read %d", i), wc, err); err != nil {
			return checked, err
		}
		if wc.WRID != uint64(2*i+1) {
			return checked, fmt.Errorf("RDMA read %d: completion of work request %d", i, wc.WRID)
		}
		if got := s.dstBuf[off : off+streamChunk]; !bytes.Equal(got, src) {
			return checked, fmt.Errorf("RDMA read %d: %s: byte %d differs", i, badData, firstDiff(got, src))
		}
		checked += streamChunk
	}
	return checked, nil
}

func (s *stream) close(ctx context.Context) {
	closeCM(ctx, s.id, s.src, s.dst)
}

// closeCM disconnects id (the server waits for it) and frees it and mrs.
func closeCM(ctx context.Context, id *rdmacm.ID, mrs ...*uverbs.MR) {
	if id == nil {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	id.DisconnectContext(dctx) // fails when the connection already broke
	cancel()
	for _, mr := range mrs {
		if mr != nil {
			mr.Close()
		}
	}
	id.Close()
}

// messages is rdmacm messaging: msgCount sequence-numbered sends, each
// checked in order by the server and echoed, the echo checked here.
type messages struct {
	id  *rdmacm.ID
	mr  *uverbs.MR
	buf []byte
	seq uint32
}

func newMessages(ctx context.Context, p *testenv.Peer, seq uint32) (workload, error) {
	id, err := connectCM(ctx, p)
	if err != nil {
		return nil, err
	}
	m := &messages{id: id, buf: make([]byte, (msgCount+1)*msgSize), seq: seq}
	fail := func(err error) (workload, error) {
		m.close(ctx)
		return nil, err
	}
	if m.mr, err = id.RegMsgs(m.buf); err != nil {
		return fail(err)
	}
	for i := range msgCount {
		if err := id.PostRecv(uint64(i), m.mr, i*msgSize, msgSize); err != nil {
			return fail(err)
		}
	}
	pd := []byte{'m', 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(pd[1:], seq)
	if _, err := id.ConnectContext(ctx, withData(pd)); err != nil {
		return fail(fmt.Errorf("connect to %s: %w", p.Addr, err))
	}
	return m, nil
}

func (m *messages) run(ctx context.Context) (int, error) {
	checked := 0
	out := m.buf[msgCount*msgSize:]
	for i := range msgCount {
		pattern(out, m.seq, i)
		if err := m.id.PostSend(uint64(i), m.mr, msgCount*msgSize, msgSize, uverbs.SendSignaled); err != nil {
			return checked, fmt.Errorf("send %d: %w", i, err)
		}
		wc, err := m.id.GetSendComp(ctx)
		if err := wcErr(fmt.Sprintf("send %d", i), wc, err); err != nil {
			return checked, err
		}
		wc, err = m.id.GetRecvComp(ctx)
		if err := wcErr(fmt.Sprintf("receive echo %d", i), wc, err); err != nil {
			return checked, err
		}
		got := m.buf[i*msgSize : (i+1)*msgSize]
		if wc.WRID != uint64(i) || wc.ByteLen != msgSize || !bytes.Equal(got, out) {
			return checked, fmt.Errorf("receive echo %d: %s: work request %d, %d bytes, first difference at byte %d", i, badData, wc.WRID, wc.ByteLen, firstDiff(got, out))
		}
		checked += 2 * msgSize
	}
	return checked, nil
}

func (m *messages) close(ctx context.Context) { closeCM(ctx, m.id, m.mr) }

// rpmaRun is rpma: writes of a pattern into the server's region, each
// flushed (FlushVisibility) and read back.
type rpmaRun struct {
	dev      *uverbs.Context
	peer     *rpma.Peer
	src, dst *rpma.MR
	srcBuf   []byte
	dstBuf   []byte
	conn     *rpma.Conn
	remote   *rpma.RemoteMR
	seq      uint32
}

func newRPMA(ctx context.Context, p *testenv.Peer, seq uint32) (workload, error) {
	r := &rpmaRun{srcBuf: make([]byte, rpmaBytes), dstBuf: make([]byte, rpmaBytes), seq: seq}
	fail := func(err error) (workload, error) {
		r.close(ctx)
		return nil, err
	}
	var err error
	if r.dev, err = rpma.DeviceContext(ctx, p.Addr.String(), rpma.Remote); err != nil {
		return fail(err)
	}
	if r.peer, err = rpma.NewPeer(r.dev); err != nil {
		return fail(err)
	}
	if r.src, err = r.peer.RegMR(r.srcBuf, rpma.UsageWriteSrc); err != nil {
		return fail(err)
	}
	if r.dst, err = r.peer.RegMR(r.dstBuf, rpma.UsageReadDst); err != nil {
		return fail(err)
	}
	req, err := r.peer.NewConnReq(ctx, p.Addr.String(), rpmaPort, nil)
	if err != nil {
		return fail(err)
	}
	if r.conn, err = req.Connect(nil); err != nil {
		req.Close()
		return fail(err)
	}
	if ev, err := r.conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		return fail(fmt.Errorf("rpma connect to %s: event %v: %v", p.Addr, ev, err))
	}
	pd := r.conn.PrivateData()
	if r.remote, err = rpma.RemoteMRFromDescriptor(pd); err != nil {
		return fail(err)
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(pd[rpma.MRDescriptorSize:])
	if err != nil {
		return fail(err)
	}
	if err := r.conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return fail(err)
	}
	return r, nil
}

// wait waits for one completion of r's connection and checks it.
func (r *rpmaRun) wait(ctx context.Context, op string, want uint64) error {
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := r.conn.CQ().WaitWC(ctx, wc); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := rpma.CompletionErr(&wc[0]); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if wc[0].WRID != want {
		return fmt.Errorf("%s: completion of operation %d, want %d", op, wc[0].WRID, want)
	}
	return nil
}

func (r *rpmaRun) run(ctx context.Context) (int, error) {
	checked := 0
	for i := range rpmaBytes / rpmaChunk {
		off := i * rpmaChunk
		src := r.srcBuf[off : off+rpmaChunk]
		pattern(src, r.seq, i)
		if err := r.conn.Write(r.remote, off, r.src, off, rpmaChunk, rpma.CompletionOnError, uint64(3*i)); err != nil {
			return checked, fmt.Errorf("rpma write %d: %w", i, err)
		}
		if err := r.conn.Flush(r.remote, off, rpmaChunk, rpma.FlushVisibility, rpma.CompletionAlways, uint64(3*i+1)); err != nil {
			return checked, fmt.Errorf("rpma flush %d: %w", i, err)
		}
		if err := r.wait(ctx, fmt.Sprintf("rpma write and flush %d", i), uint64(3*i+1)); err != nil {
			return checked, err
		}
		if err := r.conn.Read(r.dst, off, r.remote, off, rpmaChunk, rpma.CompletionAlways, uint64(3*i+2)); err != nil {
			return checked, fmt.Errorf("rpma read %d: %w", i, err)
		}
		if err := r.wait(ctx, fmt.Sprintf("rpma read %d", i), uint64(3*i+2)); err != nil {
			return checked, err
		}
		if got := r.dstBuf[off : off+rpmaChunk]; !bytes.Equal(got, src) {
			return checked, fmt.Errorf("rpma read %d: %s: byte %d differs", i, badData, firstDiff(got, src))
		}
		checked += rpmaChunk
	}
	return checked, nil
}

func (r *rpmaRun) close(ctx context.Context) {
	if r.conn != nil {
		r.conn.Disconnect()
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for {
			ev, err := r.conn.NextEvent(dctx)
			if err != nil || ev == rpma.ConnClosed {
				break
			}
		}
		cancel()
		r.conn.Close()
	}
	for _, mr := range []*rpma.MR{r.src, r.dst} {
		if mr != nil {
			mr.Close()
		}
	}
	if r.peer != nil {
		r.peer.Close()
	}
	if r.dev != nil {
		r.dev.Close()
	}
}

// ---- the table ----

type faultKind int

const (
	none faultKind = iota
	netem
	partition
	linkDown
)

// faultHold is how long a partition or a down link lasts.
const faultHold = 5 * time.Second

// A fault is one row of the table. want is nil when every operation
// must complete with its data checked, else the status the first failed
// operation must report (the retry budget ran out).
type fault struct {
	name   string
	kind   faultKind
	params string // netem's
	want   []error
}

var table = []fault{
	{name: "none"},
	{name: "loss-1%", kind: netem, params: "loss 1%"},
	{name: "loss-5%", kind: netem, params: "loss 5%"},
	{name: "delay-10ms-jitter-5ms", kind: netem, params: "delay 10ms 5ms"},
	{name: "reorder-25%", kind: netem, params: "delay 10ms reorder 25% 50%"},
	{name: "duplicate-5%", kind: netem, params: "duplicate 5%"},
	{name: "corrupt-1%", kind: netem, params: "corrupt 1%"},
	{name: "partition-5s", kind: partition, want: []error{uverbs.WCRetryExcErr}},
	// The local netdev down: 6.1's rxe fails the send it cannot route
	// (WCLocQPOpErr); 6.12's moves the QP to ERR at the failed send and
	// flushes it (WCWRFlushErr, docs/reliability.md "Faults").
	{name: "link-down-up-5s", kind: linkDown, want: []error{uverbs.WCLocQPOpErr, uverbs.WCWRFlushErr}},
}

var workloads = []struct {
	name    string
	connect func(context.Context, *testenv.Peer, uint32) (workload, error)
}{
	{"rc-write-read", newStream},
	{"rdmacm-messages", newMessages},
	{"rpma-write-flush-read", newRPMA},
}

// apply puts f on the link and returns the function that ends it (for a
// partition or a down link, after faultHold) and waits until the link
// is back.
func (f fault) apply(t *testing.T, p *testenv.Peer) (end func()) {
	switch f.kind {
	case netem:
		return p.LinkFault(t, f.params)
	case partition:
		remove := p.LinkFault(t, "loss 100%")
		return held(remove)
	case linkDown:
		return held(p.LinkDown(t))
	}
	return func() {}
}

// held runs end faultHold after now, in the background, and returns the
// function that waits for it.
func held(end func()) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(faultHold)
		end()
	}()
	return func() { <-done }
}

func TestPeerFaults(t *testing.T) {
	p := testenv.PeerHost(t)
	if p == nil {
		return
	}
	t.Logf("this VM %s (%s, %s), peer %s (%s, %s)", os.Getenv("PURERDMA_VM"), p.LocalAddr, p.LocalDev, p.Kernel, p.Addr, p.Dev)
	server := p.StartEnv(t, []string{roleEnv + "=serve"}, os.Args[0])
	server.WaitOutput(t, "listening")
	var base testutils.Usage
	seq := uint32(0)
	for _, f := range table {
		t.Run(f.name, func(t *testing.T) {
			for _, w := range workloads {
				t.Run(w.name, func(t *testing.T) {
					seq++
					runCase(t, p, f, w.name, w.connect, seq)
					_, errOut := server.Output()
					if strings.Contains(errOut, badData) {
						t.Fatalf("the server on the peer saw bad data:\n%s", errOut)
					}
				})
			}
			if f.kind == none {
				base = testutils.MeasureUsage(t)
				t.Logf("baseline: %v", base)
				return
			}
			testutils.CheckUsage(t, "after "+f.name, base, testutils.MeasureUsage(t), 64<<20)
		})
	}
	_, errOut := server.Output()
	t.Logf("the server's reports (failed connections are expected under the faults that fail):\n%s", errOut)
}

func runCase(t *testing.T, p *testenv.Peer, f fault, name string, connect func(context.Context, *testenv.Peer, uint32) (workload, error), seq uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), caseLimit)
	defer cancel()
	p.PortsActive(t)
	w, err := connect(ctx, p, seq)
	if err != nil {
		t.Fatalf("%s: connecting with no fault: %v", name, err)
	}
	end := f.apply(t, p)
	start := time.Now()
	checked, err := w.run(ctx)
	took := time.Since(start)
	end()
	w.close(ctx)
	switch {
	case f.want == nil && err != nil:
		t.Errorf("%s under %s: %v (after %d bytes checked, %v)", name, f.name, err, checked, took)
	case f.want == nil:
		t.Logf("%s under %s: completed, %d bytes checked, %v", name, f.name, checked, took.Round(time.Millisecond))
	case err == nil:
		t.Errorf("%s under %s: completed (%d bytes checked, %v), want a failure with %v", name, f.name, checked, took, f.want)
	default:
		ok := false
		for _, want := range f.want {
			ok = ok || errors.Is(err, want)
		}
		if !ok || strings.Contains(err.Error(), badData) {
			t.Errorf("%s under %s: %v, want one of %v", name, f.name, err, f.want)
		} else {
			t.Logf("%s under %s: failed as expected after %v (%d bytes checked before): %v", name, f.name, took.Round(time.Millisecond), checked, err)
		}
	}
}
