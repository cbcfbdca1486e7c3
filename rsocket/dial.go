package rsocket

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rdmacm"
)

// Dialer connects to rsocket listeners (C's rconnect). The zero value
// dials with DefaultConfig's sizes and no fallback.
type Dialer struct {
	// Config sets the connection's queues and buffers; zero fields take
	// DefaultConfig's.
	Config Config
	// LocalAddr is the source address; nil lets the route choose (the
	// port is ignored: rdma_cm picks it).
	LocalAddr *net.TCPAddr
	// Timeout bounds the whole dial, as net.Dialer's; 0 means none
	// beyond the context's.
	Timeout time.Duration
	// FallbackTCP dials plain TCP when the address has no RDMA route:
	// no RDMA device reaches it, or the machine has no RDMA at all (the
	// errors that match ErrNoRoute; a refused or failed RDMA connection
	// is not retried over TCP). DialContext then returns a *net.TCPConn
	// instead of a *Conn, and logs at info level through Logger which
	// transport it used; a caller tells them apart with a type switch.
	FallbackTCP bool
	// Logger receives the fallback's message; nil means slog.Default().
	Logger *slog.Logger
}

// Dial connects to address over rsockets with the default Dialer.
// network is "tcp", "tcp4" or "tcp6"; address is "host:port".
func Dial(ctx context.Context, network, address string) (*Conn, error) {
	var d Dialer
	return d.dial(ctx, network, address)
}

// DialContext connects to address (see Dial). With FallbackTCP it may
// return a *net.TCPConn; otherwise the net.Conn is a *Conn.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.dial(ctx, network, address)
	if err == nil {
		return c, nil
	}
	if !d.FallbackTCP || !errors.Is(err, ErrNoRoute) {
		return nil, err
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	nd := net.Dialer{Timeout: d.Timeout}
	if d.LocalAddr != nil {
		nd.LocalAddr = &net.TCPAddr{IP: d.LocalAddr.IP, Zone: d.LocalAddr.Zone}
	}
	tc, terr := nd.DialContext(ctx, network, address)
	if terr != nil {
		return nil, fmt.Errorf("%w; TCP fallback: %w", err, terr)
	}
	log.Info("rsocket: no RDMA route, connected over TCP", "address", address, "reason", err)
	return tc, nil
}

// ErrNoRoute is what a dial to an address that no RDMA device reaches
// fails with (besides matching the kernel's errno); Dialer.FallbackTCP
// dials TCP then.
var ErrNoRoute = errors.New("rsocket: no RDMA route to the address")

type noRouteError struct{ err error }

func (e *noRouteError) Error() string        { return "no RDMA route: " + e.err.Error() }
func (e *noRouteError) Unwrap() error        { return e.err }
func (e *noRouteError) Is(target error) bool { return target == ErrNoRoute }

func (d *Dialer) dial(ctx context.Context, network, address string) (*Conn, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "rsocket", Addr: tcpAddr(address), Err: err}
	}
	cfg, err := d.Config.resolved()
	if err != nil {
		return nil, opErr(err)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	dst, err := resolve(ctx, network, address, false)
	if err != nil {
		return nil, opErr(err)
	}
	var src netip.AddrPort
	if d.LocalAddr != nil {
		if a, ok := netip.AddrFromSlice(d.LocalAddr.IP); ok {
			src = netip.AddrPortFrom(a.Unmap(), 0)
		}
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		// No rdma_cm (no RDMA driver, no /dev/infiniband): no route.
		return nil, opErr(&noRouteError{err})
	}
	c, err := connect(ctx, id, src, dst, cfg)
	if err != nil {
		id.Close()
		return nil, opErr(err)
	}
	return c, nil
}

// connect resolves, sets up the endpoint and connects (rs_do_connect).
func connect(ctx context.Context, id *rdmacm.ID, src, dst netip.AddrPort, cfg Config) (*Conn, error) {
	// Address and route resolution: the kernel's timeout is what is
	// left of ctx's deadline, or rdmacm.DefaultResolveTimeout.
	if err := id.Resolve(ctx, src, dst); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &noRouteError{fmt.Errorf("resolve %v: %w", dst, err)}
	}
	c, err := setup(id, cfg)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.freeVerbs()
		}
	}()
	p := &rdmacm.ConnParam{PrivateData: c.localData(), FlowControl: true, RetryCount: 7, RNRRetryCount: 7}
	if c.msgSend {
		// As C on iWARP, whose connection setup may issue an RDMA READ
		// (rs_do_connect's work-around).
		p.InitiatorDepth = 1
	}
	ev, err := id.ConnectContext(ctx, p)
	if err != nil {
		var ee *rdmacm.EventError
		if errors.As(err, &ee) && ee.Event != nil && ee.Event.Refused() {
			return nil, fmt.Errorf("connection refused by %v: %w", dst, sys.ErrConnRefused)
		}
		return nil, err
	}
	peer, err := parseConnData(ev.PrivateData)
	if err != nil {
		id.Disconnect()
		return nil, err
	}
	c.start(peer)
	if c.msgSend {
		// Send first, as MPA wants of the initiator: the acceptor waits
		// for it (quiet). The first credit update goes at once, and
		// again if the peer stays silent (nudgeDelays).
		c.mu.Lock()
		c.hide = testHooks.hideFirstSends
		c.dialed = true
		c.progress()
		c.nudger = time.AfterFunc(nudgeDelays[0], c.nudge)
		c.mu.Unlock()
	}
	ok = true
	return c, nil
}

