// Package ping is "purerdma ping": rping's RDMA read/write ping over the
// rdma_cm, as server or client.
//
// It is rdma-core's rping (librdmacm/examples/rping.c) in Go: the same
// flags, connection set-up over the rdma_cm, queue sizes, buffers and
// messages, so either end can be the C tool. Each ping, the client
// advertises a buffer holding "rdma-ping-N: " and a rotating pattern
// (struct rping_rdma_info: address, rkey, size); the server RDMA-reads
// it and answers "go ahead"; the client advertises a second buffer; the
// server RDMA-writes what it read into it and answers "go ahead" again;
// the client may compare the two buffers (-V) and print the echo (-v).
// After -C pings the client disconnects, and the server ends on that
// disconnect with status 0.
//
// Each connection runs on one goroutine that waits for completions on a
// completion channel (rping's cq thread), plus one that watches the
// connection's rdma_cm events (rping's cm thread) and ends the first on
// a disconnect. With -P the server serves every connection on its own
// pair of goroutines until it is stopped.
//
// Differences from rping: -d writes to stderr, not stdout; a bad command
// line exits with 2 and an error with 1 (rping returns EINVAL, -1 and the
// like); a client whose server disconnects before -C pings fails (rping
// exits 0 then); a server refuses a client whose buffer is bigger than
// its own -S (rping's RDMA read then fails with a local protection
// error); flags that do not apply to the side (-I on a server, -P on a
// client) are errors, not ignored; the one-connection server stops
// listening once a client has connected, so later clients are refused
// at once instead of waiting; the connection retries an unacknowledged
// packet 6 times after rdmacm.DefaultAckTimeout each (rping: 7 times
// after the kernel's timeout, which soft-RoCE takes as for ever), so
// sends to a dead peer fail after about 4 s instead of never
// (docs/reliability.md). As in rping, a server ignores -C and -V.
package ping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// Command is "purerdma ping".
var Command = cli.Command{
	Name: "ping",
	Usage: "  ping -s|-c [-vVdPq] [-a ADDR] [-I ADDR]  rping's RDMA read/write ping over the rdma_cm, as server or\n" +
		"       [-p PORT] [-C COUNT] [-S SIZE]      client; either end may be rdma-core's rping; -json prints a\n" +
		"       [-json]                             summary as JSON; ping -h lists the flags\n",
	Help: pingHelp,
	Run:  pingCmd,
	JSON: rpSummaryJSON{},
}

// rpOptions are the command line of one run.
type rpOptions struct {
	server     bool   // -s; else -c
	addr       string // -a: the server's bind address, the client's destination
	source     string // -I: the client's source address
	port       int    // -p
	count      int    // -C; 0 for ever
	size       int    // -S
	verbose    bool   // -v
	validate   bool   // -V
	debug      bool   // -d
	persistent bool   // -P
	selfQP     bool   // -q
	json       bool   // -json: only a summary, as JSON
}

const pingHelp = `Usage:
  purerdma ping -s [-vVdPq] [-json] [-S size] [-C count] [-a addr] [-p port]
  purerdma ping -c [-vVdq] [-json] [-S size] [-C count] [-I addr] -a addr [-p port]

Options:
  -c          client side
  -I addr     source address to bind to for the client
  -s          server side; without -a on every address (IPv6's any: -a ::)
  -v          display ping data to stdout
  -V          validate ping data (client)
  -d          debug messages to stderr
  -S size     ping data size (23 to 65535, default 64)
  -C count    ping count times (client; 0, the default, pings until stopped)
  -a addr     address: where the server listens, where the client connects
  -p port     port (default 7174)
  -P          persistent server: serve connections concurrently until stopped
  -q          use a self-created, self-modified QP
  -json       print only a summary of the connection, as one JSON object
              (also --json): role, server, size, pings, validated, seconds,
              usec_per_ping; not with -v (the ping data) or -P (no end)

Examples:
  purerdma ping -s -a 198.18.0.1 -p 7174
  purerdma ping -c -a 198.18.0.1 -p 7174 -C 10 -v -V
  purerdma ping -c -a 198.18.0.1 -C 100 -V -json
`

