package rdmacm_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestVectoredAndInline: the vectored short forms gather and scatter
// several SGEs, and PostSendInline sends unregistered bytes that may be
// reused at once.
func TestVectoredAndInline(t *testing.T) {
	needDevices(t)
	ctx := testContext(t)
	cfg := uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}}
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	accepted := make(chan *rdmacm.ID, 1)
	wait := goRun(t, func() error {
		req, err := l.GetRequest(ctx)
		if err != nil {
			return err
		}
		if _, err := req.ID.CreateQP(nil, cfg); err != nil {
			req.ID.Close()
			return err
		}
		if _, err := req.ID.AcceptContext(ctx, nil); err != nil {
			req.ID.Close()
			return err
		}
		accepted <- req.ID
		return nil
	})
	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if _, err := c.CreateQP(nil, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConnectContext(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wait()
	s := <-accepted
	t.Cleanup(func() { s.Close() })
	cmr, cbuf := regMsgs(t, c, 4096)
	smr, sbuf := regMsgs(t, s, 4096)
	wmr, err := s.PD().RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer wmr.Close()
	remote := rdmacm.Remote{Addr: wmr.Addr(), RKey: wmr.RKey()}
	sge := func(mr *uverbs.MR, off, n int) uverbs.SGE {
		return uverbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
	}

	// A receive scattered over two pieces of the server's buffer.
	if err := s.PostRecvv(1, []uverbs.SGE{sge(smr, 100, 4), sge(smr, 200, 60)}); err != nil {
		t.Fatal(err)
	}
	copy(cbuf[0:], "head")
	copy(cbuf[1000:], "tail")
	if err := c.PostSendv(2, []uverbs.SGE{sge(cmr, 0, 4), sge(cmr, 1000, 4)}, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.WRID != 2 {
		t.Fatalf("sendv completion %+v %v", wc, err)
	}
	if wc, err := s.GetRecvComp(ctx); err != nil || wc.ByteLen != 8 {
		t.Fatalf("recvv completion %+v %v", wc, err)
	}
	if string(sbuf[100:104]) != "head" || string(sbuf[200:204]) != "tail" {
		t.Fatalf("scattered receive %q %q", sbuf[100:104], sbuf[200:204])
	}

	// Inline: the caller's bytes change right after the call, the peer
	// sees what they were.
	if err := s.PostRecv(3, smr, 0, 64); err != nil {
		t.Fatal(err)
	}
	msg := []byte("inline, unregistered")
	if err := c.PostSendInline(4, msg, uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	copy(msg, "XXXXXXXXXXXXXXXXXXXX")
	if wc, err := c.GetSendComp(ctx); err != nil || wc.WRID != 4 {
		t.Fatalf("inline send completion %+v %v", wc, err)
	}
	if wc, err := s.GetRecvComp(ctx); err != nil || string(sbuf[:wc.ByteLen]) != "inline, unregistered" {
		t.Fatalf("inline receive %+v %q %v", wc, sbuf[:wc.ByteLen], err)
	}
	big := make([]byte, int(c.QP().Cap().MaxInlineData)+1)
	if err := c.PostSendInline(5, big, uverbs.SendSignaled); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("PostSendInline past MaxInlineData = %v, want EINVAL", err)
	}

	// Writev gathers two pieces into the peer's memory; readv scatters
	// it back.
	copy(cbuf[300:], "gath")
	copy(cbuf[400:], "ered")
	if err := c.PostWritev(6, []uverbs.SGE{sge(cmr, 300, 4), sge(cmr, 400, 4)}, uverbs.SendSignaled, remote); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.Opcode != uverbs.WCRDMAWrite {
		t.Fatalf("writev completion %+v %v", wc, err)
	}
	readv := []uverbs.SGE{sge(cmr, 2000, 2), sge(cmr, 2100, 6)}
	if testenv.CurrentFabric().IWARP {
		// siw reads into one entry (its kernel ignores the others):
		// refused before the queue, then read into one.
		if err := c.PostReadv(7, readv, uverbs.SendSignaled, remote); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Fatalf("readv into 2 entries on siw = %v, want ErrNotSupported", err)
		}
		readv = []uverbs.SGE{sge(cmr, 2000, 8)}
	}
	if err := c.PostReadv(7, readv, uverbs.SendSignaled, remote); err != nil {
		t.Fatal(err)
	}
	if wc, err := c.GetSendComp(ctx); err != nil || wc.Opcode != uverbs.WCRDMARead {
		t.Fatalf("readv completion %+v %v", wc, err)
	}
	if got := string(cbuf[2000:2002]) + string(cbuf[2100:2106]); len(readv) == 1 {
		if string(cbuf[2000:2008]) != "gathered" {
			t.Fatalf("read got %q", cbuf[2000:2008])
		}
	} else if got != "gathered" {
		t.Fatalf("readv got %q", got)
	}
}