// resolve turns "host:port" into an address, the first the resolver
// gives for network. An empty host is the unspecified address when
// listening.
func resolve(ctx context.Context, network, address string, listen bool) (netip.AddrPort, error) {
	var want6, want4 bool
	switch network {
	case "tcp":
		want4, want6 = true, true
	case "tcp4":
		want4 = true
	case "tcp6":
		want6 = true
	default:
		return netip.AddrPort{}, net.UnknownNetworkError(network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := net.DefaultResolver.LookupPort(ctx, network, portStr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		if !listen {
			host = "127.0.0.1"
			if !want4 {
				host = "::1"
			}
		} else if want4 {
			return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), nil
		} else {
			return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(port)), nil
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if (a.Is4() && !want4) || (a.Is6() && !want6) {
			return netip.AddrPort{}, &net.AddrError{Err: "address of the wrong family for " + network, Addr: host}
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for _, a := range ips {
		a = a.Unmap()
		if (a.Is4() && want4) || (a.Is6() && want6) {
			return netip.AddrPortFrom(a, uint16(port)), nil
		}
	}
	return netip.AddrPort{}, &net.AddrError{Err: "no address of " + network, Addr: host}
}

func tcpAddr(address string) net.Addr {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(p)))
}

// ListenConfig listens for rsocket connections with a Config.
type ListenConfig struct {
	// Config sets each accepted connection's queues and buffers.
	Config Config
	// Backlog is the rdma_cm listen backlog; 0 means 1024.
	Backlog int
	// Logger receives connections refused before Accept returns them
	// (bad connect data); nil means slog.Default().
	Logger *slog.Logger
}

// Listen listens on address ("host:port"; an empty host is every
// address) for rsocket connections. network is "tcp", "tcp4" or "tcp6".
func Listen(ctx context.Context, network, address string) (*Listener, error) {
	var lc ListenConfig
	return lc.Listen(ctx, network, address)
}

// Listen listens as the package's Listen, with lc's settings.
func (lc *ListenConfig) Listen(ctx context.Context, network, address string) (*Listener, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "listen", Net: "rsocket", Addr: tcpAddr(address), Err: err}
	}
	cfg, err := lc.Config.resolved()
	if err != nil {
		return nil, opErr(err)
	}
	ap, err := resolve(ctx, network, address, true)
	if err != nil {
		return nil, opErr(err)
	}
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, opErr(err)
	}
	if network == "tcp6" {
		id.SetAFOnly(true)
	}
	if err := id.Bind(ap); err != nil {
		id.Close()
		return nil, opErr(err)
	}
	backlog := lc.Backlog
	if backlog <= 0 {
		backlog = 1024
	}
	if err := id.Listen(backlog); err != nil {
		id.Close()
		return nil, opErr(err)
	}
	l := &Listener{id: id, cfg: cfg, log: lc.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	if a, err := id.LocalAddr(); err == nil {
		l.addr = net.TCPAddrFromAddrPort(a)
	} else {
		l.addr = net.TCPAddrFromAddrPort(ap)
	}
	l.life, l.end = context.WithCancel(context.Background())
	return l, nil
}

// Listener accepts rsocket connections: a net.Listener. Accept may be
// called from several goroutines (they take turns); Close wakes them.
type Listener struct {
	id     *rdmacm.ID
	cfg    Config
	log    *slog.Logger
	addr   *net.TCPAddr
	life   context.Context
	end    context.CancelFunc
	closed atomic.Bool
	mu     sync.Mutex // one GetRequest at a time
}

// Accept waits for the next connection and returns it (a *Conn).
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptContext(context.Background())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptContext is Accept that also ends when ctx does.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: err}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.life, cancel)
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if l.closed.Load() {
			return nil, opErr(net.ErrClosed)
		}
		ev, err := l.id.GetRequest(ctx)
		if err != nil {
			if l.closed.Load() {
				return nil, opErr(net.ErrClosed)
			}
			if ctx.Err() != nil {
				return nil, opErr(ctx.Err())
			}
			return nil, opErr(err)
		}
		c, err := l.accept(ctx, ev)
		if err != nil {
			if ctx.Err() != nil && l.closed.Load() {
				return nil, opErr(net.ErrClosed)
			}
			l.log.Info("rsocket: connection refused", "listener", l.addr, "error", err)
			continue
		}
		return c, nil
	}
}

// accept answers one connect request (raccept).
func (l *Listener) accept(ctx context.Context, ev *rdmacm.Event) (*Conn, error) {
	id := ev.ID
	peer, err := parseConnData(ev.PrivateData)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	c, err := setup(id, l.cfg)
	if err != nil {
		id.Reject(nil)
		id.Close()
		return nil, err
	}
	p := &rdmacm.ConnParam{
		PrivateData:        c.localData(),
		ResponderResources: ev.Conn.ResponderResources,
		InitiatorDepth:     ev.Conn.InitiatorDepth,
		FlowControl:        ev.Conn.FlowControl,
		RetryCount:         ev.Conn.RetryCount,
		RNRRetryCount:      ev.Conn.RNRRetryCount,
	}
	if _, err := id.AcceptContext(ctx, p); err != nil {
		c.freeVerbs()
		id.Close()
		return nil, err
	}
	c.quiet = c.msgSend
	c.start(peer)
	return c, nil
}

// Close stops listening; Accept returns net.ErrClosed. Connections
// already accepted stay open; requests not yet accepted are refused.
func (l *Listener) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return &net.OpError{Op: "close", Net: "rsocket", Addr: l.addr, Err: net.ErrClosed}
	}
	l.end()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.id.Close(); err != nil {
		return &net.OpError{Op: "close", Net: "rsocket", Addr: l.addr, Err: err}
	}
	return nil
}

// Addr is the listening address, a *net.TCPAddr.
func (l *Listener) Addr() net.Addr { return l.addr }