// rpSummaryJSON is the summary "ping -json" prints at the end of a
// connection that succeeded.
type rpSummaryJSON struct {
	Role      string  `json:"role"`      // server or client
	Server    string  `json:"server"`    // the server's address and port, as the client resolved it or the server listened
	Size      int     `json:"size"`      // bytes of ping data (the client's -S; at the server, what the client advertised)
	Pings     int     `json:"pings"`     // completed pings
	Validated bool    `json:"validated"` // -V: the client compared every echo with what it sent
	Seconds   float64 `json:"seconds"`   // from the first ping to the last (to the disconnect at the server)
	USecPing  float64 `json:"usec_per_ping"`
}

// printSummary prints the -json summary of a connection that made n
// pings of size bytes in d.
func (o *rpOut) printSummary(role string, server netip.AddrPort, size, n int, validated bool, d time.Duration) error {
	us := float64(d.Nanoseconds()) / 1e3
	s := rpSummaryJSON{Role: role, Server: server.String(), Size: size, Pings: n, Validated: validated, Seconds: us / 1e6}
	if n > 0 {
		s.USecPing = us / float64(n)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return cli.WriteJSON(o.stdout, s)
}

func pingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parsePingArgs(args)
	if err != nil {
		return err
	}
	out := &rpOut{stdout: stdout, stderr: stderr, debug: o.debug}
	if o.server {
		return runPingServer(ctx, &o, out)
	}
	return runPingClient(ctx, &o, out)
}

// pingOpts is rping's getopt ("a:I:Pp:C:S:scvVdq").
var pingOpts = []cli.Opt{{Short: 'a', HasArg: true}, {Short: 'I', HasArg: true}, {Short: 'P'}, {Short: 'p', HasArg: true},
	{Short: 'C', HasArg: true}, {Short: 'S', HasArg: true}, {Short: 's'}, {Short: 'c'}, {Short: 'v'}, {Short: 'V'}, {Short: 'd'}, {Short: 'q'}}

// parsePingArgs parses rping's command line the way its getopt does
// (cli.Getopt: every argument a flag) and purerdma's -json. Numbers are
// decimal. Everything is checked here, before any kernel call.
func parsePingArgs(args []string) (rpOptions, error) {
	o := rpOptions{port: rpingDefaultPort, size: rpingDefaultSize}
	role := byte(0)
	seen := map[byte]bool{}
	num := func(flag byte, val string) (int, error) {
		n, err := strconv.Atoi(val)
		if err != nil {
			return 0, cli.UsageError("ping: -%c %q: not a decimal number", flag, val)
		}
		return n, nil
	}
	_, err := cli.Getopt{Cmd: "ping", Opts: pingOpts, JSON: &o.json}.Parse(args, func(opt cli.Opt, val string) (err error) {
		f := opt.Short
		seen[f] = true
		switch f {
		case 's', 'c':
			if role != 0 && role != f {
				return cli.UsageError("ping: -s and -c exclude each other")
			}
			role = f
		case 'a':
			o.addr = val
		case 'I':
			o.source = val
		case 'p':
			if o.port, err = num(f, val); err == nil && (o.port < 1 || o.port > 65535) {
				err = cli.UsageError("ping: invalid port %d (valid range is 1 to 65535)", o.port)
			}
		case 'C':
			if o.count, err = num(f, val); err == nil && o.count < 0 {
				err = cli.UsageError("ping: invalid count %d", o.count)
			}
		case 'S':
			if o.size, err = num(f, val); err == nil && (o.size < rpingMinSize || o.size > rpingMaxSize) {
				err = cli.UsageError("ping: invalid size %d (valid range is %d to %d)", o.size, rpingMinSize, rpingMaxSize)
			}
		case 'v':
			o.verbose = true
		case 'V':
			o.validate = true
		case 'd':
			o.debug = true
		case 'P':
			o.persistent = true
		case 'q':
			o.selfQP = true
		}
		return err
	})
	if err != nil {
		return o, err
	}
	switch {
	case role == 0:
		return o, cli.UsageError("ping needs -s (server) or -c (client)")
	case role == 's' && seen['I']:
		return o, cli.UsageError("ping: -I (source address) is for the client")
	case role == 'c' && seen['P']:
		return o, cli.UsageError("ping: -P (persistent server) is for the server")
	case role == 'c' && o.addr == "":
		return o, cli.UsageError("ping: the client needs the server's address (-a)")
	case seen['a'] && o.addr == "", seen['I'] && o.source == "":
		return o, cli.UsageError("ping: empty address")
	case o.json && o.verbose:
		return o, cli.UsageError("ping: -json prints only a summary: it does not go with -v (the ping data)")
	case o.json && o.persistent:
		return o, cli.UsageError("ping: -json prints one connection's summary: it does not go with -P (a server that runs until stopped)")
	}
	o.server = role == 's'
	return o, nil
}

