package rpma

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/uverbs"
)

// TestOps: every operation that posts has its name, unchanged (errors
// carry it), and a full-queue error of its own that is ErrAgain and
// uverbs.ErrBusy, never nil.
func TestOps(t *testing.T) {
	want := map[op]string{
		opRead: "read", opWrite: "write", opWriteWithImm: "write with imm", opAtomicWrite: "atomic write",
		opFlush: "flush", opSend: "send", opSendWithImm: "send with imm", opRecv: "recv",
		opSRQRecv: "srq recv", opConnReqRecv: "conn_req recv",
	}
	if len(want) != int(numOps) {
		t.Fatalf("%d names for %d operations: name the new one here", len(want), numOps)
	}
	for o := range numOps {
		name, ok := want[o]
		if !ok || o.String() != name {
			t.Errorf("op %d is %q, want %q", o, o.String(), name)
		}
		queue := "send"
		if ops[o].recv {
			queue = "receive"
		}
		err := busy[o]
		if err == nil {
			t.Errorf("%s: no full-queue error", name)
			continue
		}
		if !errors.Is(err, ErrAgain) || !errors.Is(err, uverbs.ErrBusy) || CodeOf(err) != CodeAgain {
			t.Errorf("%s: full queue %v, want ErrAgain and uverbs.ErrBusy", name, err)
		}
		if got, want := err.Error(), fmt.Sprintf("rpma: %s: temporary error: %s queue full: %v", name, queue, uverbs.ErrBusy); got != want {
			t.Errorf("%s: full queue %q, want %q", name, got, want)
		}
		if got := postFailed(o, fmt.Errorf("post: %w", uverbs.ErrBusy)); got != err {
			t.Errorf("%s: postFailed of a full queue = %v, want the preallocated %v", name, got, err)
		}
	}
	for _, o := range []op{opRecv, opSRQRecv, opConnReqRecv} {
		if !ops[o].recv {
			t.Errorf("%s: not a receive", o)
		}
	}
}

// wrState is what an operation leaves for the post: the work request
// and the SGE its list points to.
type wrState struct {
	WR  uverbs.SendWR
	SGE []uverbs.SGE
}

func wrOf(t testing.TB, c *Conn) wrState {
	t.Helper()
	s := wrState{WR: c.swr}
	if c.swr.SGL != nil {
		if &c.swr.SGL[0] != &c.sge[0] {
			t.Fatal("the SGE list is not the connection's")
		}
		s.SGE = append([]uverbs.SGE(nil), c.swr.SGL...)
		s.WR.SGL = nil
	}
	return s
}

// TestWRReuse: the connection's one work request carries nothing of
// the operation before: an operation after any other builds exactly
// the request it builds on a new connection (write with imm then read:
// no imm, the read's flags). The connections have no QP, so the post
// fails after the request is made.
func TestWRReuse(t *testing.T) {
	const all = UsageReadSrc | UsageReadDst | UsageWriteSrc | UsageWriteDst | UsageFlushVisibility | UsageSend | UsageRecv
	local := &MR{buf: make([]byte, 64), usage: all}
	remote := &RemoteMR{Addr: 0x10000, Len: 4096, RKey: 0x55, Usage: all}
	buf, err := uverbs.AllocBuffer(flushBufSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	ops := []struct {
		name string
		do   func(c *Conn) error
	}{
		{"read", func(c *Conn) error { return c.Read(local, 8, remote, 16, 24, CompletionAlways, 1) }},
		{"write", func(c *Conn) error { return c.Write(remote, 32, local, 4, 12, CompletionOnError, 2) }},
		{"write with imm", func(c *Conn) error {
			return c.WriteWithImm(remote, 40, local, 0, 8, CompletionAlways, 0xabcd, 3)
		}},
		{"zero-byte read", func(c *Conn) error { return c.Read(nil, 0, nil, 0, 0, CompletionOnError, 4) }},
		{"atomic write", func(c *Conn) error {
			return c.AtomicWrite(remote, 64, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, CompletionAlways, 5)
		}},
		{"flush", func(c *Conn) error { return c.Flush(remote, 100, 50, FlushVisibility, CompletionAlways, 6) }},
		{"send", func(c *Conn) error { return c.Send(local, 2, 6, CompletionOnError, 7) }},
		{"send with imm", func(c *Conn) error { return c.SendWithImm(local, 0, 64, CompletionAlways, 0x1234, 8) }},
		{"empty send", func(c *Conn) error { return c.Send(nil, 0, 0, CompletionAlways, 9) }},
	}
	for _, native := range []bool{false, true} {
		newConn := func() *Conn {
			method := FlushEmulated
			if native {
				method = FlushNative
			}
			return &Conn{
				peer:     &Peer{atomicWrite: native, flush: native},
				res:      &connResources{cfg: connCfgSnapshot{flushMethod: method}},
				flushBuf: buf, flushAddr: 0x2000, flushLKey: 0x77,
			}
		}
		do := func(c *Conn, i int) {
			t.Helper()
			// The post fails (no QP): the error must be the post's,
			// not a check's.
			var re *Error
			if err := ops[i].do(c); !errors.As(err, &re) || !strings.Contains(err.Error(), "nil QP") {
				t.Fatalf("%s: %v, want the post's error", ops[i].name, err)
			}
		}
		for b := range ops {
			fresh := newConn()
			do(fresh, b)
			want := wrOf(t, fresh)
			for a := range ops {
				c := newConn()
				do(c, a)
				do(c, b)
				if diff := cmp.Diff(want, wrOf(t, c)); diff != "" {
					t.Errorf("native %v: %s after %s differs from %s on a new connection (-want +got):\n%s",
						native, ops[b].name, ops[a].name, ops[b].name, diff)
				}
			}
		}
		// The brief's case spelled out: write with imm, then read.
		c := newConn()
		do(c, 2)
		do(c, 0)
		if w := c.swr; w.Opcode != uverbs.WRRDMARead || w.Imm != 0 || w.Flags != uverbs.SendSignaled || w.WRID != 1 ||
			w.RemoteAddr != 0x10000+16 || w.RKey != 0x55 || len(w.SGL) != 1 || w.SGL[0] != (uverbs.SGE{Addr: 8, Length: 24}) {
			t.Errorf("native %v: read after write with imm: %+v", native, w)
		}
	}
}
