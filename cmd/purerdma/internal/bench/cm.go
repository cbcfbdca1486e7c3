package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	perf "github.com/purerdma/rdma/internal/bench"
	"github.com/purerdma/rdma/rdmacm"
)

// benchRunCM is benchRun with -R: the QPs are connected through the
// rdma_cm (as perftest's -R), which iWARP devices need, on the TCP
// port after the exchange's (iWARP's connection manager listens on a
// real TCP port). The device is the one the addresses route to. The
// exchange, the run and the results are those of benchRun.
//
// The server listens on the rdma_cm before it accepts the exchange's
// TCP connection, so that a client that reached the exchange finds the
// listener; the client connects its QP once the exchange is up.
func benchRunCM(ctx context.Context, cfg *benchConfig) (_ *perf.Result, err error) {
	fail := func(err error) error { return fmt.Errorf("bench %v: %w", cfg.test, err) }
	local := netip.IPv4Unspecified()
	if cfg.bind != "" {
		if local, err = netip.ParseAddr(cfg.bind); err != nil {
			return nil, fail(fmt.Errorf("-b %q: not an IP address", cfg.bind))
		}
	}
	cmPort := uint16(cfg.tcpPort + 1)
	var listener *rdmacm.ID
	if cfg.server == "" {
		if listener, err = rdmacm.CreateID(nil, rdmacm.PortSpaceTCP); err != nil {
			return nil, fail(err)
		}
		defer func() {
			if listener != nil {
				listener.Close()
			}
		}()
		if err := listener.Bind(netip.AddrPortFrom(local, cmPort)); err != nil {
			return nil, fail(fmt.Errorf("rdma_cm bind to %v: %w", netip.AddrPortFrom(local, cmPort), err))
		}
		if err := listener.Listen(1); err != nil {
			return nil, fail(err)
		}
	}
	conn, err := benchDial(ctx, cfg)
	if err != nil {
		return nil, fail(err)
	}
	defer func() {
		if cerr := conn.Close(); err == nil && cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fail(cerr)
		}
	}()

	var id *rdmacm.ID
	if listener != nil {
		req, err := listener.GetRequest(ctx)
		if err != nil {
			return nil, fail(fmt.Errorf("waiting for the client's rdma_cm connection: %w", err))
		}
		id = req.ID
		cerr := listener.Close()
		listener = nil
		if cerr != nil {
			id.Close()
			return nil, fail(cerr)
		}
	} else {
		dst, err := benchServerAddr(ctx, cfg.server)
		if err != nil {
			return nil, fail(err)
		}
		if id, err = rdmacm.CreateID(nil, rdmacm.PortSpaceTCP); err != nil {
			return nil, fail(err)
		}
		src := netip.AddrPort{}
		if cfg.bind != "" {
			src = netip.AddrPortFrom(local, 0)
		}
		if err := id.Resolve(ctx, src, netip.AddrPortFrom(dst, cmPort)); err != nil {
			id.Close()
			return nil, fail(fmt.Errorf("rdma_cm resolve %v: %w", netip.AddrPortFrom(dst, cmPort), err))
		}
	}
	ep, err := openBenchEndpointCM(cfg, id)
	if err != nil {
		if cfg.server == "" {
			id.Reject(nil)
		}
		id.Close()
		return nil, fail(err)
	}
	defer func() {
		id.Disconnect()
		if cerr := ep.close(); err == nil && cerr != nil {
			err = fail(cerr)
		}
	}()
	p := &rdmacm.ConnParam{ResponderResources: uint8(ep.outReads), InitiatorDepth: uint8(ep.outReads),
		RetryCount: benchRetryCount, RNRRetryCount: benchRNRRetry}
	if cfg.server == "" {
		_, err = id.AcceptContext(ctx, p)
	} else {
		_, err = id.ConnectContext(ctx, p)
	}
	if err != nil {
		return nil, fail(fmt.Errorf("rdma_cm connect: %w", err))
	}
	res, err := runBench(ctx, cfg, conn, ep)
	if err != nil {
		return nil, fail(err)
	}
	return res, nil
}

// benchServerAddr is the IP address of the server argument (host or
// host:port).
func benchServerAddr(ctx context.Context, server string) (netip.Addr, error) {
	host := server
	if h, _, err := net.SplitHostPort(server); err == nil {
		host = h
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return netip.Addr{}, err
	}
	return addrs[0], nil
}

// openBenchEndpointCM creates the run's objects on the context of id, a
// resolved client ID or a server's new connection, with the QP made by
// the rdma_cm (which moves it through INIT, RTR and RTS as the
// connection comes up). id is closed with the endpoint.
func openBenchEndpointCM(cfg *benchConfig, id *rdmacm.ID) (_ *benchEndpoint, err error) {
	ep := &benchEndpoint{port: id.Port(), rxDepth: cfg.rxDepth(), cm: true}
	ep.closers = append(ep.closers, id.Close)
	defer func() {
		if err != nil {
			ep.closers = ep.closers[1:] // the caller closes id
			ep.close()
		}
	}()
	if ep.ctx, err = id.Context(); err != nil {
		return nil, err
	}
	if err := ep.create(cfg, id.CreateQP); err != nil {
		return nil, err
	}
	return ep, nil
}