// rpOut is where the runs print; its lines stay whole when the
// connections of a persistent server print at once.
type rpOut struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	debug          bool
}

func (o *rpOut) printf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.stdout, format, args...)
}

func (o *rpOut) errorf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.stderr, format, args...)
}

// debugf is rping's DEBUG_LOG, to stderr.
func (o *rpOut) debugf(format string, args ...any) {
	if o.debug {
		o.errorf(format, args...)
	}
}

// lookupAddr resolves an -a or -I value: an IP address, or a host name
// (the first of its addresses, as rping's getaddrinfo).
func lookupAddr(ctx context.Context, flag, s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ping: %s %s: invalid hostname or IP address: %w", flag, s, err)
	}
	return addrs[0].Unmap(), nil
}

func runPingClient(ctx context.Context, o *rpOptions, out *rpOut) (err error) {
	dst, err := lookupAddr(ctx, "-a", o.addr)
	if err != nil {
		return err
	}
	var src netip.AddrPort
	if o.source != "" {
		a, err := lookupAddr(ctx, "-I", o.source)
		if err != nil {
			return err
		}
		if a.Is4() != dst.Is4() {
			return fmt.Errorf("ping: source address %v (-I) and destination %v (-a) are of different families", a, dst)
		}
		src = netip.AddrPortFrom(a, 0)
	}
	ap := netip.AddrPortFrom(dst, uint16(o.port))
	if err := devs.CheckCM(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer cli.CloseErr(&err, id.Close)
	out.debugf("created cm_id %d\n", id.Handle())
	if err := id.Resolve(ctx, src, ap); err != nil {
		return fmt.Errorf("ping: resolve %v: %w", ap, err)
	}
	out.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")
	c, err := newRPConn(id, o, out, false)
	if err != nil {
		return err
	}
	defer cli.CloseErr(&err, c.close)
	if err := c.connect(ctx, ap); err != nil {
		return err
	}
	connCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := c.watch(connCtx, cancel)
	start := time.Now()
	n, err := c.pingLoop(connCtx)
	elapsed := time.Since(start)
	stop()
	if errors.Is(err, errPeerDisconnected) {
		err = nil // rping's client ends with 0 when its server disconnects
		if o.count != 0 {
			err = fmt.Errorf("ping: the server disconnected after %d of %d pings", n, o.count)
		}
	}
	c.disconnect()
	if err == nil && o.json {
		err = out.printSummary("client", ap, o.size, n, o.validate, elapsed)
	}
	return err
}

func runPingServer(ctx context.Context, o *rpOptions, out *rpOut) (err error) {
	addr := netip.IPv4Unspecified() // rping's zeroed sockaddr_in
	if o.addr != "" {
		if addr, err = lookupAddr(ctx, "-a", o.addr); err != nil {
			return err
		}
	}
	ap := netip.AddrPortFrom(addr, uint16(o.port))
	// Without a device the rdma_cm would listen on the any address and
	// wait for ever for a client it could not serve.
	if err := devs.CheckCM(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	listening := true
	closeListener := func() error {
		if !listening {
			return nil
		}
		listening = false
		return l.Close()
	}
	defer cli.CloseErr(&err, closeListener)
	out.debugf("created cm_id %d\n", l.Handle())
	if err := l.Bind(ap); err != nil {
		return fmt.Errorf("ping: bind to %v: %w", ap, devs.BindError(ap, err))
	}
	out.debugf("rdma_bind_addr successful\nrdma_listen\n")
	if err := l.Listen(3); err != nil {
		return fmt.Errorf("ping: listen on %v: %w", ap, err)
	}
	if !o.persistent {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return fmt.Errorf("ping: wait for a connection on %v: %w", ap, err)
		}
		if err := closeListener(); err != nil {
			req.ID.Close()
			return fmt.Errorf("ping: stop listening: %w", err)
		}
		return serveRPing(ctx, req, o, out, ap)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // before the listener closes
	for {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return fmt.Errorf("ping: wait for a connection on %v: %w", ap, err)
		}
		wg.Go(func() {
			peer, _ := req.ID.RemoteAddr()
			if err := serveRPing(ctx, req, o, out, ap); err != nil {
				out.errorf("purerdma: ping: connection from %v: %v\n", peer, err)
			}
		})
	}
}

// serveRPing serves the connection of one request to a server listening
// on ap and closes its ID.
func serveRPing(ctx context.Context, req *rdmacm.Event, o *rpOptions, out *rpOut, ap netip.AddrPort) (err error) {
	id := req.ID
	defer cli.CloseErr(&err, id.Close)
	out.debugf("cma_event type %v cma_id %d (child)\n", req.Type, id.Handle())
	c, err := newRPConn(id, o, out, true)
	if err != nil {
		id.Reject(nil) // the client learns at once; nothing to add to err
		return err
	}
	defer cli.CloseErr(&err, c.close)
	if err := c.accept(ctx); err != nil {
		return err
	}
	connCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := c.watch(connCtx, cancel)
	start := time.Now()
	n, err := c.serveLoop(connCtx)
	elapsed := time.Since(start)
	stop()
	c.disconnect()
	if !errors.Is(err, errPeerDisconnected) {
		return err
	}
	// How a server's run ends.
	if o.json {
		return out.printSummary("server", ap, c.pingSize, n, false, elapsed)
	}
	return nil
}

// errPeerDisconnected is the cause a connection's context ends with when
// the peer disconnects.
var errPeerDisconnected = errors.New("the peer disconnected")

// rpConn is one end of a connection: rping's control block.
type rpConn struct {
	o      *rpOptions
	out    *rpOut
	id     *rdmacm.ID
	server bool

	pd    *uverbs.PD
	ch    *uverbs.CompChannel
	cq    *uverbs.CQ
	qp    *uverbs.QP
	ownQP bool // -q: the QP is ours to modify and close, not the ID's

	recvBuf, sendBuf  []byte // one rping_rdma_info each
	rdmaBuf, startBuf []byte // the RDMA sink (both sides), the source (client)

	recvMR, sendMR, rdmaMR, startMR *uverbs.MR

	recvSGE, sendSGE, rdmaSGE [1]uverbs.SGE
	recvWR                    uverbs.RecvWR
	sendWR, rdmaWR            uverbs.SendWR
	wc                        [1]uverbs.WorkCompletion

	pingSize int // the server's: bytes of the client's last ping
}

// newRPConn creates what rping_setup_qp and rping_setup_buffers create
// for the ID, in their order, and posts the first receive.
func newRPConn(id *rdmacm.ID, o *rpOptions, out *rpOut, server bool) (*rpConn, error) {
	c := &rpConn{o: o, out: out, id: id, server: server, ownQP: o.selfQP}
	if err := c.setup(); err != nil {
		if cerr := c.close(); cerr != nil {
			err = fmt.Errorf("%w (and closing: %w)", err, cerr)
		}
		return nil, err
	}
	return c, nil
}

func (c *rpConn) setup() error {
	vctx, err := c.id.Context()
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if c.pd, err = vctx.AllocPD(); err != nil {
		return fmt.Errorf("ping: allocate PD: %w", err)
	}
	c.out.debugf("created pd\n")
	if c.ch, err = vctx.CreateCompChannel(); err != nil {
		return fmt.Errorf("ping: create completion channel: %w", err)
	}
	c.out.debugf("created channel\n")
	if c.cq, err = vctx.CreateCQ(uverbs.CQConfig{Size: 2 * rpingSQDepth, Channel: c.ch}); err != nil {
		return fmt.Errorf("ping: create CQ: %w", err)
	}
	c.out.debugf("created cq\n")
	if err := c.cq.RequestNotify(false); err != nil {
		return fmt.Errorf("ping: request CQ notification: %w", err)
	}
	cfg := uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: c.cq, RecvCQ: c.cq,
		Cap: uverbs.QPCap{MaxSendWR: rpingSQDepth, MaxRecvWR: rpingRQDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if c.ownQP {
		if c.qp, err = c.pd.CreateQP(cfg); err != nil {
			return fmt.Errorf("ping: create QP: %w", err)
		}
		attr := &uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: c.id.Port()}
		if err := c.qp.Modify(attr, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			return fmt.Errorf("ping: modify QP to INIT: %w", err)
		}
	} else if c.qp, err = c.id.CreateQP(c.pd, cfg); err != nil {
		return fmt.Errorf("ping: create QP: %w", err)
	}
	c.out.debugf("created qp %#x\n", c.qp.Num())

	c.recvBuf, c.sendBuf = make([]byte, rpingInfoLen), make([]byte, rpingInfoLen)
	if c.recvMR, err = c.pd.RegMR(c.recvBuf, uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("ping: register the receive buffer: %w", err)
	}
	if c.sendMR, err = c.pd.RegMR(c.sendBuf, 0); err != nil {
		return fmt.Errorf("ping: register the send buffer: %w", err)
	}
	// The server's buffer is its RDMA read's target and its write's
	// source; rping registers it for remote access too. The client's
	// is where the server writes the echo.
	c.rdmaBuf = make([]byte, c.o.size)
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	if c.server {
		access |= uverbs.AccessRemoteRead
	}
	if c.rdmaMR, err = c.pd.RegMR(c.rdmaBuf, access); err != nil {
		return fmt.Errorf("ping: register the RDMA buffer: %w", err)
	}
	if !c.server {
		// What the server reads.
		c.startBuf = make([]byte, c.o.size)
		if c.startMR, err = c.pd.RegMR(c.startBuf, uverbs.AccessRemoteRead); err != nil {
			return fmt.Errorf("ping: register the start buffer: %w", err)
		}
	}
	c.recvSGE[0] = uverbs.SGE{Addr: c.recvMR.Addr(), Length: rpingInfoLen, LKey: c.recvMR.LKey()}
	c.recvWR = uverbs.RecvWR{SGL: c.recvSGE[:]}
	c.sendSGE[0] = uverbs.SGE{Addr: c.sendMR.Addr(), Length: rpingInfoLen, LKey: c.sendMR.LKey()}
	c.sendWR = uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: c.sendSGE[:]}
	c.rdmaSGE[0] = uverbs.SGE{Addr: c.rdmaMR.Addr(), LKey: c.rdmaMR.LKey()}
	c.rdmaWR = uverbs.SendWR{Flags: uverbs.SendSignaled, SGL: c.rdmaSGE[:]}
	c.out.debugf("allocated & registered buffers...\n")
	if err := c.qp.PostRecv(&c.recvWR); err != nil {
		return fmt.Errorf("ping: post receive: %w", err)
	}
	return nil
}

