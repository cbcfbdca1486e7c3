package rpma_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

func isNoCompletion(err error) bool { return errors.Is(err, rpma.ErrNoCompletion) }

// TestWriteFlushRead: the client writes to the server's region, flushes
// it to visibility and reads it back; the server sees the bytes.
func TestWriteFlushRead(t *testing.T) {
	ctx := testContext(t)
	sp, cp := newPeer(t, ctx, rpma.Local), newPeer(t, ctx, rpma.Remote)
	smr := regMR(t, sp, 4096, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility|rpma.UsageFlushPersistent)
	desc := smr.Descriptor()
	p := connect(t, ctx, sp, cp, nil, nil, []byte("hello"), desc)
	if !bytes.Equal(p.cpdata[:rpma.MRDescriptorSize], desc) {
		t.Fatalf("client got private data %x, want the descriptor %x", p.cpdata, desc)
	}
	rmr, err := rpma.RemoteMRFromDescriptor(p.cpdata)
	if err != nil {
		t.Fatal(err)
	}
	src := regMR(t, cp, 4096, rpma.UsageWriteSrc|rpma.UsageReadDst)
	copy(src.Bytes(), "the quick brown fox")
	if err := p.c.Write(rmr, 100, src, 0, 19, rpma.CompletionOnError, 1); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := p.c.Flush(rmr, 100, 19, rpma.FlushVisibility, rpma.CompletionAlways, 2); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	wc := waitWC(t, ctx, p.c.CQ())
	if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != 2 {
		t.Fatalf("flush completion %+v: %v", wc, err)
	}
	if got := string(smr.Bytes()[100:119]); got != "the quick brown fox" {
		t.Fatalf("server memory %q after write and flush", got)
	}
	if err := p.c.Read(src, 1000, rmr, 100, 19, rpma.CompletionAlways, 3); err != nil {
		t.Fatalf("Read: %v", err)
	}
	wc = waitWC(t, ctx, p.c.CQ())
	if err := rpma.CompletionErr(&wc); err != nil || wc.WRID != 3 || wc.Opcode != uverbs.WCRDMARead {
		t.Fatalf("read completion %+v: %v", wc, err)
	}
	if got := string(src.Bytes()[1000:1019]); got != "the quick brown fox" {
		t.Fatalf("read back %q", got)
	}
	t.Logf("native flush: %v (device: %v)", p.c.NativeFlushUsed(), cp.NativeFlush())
}
