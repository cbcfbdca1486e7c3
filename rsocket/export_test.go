package rsocket

import "fmt"

// Buffered polls the connection and returns how many bytes it has
// received and not yet handed to Read, so that tests can wait for data
// to arrive without consuming it.
func (c *Conn) Buffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress()
	n := 0
	for i := c.rHead; i != c.rTail; i = (i + 1) % len(c.rmsg) {
		n += int(c.rmsg[i])
	}
	return n
}

// SetMsgSend makes the connections made after it use rsockets' iWARP
// form (4-byte SENDs for messages, the accepting side quiet until the
// connecting side's first message) on any device, and has Dial post its
// first hide SENDs as zero-length RDMA WRITEs that complete but reach
// no receive: the peer never sees them, as with a message siw leaves
// unread. It returns a function that undoes it.
func SetMsgSend(hide int) (restore func()) {
	testHooks.msgSend, testHooks.hideFirstSends = true, hide
	return func() { testHooks.msgSend, testHooks.hideFirstSends = false, 0 }
}

// Hidden is how many of the SENDs SetMsgSend asked to hide are still to
// come on c.
func (c *Conn) Hidden() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hide
}

// Nudges is how many times c sent its credit limit again.
func (c *Conn) Nudges() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nudges
}

// Flushes is how many writes of nothing c posted (flushPeer).
func (c *Conn) Flushes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushes
}

// Internals describes c's iWARP start-up state and counters, for a test
// that reports a connection that stopped moving.
func (c *Conn) Internals() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("msgSend=%v quiet=%v heard=%v nudges=%d flushes=%d ctrl=%d/%d sqeAvail=%d rcv=%d/%d sseq=%d/%d",
		c.msgSend, c.quiet, c.heard, c.nudges, c.flushes, c.ctrlSeq, c.ctrlMax, c.sqeAvail, c.rcvSeq, c.rcvLimit, c.sseqNo, c.sseqComp)
}