// close destroys what setup created, the QP first, and returns the
// first error.
func (c *rpConn) close() error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if c.qp != nil {
		if c.ownQP {
			note(c.qp.Close())
		} else {
			note(c.id.DestroyQP())
		}
	}
	for _, mr := range []*uverbs.MR{c.startMR, c.rdmaMR, c.sendMR, c.recvMR} {
		if mr != nil {
			note(mr.Close())
		}
	}
	if c.cq != nil {
		note(c.cq.Close())
	}
	if c.ch != nil {
		note(c.ch.Close())
	}
	if c.pd != nil {
		note(c.pd.Close())
	}
	if first != nil {
		return fmt.Errorf("ping: close: %w", first)
	}
	return nil
}

// connParam is rping_init_conn_param, one RDMA read in flight each way
// and RNR retries for ever, with rdmacm's default retry count and ACK
// timeout instead of rping's seven retries, which on soft-RoCE never end
// when the peer is dead.
func (c *rpConn) connParam() *rdmacm.ConnParam {
	p := &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1,
		RetryCount: rdmacm.DefaultRetryCount, RNRRetryCount: 7, AckTimeout: rdmacm.DefaultAckTimeout}
	if c.ownQP {
		p.QPNum = c.qp.Num()
	}
	return p
}

// selfModify is rping_self_modify_qp: INIT, RTR and RTS with the
// attributes the rdma_cm computes for the ID.
func (c *rpConn) selfModify() error {
	for _, st := range []uverbs.QPState{uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS} {
		attr, mask, err := c.id.InitQPAttr(st)
		if err != nil {
			return fmt.Errorf("ping: modify QP to %v: %w", st, err)
		}
		if err := c.qp.Modify(attr, mask); err != nil {
			return fmt.Errorf("ping: modify QP to %v: %w", st, err)
		}
	}
	return nil
}

