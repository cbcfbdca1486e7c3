package rsocket

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Config sets a connection's queues and buffers, as librdmacm's
// /etc/rdma/rsocket/*_default files and rsetsockopt do for C rsockets. A
// zero field takes the default (DefaultConfig: C's built-in defaults,
// overridden by those files where they exist).
type Config struct {
	// SendQueue and RecvQueue are the QP's send and receive queue
	// sizes (sqsize_default, rqsize_default: 384), clamped to 16-65534
	// and to the device's limit. RecvQueue is also how many messages
	// the peer may have in flight (its credits).
	SendQueue int
	RecvQueue int
	// SendBuffer is the local send buffer (wmem_default: 128 KiB, at
	// least 4 KiB); RecvBuffer the receive buffer the peer writes into
	// (mem_default: 128 KiB), handed out in halves.
	SendBuffer int
	RecvBuffer int
	// Inline is the most bytes sent inline in a work request
	// (inline_default: 64); the device may grant less, or more. A
	// negative value asks for none (C's RDMA_INLINE of 0); on iWARP
	// devices it is at least 4, as in C: a message's SEND goes inline.
	Inline int
	// PollTime is how long a Read or Write that finds nothing to do
	// polls the completion queue before it blocks in the poller
	// (polling_time: 10 µs); a negative value blocks at once.
	PollTime time.Duration
	// BusyPoll makes Read and Write poll the completion queue until
	// they can go on instead of blocking: the latency of rstream's
	// default non-blocking mode, at the price of a CPU per waiting
	// goroutine (paced by spin.Waiter, so the Go scheduler is not
	// starved). Deadlines and Close work as when blocking.
	BusyPoll bool
	// IOMapSize is how many mappings (Conn.IOMap) the peer may offer
	// this side for IOWrite (RDMA_IOMAPSIZE, iomap_size: none by
	// default); a negative value asks for none. Sizes above 128 are
	// rounded down to a multiple of 256, as C does; at most 32512.
	IOMapSize int
}

// C's built-in defaults (rsocket.c).
const (
	defQueue  = 384
	defBuffer = 128 << 10
	defInline = 64
	defPoll   = 10 * time.Microsecond
)

// ConfigDir is where C rsockets read their defaults; DefaultConfig reads
// the same files.
const ConfigDir = "/etc/rdma/rsocket"

// DefaultConfig returns C rsockets' defaults, with the values of
// ConfigDir's files (sqsize_default, rqsize_default, mem_default,
// wmem_default, inline_default, iomap_size, polling_time) where they exist, as librdmacm reads
// them. A file that does not hold a number is an error naming it.
func DefaultConfig() (Config, error) {
	return readConfig(ConfigDir)
}

func readConfig(dir string) (Config, error) {
	c := Config{SendQueue: defQueue, RecvQueue: defQueue, SendBuffer: defBuffer, RecvBuffer: defBuffer, Inline: defInline,
		PollTime: defPoll}
	poll := -1 // polling_time, in microseconds, if the file exists
	for _, f := range []struct {
		name string
		v    *int
		max  int
	}{
		{"sqsize_default", &c.SendQueue, 0xFFFF},
		{"rqsize_default", &c.RecvQueue, 0xFFFF},
		{"mem_default", &c.RecvBuffer, 1 << 31},
		{"wmem_default", &c.SendBuffer, 1 << 31},
		{"inline_default", &c.Inline, 0xFFFF},
		{"iomap_size", &c.IOMapSize, maxIOMap},
		{"polling_time", &poll, 1 << 31},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("rsocket: config: %w", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 0 || n > f.max {
			return c, fmt.Errorf("rsocket: config: %s: %q is not a number from 0 to %d", filepath.Join(dir, f.name), strings.TrimSpace(string(b)), f.max)
		}
		*f.v = n
	}
	switch {
	case poll == 0:
		c.PollTime = -1 // block at once
	case poll > 0:
		c.PollTime = time.Duration(poll) * time.Microsecond
	}
	// C's own adjustments of the files' values.
	c.RecvBuffer = max(c.RecvBuffer, 1)
	if c.SendBuffer < sendLowWater {
		c.SendBuffer = sendLowWater << 1
	}
	return c, nil
}

// resolved fills the zero fields of c from defaults and checks the rest.
func (c Config) resolved() (Config, error) {
	var d Config
	if c.SendQueue == 0 || c.RecvQueue == 0 || c.SendBuffer == 0 || c.RecvBuffer == 0 || c.Inline == 0 || c.IOMapSize == 0 ||
		c.PollTime == 0 {
		var err error
		if d, err = DefaultConfig(); err != nil {
			return c, err
		}
	}
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.SendQueue, d.SendQueue)
	set(&c.RecvQueue, d.RecvQueue)
	set(&c.SendBuffer, d.SendBuffer)
	set(&c.RecvBuffer, d.RecvBuffer)
	set(&c.Inline, d.Inline)
	set(&c.IOMapSize, d.IOMapSize)
	if c.PollTime == 0 {
		c.PollTime = d.PollTime
	}
	if c.Inline < 0 {
		c.Inline = 0
	}
	switch {
	case c.SendQueue < 0 || c.RecvQueue < 0:
		return c, fmt.Errorf("rsocket: config: negative queue size (SendQueue %d, RecvQueue %d)", c.SendQueue, c.RecvQueue)
	case c.SendBuffer < sendLowWater:
		return c, fmt.Errorf("rsocket: config: SendBuffer %d: at least %d bytes (a transfer needs that much free)", c.SendBuffer, sendLowWater)
	case c.RecvBuffer < 2 || c.RecvBuffer/2 > maxMsgData:
		return c, fmt.Errorf("rsocket: config: RecvBuffer %d: 2 bytes to 1 GiB", c.RecvBuffer)
	case c.SendBuffer > 1<<30:
		return c, fmt.Errorf("rsocket: config: SendBuffer %d: at most 1 GiB", c.SendBuffer)
	case c.IOMapSize > maxIOMap:
		return c, fmt.Errorf("rsocket: config: IOMapSize %d: at most %d", c.IOMapSize, maxIOMap)
	}
	c.IOMapSize = max(c.IOMapSize, 0)
	c.IOMapSize = scaleToValue(valueToScale(c.IOMapSize))
	c.RecvBuffer &^= 1 // used in halves
	return c, nil
}

// clampQueue is rs_set_qp_size: 16 to min(65534, the device's limit).
func clampQueue(n, devMax int) int {
	hi := min(devMax, maxQueue)
	return max(min(n, hi), minQueue)
}
