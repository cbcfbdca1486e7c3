package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
)

// BenchmarkConnect measures one whole RC connection on rxe1 -> rxe0 with
// the blocking calls: create the ID, resolve address and route, create
// the QP, connect (the server accepts with a QP of its own), disconnect,
// close.
func BenchmarkConnect(b *testing.B) {
	testenv.Devices(b, 2)
	l, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if err := l.Bind(serverAddr); err != nil {
		b.Fatal(err)
	}
	if err := l.Listen(0); err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			for {
				req, err := l.GetRequest(ctx)
				if errors.Is(err, context.Canceled) {
					return nil
				}
				if err != nil {
					return err
				}
				s := req.ID
				if _, err := s.CreateQP(nil, qpConfig()); err == nil {
					if _, err = s.AcceptContext(ctx, nil); err == nil {
						_, err = s.Channel().Next(ctx) // DISCONNECTED
					}
				}
				s.Close() // answers the client's disconnect
				if err != nil && ctx.Err() == nil {
					return err
				}
			}
		}()
	}()
	for b.Loop() {
		c, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Resolve(ctx, clientAP, serverAddr); err != nil {
			b.Fatal(err)
		}
		if _, err := c.CreateQP(nil, qpConfig()); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ConnectContext(ctx, nil); err != nil {
			b.Fatal(err)
		}
		if err := c.DisconnectContext(ctx); err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	stop()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
}

// connectMany sets up n RC connections from rxe1 to a listener on rxe0
// at once, all events of each side on one channel, then disconnects
// them: what librdmacm's cmtime measures.
func connectMany(b *testing.B, ctx context.Context, addr netip.AddrPort, n int) {
	cch, err := rdmacm.NewEventChannel()
	if err != nil {
		b.Fatal(err)
	}
	defer cch.Close()
	for range n {
		id, err := rdmacm.CreateID(cch, rdmacm.PortSpaceTCP)
		if err != nil {
			b.Fatal(err)
		}
		if err := id.ResolveAddr(clientAP, addr, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	established, closed := 0, 0
	var ids []*rdmacm.ID
	for closed < n {
		ev, err := cch.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := ev.Err(); err != nil {
			b.Fatalf("%v: %v", ev, err)
		}
		switch ev.Type {
		case rdmacm.EventAddrResolved:
			err = ev.ID.ResolveRoute(5 * time.Second)
		case rdmacm.EventRouteResolved:
			if _, err = ev.ID.CreateQP(nil, qpConfig()); err == nil {
				err = ev.ID.Connect(nil)
			}
		case rdmacm.EventEstablished:
			ids = append(ids, ev.ID)
			if established++; established == n {
				for _, id := range ids {
					if err := id.Disconnect(); err != nil {
						b.Fatal(err)
					}
				}
			}
		case rdmacm.EventDisconnected:
			closed++
			err = ev.ID.Close()
		}
		if err != nil {
			b.Fatalf("on %v: %v", ev, err)
		}
	}
}

// serveMany accepts and answers disconnects on a channel of its own
// until ctx ends.
func serveMany(ctx context.Context, l *rdmacm.ID) error {
	for {
		ev, err := l.Channel().Next(ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		switch ev.Type {
		case rdmacm.EventConnectRequest:
			if _, err := ev.ID.CreateQP(nil, qpConfig()); err != nil {
				return err
			}
			if err := ev.ID.Accept(nil); err != nil {
				return err
			}
		case rdmacm.EventDisconnected:
			if err := ev.ID.Close(); err != nil {
				return err
			}
		}
	}
}

// BenchmarkConnectMany sets up and tears down 50 connections at once per
// operation: "go" with this package, "cmtime" with librdmacm's cmtime
// (its client's run, process start included), for a ratio in one boot.
func BenchmarkConnectMany(b *testing.B) {
	testenv.Devices(b, 2)
	const n = 50
	b.Run("go", func(b *testing.B) {
		ch, err := rdmacm.NewEventChannel()
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		l, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Bind(netip.AddrPortFrom(serverIP, 0)); err != nil {
			b.Fatal(err)
		}
		if err := l.Listen(0); err != nil {
			b.Fatal(err)
		}
		addr, err := l.LocalAddr()
		if err != nil {
			b.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- serveMany(ctx, l) }()
		for b.Loop() {
			connectMany(b, ctx, addr, n)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/conn")
		stop()
		if err := <-served; err != nil {
			b.Fatal(err)
		}
	})
	b.Run("cmtime", func(b *testing.B) {
		path, err := exec.LookPath("cmtime")
		if err != nil {
			if testenv.RequireDevice() {
				b.Fatal(err)
			}
			b.Skip("cmtime (rdmacm-utils) is not installed")
		}
		srv := exec.Command(path, "-b", serverIP.String(), "-p", "17472")
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			srv.Process.Kill()
			srv.Wait()
		}()
		time.Sleep(500 * time.Millisecond) // until it listens
		for b.Loop() {
			out, err := exec.Command(path, "-s", serverIP.String(), "-b", clientIP.String(), "-p", "17472", "-c", strconv.Itoa(n)).CombinedOutput()
			if err != nil {
				b.Fatalf("cmtime: %v\n%s", err, out)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/conn")
	})
}
