package rsocket_test

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"

	"github.com/purerdma/rdma/rsocket"
)

// TestNetConn runs golang.org/x/net/nettest's conformance suite for
// net.Conn implementations (the one the standard library's connections
// pass): basic I/O, ping-pong, racing reads and writes, closes across
// blocked calls, deadlines past, future and changing, concurrent
// methods.
func TestNetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c, s := pair(t, rsocket.Config{})
		return c, s, func() { c.Close(); s.Close() }, nil
	})
}
