package rsocket_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/purerdma/rdma/rsocket"
)

// TestAllocs: once a connection is warm, a Write that can go out at
// once and a Read of data already received allocate nothing, and so
// does a round trip whose Read waits for the peer (it parks in the
// runtime poller on the completion channel), blocking and busy-polling.
func TestAllocs(t *testing.T) {
	c, s := pair(t, rsocket.Config{})
	msg := bytes.Repeat([]byte{0x5a}, 64)
	// Warm both directions.
	for range 4 {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 100 // AllocsPerRun runs the function runs+1 times: within the 384 credits
	if n := testing.AllocsPerRun(runs, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Write of 64 bytes: %v allocations", n)
	}
	want := (runs + 1) * 64
	deadline := time.Now().Add(30 * time.Second) // only turns a hang into a failure
	for s.Buffered() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes arrived", s.Buffered(), want)
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 64)
	if n := testing.AllocsPerRun(runs, func() {
		if _, err := io.ReadFull(s, buf); err != nil || !bytes.Equal(buf, msg) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Read of 64 bytes received: %v allocations", n)
	}
}

func TestAllocsWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  rsocket.Config
	}{{"blocking", rsocket.Config{PollTime: -1}}, {"default", rsocket.Config{}}, {"busypoll", rsocket.Config{BusyPoll: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := pair(t, tc.cfg)
			go func() { // the echo: it waits in Read too
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(s, buf); err != nil {
						return
					}
					if _, err := s.Write(buf); err != nil {
						return
					}
				}
			}()
			msg, buf := bytes.Repeat([]byte{0xa5}, 64), make([]byte, 64)
			rt := func() {
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil || !bytes.Equal(buf, msg) {
					t.Fatalf("echo: %v", err)
				}
			}
			for range 50 { // warm: credits granted, timers and poller registered
				rt()
			}
			if n := testing.AllocsPerRun(200, rt); n != 0 {
				t.Errorf("64-byte round trip that waits: %v allocations", n)
			}
		})
	}
}

// BenchmarkPingPong: 64-byte messages back and forth between two
// connections of one process, one round trip an iteration, with calls
// that block after polling (the default) and with BusyPoll; it reports
// the allocations of calls that had to wait too.
func BenchmarkPingPong(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  rsocket.Config
	}{{"blocking", rsocket.Config{}}, {"busypoll", rsocket.Config{BusyPoll: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			c, s := pair(b, bc.cfg)
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(s, buf); err != nil {
						return
					}
					if _, err := s.Write(buf); err != nil {
						return
					}
				}
			}()
			msg, buf := make([]byte, 64), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