// connect is rping_connect_client.
func (c *rpConn) connect(ctx context.Context, dst netip.AddrPort) error {
	ev, err := c.id.ConnectContext(ctx, c.connParam())
	if err != nil {
		if errors.Is(err, rdmacm.ErrNoListener) {
			return fmt.Errorf("ping: connect to %v: connection refused, no server listens there: %w", dst, err)
		}
		return fmt.Errorf("ping: connect to %v: %w", dst, err)
	}
	c.out.debugf("cma_event type %v cma_id %d (parent)\n", ev.Type, c.id.Handle())
	if c.ownQP {
		if err := c.selfModify(); err != nil {
			return err
		}
		if err := c.id.Establish(); err != nil {
			return fmt.Errorf("ping: establish the connection to %v: %w", dst, err)
		}
	}
	c.out.debugf("rdma_connect successful\n")
	return nil
}

// accept is rping_accept: rping accepts with librdmacm's defaults, or
// with its own parameters for a QP of its own.
func (c *rpConn) accept(ctx context.Context) error {
	c.out.debugf("accepting client connection request\n")
	var p *rdmacm.ConnParam
	if c.ownQP {
		if err := c.selfModify(); err != nil {
			return err
		}
		p = c.connParam()
	}
	ev, err := c.id.AcceptContext(ctx, p)
	if err != nil {
		return fmt.Errorf("ping: accept: %w", err)
	}
	c.out.debugf("cma_event type %v cma_id %d (child)\n", ev.Type, c.id.Handle())
	return nil
}

