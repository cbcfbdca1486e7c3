//go:build linux

package netlink

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecuteOverRouteNetlink sends a request rtnetlink refuses (an
// unknown message type) and a dump it answers (the links), over the
// NETLINK_ROUTE socket every Linux host has.
func TestExecuteOverRouteNetlink(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.PID() == 0 {
		t.Error("the socket has no port id after bind")
	}
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Execute(false, func(seq uint32) []byte {
		return NewRequest(5<<10+1, FlagRequest|FlagAck, seq).Finish()
	})
	var ke KernelError
	if !errors.As(err, &ke) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("unknown type: err = %v, want a KernelError matching EOPNOTSUPP", err)
	}
	msgs, err := c.Execute(true, func(seq uint32) []byte {
		e := NewRequest(unix.RTM_GETLINK, FlagRequest|FlagDump, seq)
		e.Fixed(make([]byte, unix.SizeofIfInfomsg))
		return e.Finish()
	})
	if err != nil {
		t.Fatalf("RTM_GETLINK dump: %v", err)
	}
	found := false
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			t.Errorf("dump reply of type %d, %d bytes", m.Header.Type, len(m.Data))
			continue
		}
		attrs, err := ParseAttrs(m.Data[unix.SizeofIfInfomsg:])
		if err != nil {
			t.Error(err)
		}
		for _, a := range attrs {
			if a.Type == unix.IFLA_IFNAME && a.String() == "lo" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("the link dump (%d messages) has no lo", len(msgs))
	}
}

func TestClose(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = c.Execute(false, func(seq uint32) []byte { return NewRequest(1, FlagRequest, seq).Finish() })
	if !errors.Is(err, os.ErrClosed) {
		t.Errorf("Execute after Close: err = %v, want os.ErrClosed", err)
	}
}

func TestDeadline(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Nothing was sent, so a receive can only end at the deadline.
	if err := c.SetDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.receive(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("receive: err = %v, want os.ErrDeadlineExceeded", err)
	}
}

// TestCloseWakesReceive checks that Close ends a receive blocked in
// another goroutine.
func TestCloseWakesReceive(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.receive()
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("receive returned no error after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not wake the blocked receive")
	}
}
