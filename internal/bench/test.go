package bench

import (
	"fmt"
	"strings"
)

// Test is one of the measurements purerdma bench runs, named as
// perftest's programs are (ib_write_lat is write_lat).
type Test uint8

const (
	WriteLat  Test = iota + 1 // RDMA WRITE ping-pong, both sides poll memory
	ReadLat                   // RDMA READ round trips from the client
	SendLat                   // SEND/RECV ping-pong
	AtomicLat                 // FETCH_AND_ADD round trips from the client
	WriteBW                   // RDMA WRITE stream from the client
	ReadBW                    // RDMA READ stream from the client
	SendBW                    // SEND stream from the client to the server's receives
)

var testNames = [...]string{WriteLat: "write_lat", ReadLat: "read_lat", SendLat: "send_lat",
	AtomicLat: "atomic_lat", WriteBW: "write_bw", ReadBW: "read_bw", SendBW: "send_bw"}

// Tests lists every test in the order of perftest's documentation.
func Tests() []Test {
	return []Test{WriteLat, ReadLat, SendLat, AtomicLat, WriteBW, ReadBW, SendBW}
}

// String returns the test's name, such as "write_lat".
func (t Test) String() string {
	if t.Valid() {
		return testNames[t]
	}
	return fmt.Sprintf("Test(%d)", uint8(t))
}

// Valid reports whether t is a known test.
func (t Test) Valid() bool { return t >= WriteLat && t <= SendBW }

// ParseTest returns the test with the given name; "ib_write_lat" is
// accepted for "write_lat".
func ParseTest(name string) (Test, error) {
	n := strings.TrimPrefix(name, "ib_")
	for _, t := range Tests() {
		if testNames[t] == n {
			return t, nil
		}
	}
	return 0, fmt.Errorf("bench: unknown test %q (one of %s)", name, strings.Join(testNames[1:], ", "))
}

// Latency reports whether t measures latency (the *_lat tests).
func (t Test) Latency() bool { return t >= WriteLat && t <= AtomicLat }

// PingPong reports whether both sides run the measured loop (write_lat
// and send_lat), not the client alone.
func (t Test) PingPong() bool { return t == WriteLat || t == SendLat }

// RTTFactor is what perftest divides a sample by: 2 for the ping-pong
// tests, whose samples are round trips of two one-way messages, 1 for
// the round trips of READ and atomics.
func (t Test) RTTFactor() int {
	if t.PingPong() {
		return 2
	}
	return 1
}