// disconnect is rping_disconnect; as there, its failure changes nothing.
func (c *rpConn) disconnect() {
	if c.ownQP {
		if err := c.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			c.out.debugf("modify QP to ERR: %v\n", err)
		}
	}
	if err := c.id.Disconnect(); err != nil {
		c.out.debugf("rdma_disconnect: %v\n", err)
	}
}

// watch is rping's cm thread for one connection: it reads the ID's
// events until stop and ends the connection's context on a disconnect
// (cause errPeerDisconnected) or a failure.
func (c *rpConn) watch(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	side, who := "client", "parent"
	if c.server {
		side, who = "server", "child"
	}
	go func() {
		defer close(done)
		for {
			ev, err := c.id.Channel().Next(wctx)
			if err != nil {
				if wctx.Err() == nil {
					cancel(fmt.Errorf("ping: get CM event: %w", err))
				}
				return
			}
			c.out.debugf("cma_event type %v cma_id %d (%s)\n", ev.Type, c.id.Handle(), who)
			switch ev.Type {
			case rdmacm.EventDisconnected:
				c.out.errorf("%s DISCONNECT EVENT...\n", side)
				cancel(errPeerDisconnected)
				return
			case rdmacm.EventDeviceRemoval:
				c.out.errorf("cma detected device removal!!!!\n")
				cancel(fmt.Errorf("ping: %w", &rdmacm.EventError{Event: ev}))
				return
			case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
				rdmacm.EventUnreachable, rdmacm.EventRejected:
				c.out.errorf("cma event %v, error %d\n", ev.Type, ev.Status)
				cancel(fmt.Errorf("ping: %w", &rdmacm.EventError{Event: ev}))
				return
			default:
				c.out.errorf("unhandled event: %v, ignoring\n", ev.Type)
			}
		}
	}()
	return func() {
		wcancel()
		<-done
	}
}

