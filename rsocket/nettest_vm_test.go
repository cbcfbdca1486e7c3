package rsocket_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/purerdma/rdma/rsocket"
	"github.com/purerdma/rdma/testenv"
)

// TestNetConn runs golang.org/x/net/nettest's conformance suite for
// net.Conn implementations (the one the standard library's connections
// pass): basic I/O, ping-pong, racing reads and writes, closes across
// blocked calls, deadlines past, future and changing, concurrent
// methods.
//
//purerdma:race
func TestNetConn(t *testing.T) {
	testenv.NeedFabric(t)
	l := listen(t, rsocket.Config{})
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		type accepted struct {
			c   *rsocket.Conn
			err error
		}
		acc := make(chan accepted, 1)
		go func() {
			s, err := l.AcceptContext(ctx)
			acc <- accepted{s, err}
		}()
		c, err := dialer(rsocket.Config{}).DialContext(ctx, "tcp", l.Addr().String())
		a := <-acc
		if err != nil || a.err != nil {
			if c != nil {
				c.Close()
			}
			if a.c != nil {
				a.c.Close()
			}
			return nil, nil, nil, errors.Join(err, a.err)
		}
		s := a.c
		return c, s, func() { c.Close(); s.Close() }, nil
	})
}
