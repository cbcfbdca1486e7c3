package uverbs_test

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// addRXE adds an rxe device named name on a new dummy network device
// with the IPv4 address cidr, both for this test alone (rxe0 and rxe1,
// which the other tests use, are left alone), and waits until its port
// is ACTIVE with a RoCE v2 IPv4 GID. It returns the RDMA netlink
// connection that made it; the cleanup removes the device unless the
// test did (the removal waits for every context on it to close).
func addRXE(t *testing.T, netdev, name, cidr string) *rdmanl.Conn {
	t.Helper()
	testenv.Devices(t, 1) // skips on a plain host, fails in the VM
	testenv.RequireRoot(t)
	testenv.AddNetdev(t, netdev, cidr)
	nl, err := rdmanl.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nl.Close() })
	if err := nl.NewLink(name, "rxe", netdev); err != nil {
		t.Fatalf("NEWLINK %s on %s: %v", name, netdev, err)
	}
	t.Cleanup(func() {
		if _, err := uverbs.DeviceByName(name); err == nil {
			nl.DelLink(name)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, err := uverbs.DeviceByName(name)
		if err == nil && len(d.Ports) > 0 && d.Ports[0].State == uverbs.PortActive && hasIPv4GID(name) {
			return nl
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s not ready after 10s (%+v, %v)", name, netdev, d, err)
		}
	}
}

// countFDs is the number of open file descriptors of the process.
func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestFaultLinkDeleted removes an rxe device (RDMA netlink DELLINK, as
// `purerdma link del` does) while a context on it holds one object of
// every kind, with a connected QP pair, an armed CQ with a waiter on
// its channel and a waiter on the async events.
//
// rxe cannot disassociate a context from its device, so the kernel's
// removal waits until every context is closed: DELLINK does not return,
// no async event arrives (no DEVICE_FATAL), and the objects keep
// working. Every Close then succeeds, the waiters return ErrClosed, the
// removal completes, the device is gone and no file descriptor is left.
func TestFaultLinkDeleted(t *testing.T) {
	const name = "rxefault"
	nl := addRXE(t, "rxflt0", name, "198.18.4.1/24")
	fds0 := countFDs(t)
	dev, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dev.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	ch, err := c.CreateCompChannel()
	must(err)
	cq, err := c.CreateCQ(uverbs.CQConfig{Size: 16, Channel: ch})
	must(err)
	td, err := c.AllocTD()
	must(err)
	tcq, err := c.CreateCQ(uverbs.CQConfig{Size: 16, TD: td})
	must(err)
	srq, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1})
	must(err)
	buf, err := uverbs.AllocBuffer(8192)
	must(err)
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegBuffer(buf, allAccess|uverbs.AccessMWBind)
	must(err)
	mw, err := pd.AllocMW(uverbs.MWType2)
	must(err)
	gidx, gid := roceV2GID(t, name)
	ah, err := pd.CreateAH(uverbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: gidx, HopLimit: 64}})
	must(err)
	cp := uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
	qa, err := pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
	must(err)
	qb, err := pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
	must(err)
	qs, err := pd.CreateQP(uverbs.QPConfig{Type: uverbs.QPTypeRC, SendCQ: tcq, RecvCQ: tcq, SRQ: srq, TD: td, Cap: uverbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	must(err)
	ea := &end{ctx: c, pd: pd, cq: cq, qp: qa, mr: mr, buf: buf.Bytes(), gidx: gidx, gid: gid}
	eb := &end{ctx: c, pd: pd, cq: cq, qp: qb, mr: mr, buf: buf.Bytes(), gidx: gidx, gid: gid}
	connect(t, ea, eb)
	connect(t, eb, ea)
	// The pair works (rxe loops the packets back inside the device).
	sendOne := func(wrid uint64) []uverbs.WorkCompletion {
		t.Helper()
		mustPostRecv(t, eb, wrid+1, eb.sge(4096, 64))
		copy(buf.Bytes(), "before removal")
		mustPostSend(t, ea, &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{ea.sge(0, 14)}})
		wcs := pollWCs(t, cq, 2) // the receive may complete first
		slices.SortFunc(wcs, func(x, y uverbs.WorkCompletion) int { return cmp.Compare(x.WRID, y.WRID) })
		return wcs
	}
	checkWCs(t, "send before the removal", []uverbs.WorkCompletion{sendWC(qa, 1, uverbs.WCSend, 14), recvWC(qb, 2, uverbs.WCRecv, 14)}, sendOne(1))
	must(cq.RequestNotify(false))
	fdsOpen := countFDs(t)
	t.Logf("%s: %d fds before, %d with the context open", os.Getenv("PURERDMA_VM"), fds0, fdsOpen)

	events := make(chan uverbs.AsyncEvent, 16)
	asyncDone := make(chan error, 1)
	go func() {
		for {
			ev, err := c.AsyncEvent(context.Background())
			if err != nil {
				asyncDone <- err
				return
			}
			events <- ev
		}
	}()
	waitDone := make(chan error, 1)
	go func() {
		_, err := ch.Wait(context.Background())
		waitDone <- err
	}()

	delDone := make(chan error, 1)
	start := time.Now()
	go func() { delDone <- nl.DelLink(name) }()
	var evs []uverbs.AsyncEvent
	timer := time.After(2 * time.Second)
observe:
	for {
		select {
		case ev := <-events:
			evs = append(evs, ev)
		case err := <-delDone:
			t.Fatalf("DELLINK returned (%v) after %v with a context open", err, time.Since(start))
		case err := <-waitDone:
			t.Fatalf("CompChannel.Wait returned %v during the removal", err)
		case err := <-asyncDone:
			t.Fatalf("AsyncEvent returned %v during the removal", err)
		case <-timer:
			break observe
		}
	}
	t.Logf("events in the 2s after DELLINK: %v", evs)
	if len(evs) != 0 {
		t.Errorf("async events while the removal waits: %v, want none", evs)
	}
	_, statErr := os.Stat("/sys/class/infiniband/" + name)
	_, byNameErr := uverbs.DeviceByName(name)
	c2, openErr := dev.Open(nil)
	if openErr == nil {
		c2.Close()
	}
	t.Logf("during the removal: sysfs %v, DeviceByName %v, Open %v", statErr, byNameErr, openErr)
	// The uverbs device goes first: the device cannot be found or
	// opened any more, although its InfiniBand entry stays until the
	// removal ends.
	if !errors.Is(byNameErr, fs.ErrNotExist) || !errors.Is(openErr, fs.ErrNotExist) {
		t.Errorf("during the removal: DeviceByName %v, Open %v; want both matching fs.ErrNotExist", byNameErr, openErr)
	}
	// The objects still work while the removal waits.
	got := sendOne(3)
	t.Logf("send during the removal: %s", wcSummary(got))
	checkWCs(t, "send during the removal", []uverbs.WorkCompletion{sendWC(qa, 3, uverbs.WCSend, 14), recvWC(qb, 4, uverbs.WCRecv, 14)}, got)
	select {
	case err := <-waitDone:
		if err != nil {
			t.Errorf("CompChannel.Wait after a completion: %v", err)
		}
		cq.AckEvents(1)
	case <-time.After(5 * time.Second):
		t.Error("no completion event for the send during the removal")
	}
	pd2, err := c.AllocPD()
	t.Logf("AllocPD during the removal: %v", err)
	if err != nil {
		t.Errorf("AllocPD during the removal: %v", err)
	} else {
		must(pd2.Close())
	}

	// Every object closes, children first.
	for _, o := range []struct {
		what  string
		close func() error
	}{
		{"QP", qs.Close}, {"QP", qb.Close}, {"QP", qa.Close}, {"AH", ah.Close}, {"MW", mw.Close}, {"MR", mr.Close},
		{"SRQ", srq.Close}, {"CQ", tcq.Close}, {"TD", td.Close}, {"CQ", cq.Close}, {"channel", ch.Close}, {"PD", pd.Close},
	} {
		if err := o.close(); err != nil {
			t.Errorf("%s.Close during the removal: %v", o.what, err)
		}
	}
	select {
	case err := <-delDone:
		t.Fatalf("DELLINK returned (%v) before the context closed", err)
	default:
	}
	if err := c.Close(); err != nil {
		t.Errorf("Context.Close during the removal: %v", err)
	}
	if err := <-asyncDone; !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AsyncEvent after Close: %v, want ErrClosed", err)
	}
	closed := time.Now()
	select {
	case err := <-delDone:
		if err != nil {
			t.Fatalf("DELLINK: %v", err)
		}
		t.Logf("DELLINK returned %v after the context closed", time.Since(closed).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("DELLINK did not return within 10s of the last close")
	}
	if _, err := uverbs.DeviceByName(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DeviceByName(%s) after the removal: %v, want not found", name, err)
	}
	if _, err := dev.Open(nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open after the removal: %v, want an error matching fs.ErrNotExist", err)
	}
	must(buf.Close())
	if n := countFDs(t); n != fds0 {
		t.Errorf("%d file descriptors open after the removal, %d before", n, fds0)
	}
}