// next waits for the next completion other than a send's and returns
// its opcode, with the message for a receive, which it reposts: rping's
// cq thread and its sem_wait together. Completions are waited for on
// the channel, not polled for.
func (c *rpConn) next(ctx context.Context) (uverbs.WCOpcode, rpingInfo, error) {
	for {
		n, err := c.cq.Poll(c.wc[:])
		if err == nil && n == 0 {
			// Arm, then look again: a completion that came before
			// the arming raises no event.
			if err = c.cq.RequestNotify(false); err == nil {
				n, err = c.cq.Poll(c.wc[:])
			}
		}
		if err != nil {
			return 0, rpingInfo{}, fmt.Errorf("poll CQ: %w", err)
		}
		if n == 0 {
			cq, err := c.ch.Wait(ctx)
			if err != nil {
				return 0, rpingInfo{}, cli.Ended(ctx, fmt.Errorf("get CQ event: %w", err))
			}
			cq.AckEvents(1)
			if cq != c.cq {
				return 0, rpingInfo{}, errors.New("CQ event for an unknown CQ")
			}
			continue
		}
		wc := &c.wc[0]
		if wc.Status == uverbs.WCWRFlushErr {
			// As rping: a flushed request is the connection going
			// down; the DISCONNECTED event ends the wait (ctx). On
			// siw the flush often comes before the event.
			c.out.debugf("%v flushed\n", wc.Opcode)
			continue
		}
		if err := wc.Status.Err(); err != nil {
			return 0, rpingInfo{}, cli.Ended(ctx, fmt.Errorf("%v completion failed: status %d: %w", wc.Opcode, wc.Status, err))
		}
		switch wc.Opcode {
		case uverbs.WCSend:
			c.out.debugf("send completion\n")
		case uverbs.WCRDMARead, uverbs.WCRDMAWrite:
			if wc.Opcode == uverbs.WCRDMARead {
				c.out.debugf("rdma read completion\n")
			} else {
				c.out.debugf("rdma write completion\n")
			}
			return wc.Opcode, rpingInfo{}, nil
		case uverbs.WCRecv:
			c.out.debugf("recv completion\n")
			if wc.ByteLen != rpingInfoLen { // the buffer holds no more
				return 0, rpingInfo{}, fmt.Errorf("received bogus data, size %d (want %d)", wc.ByteLen, rpingInfoLen)
			}
			info, err := parseRPingInfo(c.recvBuf)
			if err != nil {
				return 0, rpingInfo{}, err
			}
			if err := c.qp.PostRecv(&c.recvWR); err != nil {
				return 0, rpingInfo{}, fmt.Errorf("post receive: %w", err)
			}
			return wc.Opcode, info, nil
		default:
			return 0, rpingInfo{}, fmt.Errorf("unexpected %v completion", wc.Opcode)
		}
	}
}

// expect waits for the next completion and checks it is want; what
// names the step for errors.
func (c *rpConn) expect(ctx context.Context, want uverbs.WCOpcode, what string) (rpingInfo, error) {
	op, info, err := c.next(ctx)
	if err != nil {
		return info, err
	}
	if op != want {
		return info, fmt.Errorf("protocol error: a %v completion while waiting for %s", op, what)
	}
	return info, nil
}

// send sends info (rping_format_send and the post of its send WR).
func (c *rpConn) send(info rpingInfo) error {
	m := info.marshal()
	copy(c.sendBuf, m[:])
	if err := c.qp.PostSend(&c.sendWR); err != nil {
		return fmt.Errorf("post send: %w", err)
	}
	return nil
}

// rdma posts an RDMA read or write of n bytes of the RDMA buffer.
func (c *rpConn) rdma(op uverbs.WROpcode, n int, remote rpingInfo) error {
	c.rdmaWR.Opcode, c.rdmaWR.RemoteAddr, c.rdmaWR.RKey = op, remote.Addr, remote.RKey
	c.rdmaSGE[0].Length = uint32(n)
	if err := c.qp.PostSend(&c.rdmaWR); err != nil {
		return fmt.Errorf("post %v: %w", op, err)
	}
	return nil
}

// pingLoop is rping_test_client; it returns how many pings completed.
func (c *rpConn) pingLoop(ctx context.Context) (int, error) {
	size := c.o.size
	for ping := 0; c.o.count == 0 || ping < c.o.count; ping++ {
		if err := c.ping(ctx, ping); err != nil {
			if errors.Is(err, errPeerDisconnected) {
				return ping, err
			}
			return ping, fmt.Errorf("ping: ping %d: %w", ping, err)
		}
		if c.o.validate && !bytes.Equal(c.startBuf, c.rdmaBuf) {
			c.out.errorf("data mismatch!\n")
			return ping, fmt.Errorf("ping: ping %d: data mismatch: sent %q, got back %q", ping, c.startBuf[:size-1], c.rdmaBuf[:size-1])
		}
		if c.o.verbose {
			c.out.printf("ping data: %s\n", cString(c.rdmaBuf))
		}
	}
	return c.o.count, nil
}

