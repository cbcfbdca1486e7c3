package rsocket_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/purerdma/rdma/rsocket"
)

// syncMsg writes b on c and reads it on peer: a message that follows
// everything c wrote before it.
func syncMsg(t *testing.T, c, peer *rsocket.Conn, b string) {
	t.Helper()
	if _, err := c.Write([]byte(b)); err != nil {
		t.Fatalf("write %q: %v", b, err)
	}
	got := make([]byte, len(b))
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != b {
		t.Fatalf("read %q, %v; want %q", got, err, b)
	}
}

// TestIOMap: a side that offers an iomap table takes the peer's
// mappings; IOWrite lands in the mapped buffer, in order with the data
// that follows it, and nowhere else; what no mapping covers, a full
// table, a peer that offers none and a buffer that is not mapped are
// errors that leave the connection working.
func TestIOMap(t *testing.T) {
	client, server := pair(t, rsocket.Config{IOMapSize: 2})

	// Two mappings of the server's: offsets 0-4095 and 8192-8195.
	a, b := make([]byte, 4096), make([]byte, 4)
	if off, err := server.IOMap(a, 0); err != nil || off != 0 {
		t.Fatalf("IOMap(a, 0) = %d, %v", off, err)
	}
	if off, err := server.IOMap(b, 8192); err != nil || off != 8192 {
		t.Fatalf("IOMap(b, 8192) = %d, %v", off, err)
	}
	if _, err := server.IOMap(make([]byte, 8), 0); err == nil {
		t.Fatal("a third IOMap into a table of 2 succeeded")
	} else {
		t.Logf("a full table: %v", err)
	}
	syncMsg(t, server, client, "mapped") // the mappings precede it

	data := make([]byte, 4000)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if n, err := client.IOWrite(data, 50); n != len(data) || err != nil {
		t.Fatalf("IOWrite(4000 bytes, 50) = %d, %v", n, err)
	}
	if n, err := client.IOWrite([]byte("wxyz"), 8192); n != 4 || err != nil {
		t.Fatalf("IOWrite(4 bytes, 8192) = %d, %v", n, err)
	}
	// A write that runs off the end of a mapping stops there.
	n, err := client.IOWrite([]byte("0123456789"), 4090)
	if n != 6 || !errors.Is(err, rsocket.ErrNoMapping) {
		t.Fatalf("IOWrite(10 bytes, 4090) = %d, %v; want 6, ErrNoMapping", n, err)
	}
	if n, err := client.IOWrite([]byte("x"), 5000); n != 0 || !errors.Is(err, rsocket.ErrNoMapping) {
		t.Fatalf("IOWrite at 5000 = %d, %v; want 0, ErrNoMapping", n, err)
	}
	syncMsg(t, client, server, "written") // the writes precede it

	want := make([]byte, 4096)
	copy(want[50:], data)
	copy(want[4090:], "012345")
	if !bytes.Equal(a, want) {
		t.Errorf("mapping a: the writes did not land as written")
	}
	if string(b) != "wxyz" {
		t.Errorf("mapping b = %q, want \"wxyz\"", b)
	}

	// Unmapping frees the entry for another mapping.
	if err := server.IOUnmap(make([]byte, 4)); err == nil {
		t.Error("IOUnmap of a buffer never mapped succeeded")
	}
	if err := server.IOUnmap(b); err != nil {
		t.Fatalf("IOUnmap(b): %v", err)
	}
	c := make([]byte, 16)
	if off, err := server.IOMap(c, -1); err != nil || off == 0 {
		t.Fatalf("IOMap(c, -1) = %d, %v; want c's address", off, err)
	} else {
		syncMsg(t, server, client, "remapped")
		if n, err := client.IOWrite([]byte("at its address"), off+1); n != 14 || err != nil {
			t.Fatalf("IOWrite at c's address + 1 = %d, %v", n, err)
		}
	}
	syncMsg(t, client, server, "again")
	if string(c[1:15]) != "at its address" {
		t.Errorf("mapping c = %q", c)
	}
	syncMsg(t, client, server, "still a stream")
	syncMsg(t, server, client, "both ways")
}

// TestIOMapNotOffered: IOMap to a peer that offers no iomap table is
// refused before anything is sent, and bad arguments are refused.
func TestIOMapNotOffered(t *testing.T) {
	client, server := pair(t, rsocket.Config{IOMapSize: -1})
	if _, err := client.IOMap(make([]byte, 64), 0); err == nil {
		t.Fatal("IOMap to a peer that offers no iomap succeeded")
	} else {
		t.Logf("no iomap offered: %v", err)
	}
	for _, bad := range []struct {
		n   int
		off int64
	}{{0, 0}, {8, -2}} {
		if _, err := client.IOMap(make([]byte, bad.n), bad.off); err == nil {
			t.Errorf("IOMap(%d bytes, %d) succeeded", bad.n, bad.off)
		}
	}
	if _, err := client.IOWrite([]byte("x"), -1); err == nil {
		t.Error("IOWrite at offset -1 succeeded")
	}
	if n, err := client.IOWrite([]byte("x"), 0); n != 0 || !errors.Is(err, rsocket.ErrNoMapping) {
		t.Errorf("IOWrite with no mapping = %d, %v; want ErrNoMapping", n, err)
	}
	syncMsg(t, client, server, "the stream works")
	syncMsg(t, server, client, "both ways")
	closeConn(t, client)
	if _, err := client.IOMap(make([]byte, 8), 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("IOMap after Close: %v; want net.ErrClosed", err)
	}
}
