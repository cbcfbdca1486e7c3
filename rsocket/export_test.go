package rsocket

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