// ping is one iteration of the client's side.
func (c *rpConn) ping(ctx context.Context, ping int) error {
	rpingFill(c.startBuf, int64(ping))
	src := rpingInfo{Addr: c.startMR.Addr(), RKey: c.startMR.RKey(), Size: uint32(c.o.size)}
	c.out.debugf("RDMA addr %x rkey %x len %d\n", src.Addr, src.RKey, src.Size)
	if err := c.send(src); err != nil {
		return err
	}
	if _, err := c.expect(ctx, uverbs.WCRecv, "the server's go-ahead after its RDMA read"); err != nil {
		return err
	}
	sink := rpingInfo{Addr: c.rdmaMR.Addr(), RKey: c.rdmaMR.RKey(), Size: uint32(c.o.size)}
	c.out.debugf("RDMA addr %x rkey %x len %d\n", sink.Addr, sink.RKey, sink.Size)
	if err := c.send(sink); err != nil {
		return err
	}
	_, err := c.expect(ctx, uverbs.WCRecv, "the server's go-ahead after its RDMA write")
	return err
}

// serveLoop is rping_test_server: it runs until the client disconnects
// (errPeerDisconnected) or something fails, and returns how many pings
// it served.
func (c *rpConn) serveLoop(ctx context.Context) (int, error) {
	for n := 0; ; n++ {
		if err := c.serve(ctx); err != nil {
			if errors.Is(err, errPeerDisconnected) {
				return n, err
			}
			return n, fmt.Errorf("ping: %w", err)
		}
	}
}

// serve is one iteration of the server's side.
func (c *rpConn) serve(ctx context.Context) error {
	src, err := c.expect(ctx, uverbs.WCRecv, "the client's source advertisement")
	if err != nil {
		return err
	}
	c.out.debugf("Received %v from peer\n", src)
	if src.Size == 0 || int64(src.Size) > int64(len(c.rdmaBuf)) {
		return fmt.Errorf("the client's buffer has %d bytes, this server's (-S) %d", src.Size, len(c.rdmaBuf))
	}
	c.pingSize = int(src.Size)
	if err := c.rdma(uverbs.WRRDMARead, int(src.Size), src); err != nil {
		return err
	}
	c.out.debugf("server posted rdma read req \n")
	if _, err := c.expect(ctx, uverbs.WCRDMARead, "the RDMA read"); err != nil {
		return err
	}
	c.out.debugf("server received read complete\n")
	if c.o.verbose {
		c.out.printf("server ping data: %s\n", cString(c.rdmaBuf))
	}
	var goAhead rpingInfo // rping's server sends its zeroed send buffer
	if err := c.send(goAhead); err != nil {
		return err
	}
	c.out.debugf("server posted go ahead\n")
	sink, err := c.expect(ctx, uverbs.WCRecv, "the client's sink advertisement")
	if err != nil {
		return err
	}
	c.out.debugf("Received %v from peer\n", sink)
	n := min(len(cString(c.rdmaBuf))+1, len(c.rdmaBuf)) // strlen + 1
	if int64(n) > int64(sink.Size) {
		return fmt.Errorf("the client's sink has %d bytes, the echo %d", sink.Size, n)
	}
	c.out.debugf("rdma write from lkey %x laddr %x len %d\n", c.rdmaSGE[0].LKey, c.rdmaSGE[0].Addr, n)
	if err := c.rdma(uverbs.WRRDMAWrite, n, sink); err != nil {
		return err
	}
	if _, err := c.expect(ctx, uverbs.WCRDMAWrite, "the RDMA write"); err != nil {
		return err
	}
	c.out.debugf("server rdma write complete \n")
	if err := c.send(goAhead); err != nil {
		return err
	}
	c.out.debugf("server posted go ahead\n")
	return nil
}
