package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// deadPeerSetting is a ConnParam setting that docs/reliability.md
// documents for a dead peer: the connecting side's RetryCount and each
// side's AckTimeout (0: the kernel's).
type deadPeerSetting struct {
	name  string
	retry uint8
	ack   uint8
	roles []string // which side survives: "client", "server"
}

var deadPeerSettings = []deadPeerSetting{
	{"default", rdmacm.DefaultRetryCount, rdmacm.DefaultAckTimeout, []string{"client", "server"}},
	{"kernel ACK timeout", rdmacm.DefaultRetryCount, 0, []string{"client"}},
	{"fast", 3, 14, []string{"client", "server"}},
}

// deadPeerBound bounds the wait for a dead peer's error completion: far
// above what any setting takes (16 s at most, docs/reliability.md), it
// only turns a hang into a failure.
const deadPeerBound = 60 * time.Second

func (set deadPeerSetting) connParam() *rdmacm.ConnParam {
	p := rdmacm.DefaultConnParam()
	p.RetryCount, p.AckTimeout = set.retry, set.ack
	return p
}

// survivor is the side of a connection that outlives its peer process.
type survivor struct {
	id    *rdmacm.ID
	peer  *peerProc
	raddr uint64 // the peer's buffer for RDMA writes
	rkey  uint32
}

// survivorClient connects with the setting to a peer process that
// serves with it.
func survivorClient(t testing.TB, ctx context.Context, set deadPeerSetting) survivor {
	t.Helper()
	peer := startPeer(t, "serve", set.env()...)
	addr, err := netip.ParseAddrPort(peer.expect(t, "listening "))
	if err != nil {
		t.Fatal(err)
	}
	c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
	if _, err := c.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	est, err := c.ConnectContext(ctx, set.connParam())
	if err != nil {
		t.Fatal(err)
	}
	peer.expect(t, "established")
	raddr, rkey, err := parsePeerData(est.PrivateData)
	if err != nil {
		t.Fatal(err)
	}
	return survivor{id: c, peer: peer, raddr: raddr, rkey: rkey}
}

// survivorServer accepts with the setting a connection from a peer
// process that connects with it.
func survivorServer(t testing.TB, ctx context.Context, set deadPeerSetting) survivor {
	t.Helper()
	l, addr := listen(t, rdmacm.PortSpaceTCP)
	peer := startPeer(t, "connect", append(set.env(), helperAddrEnv+"="+addr.String())...)
	req, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := req.ID
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateQP(nil, qpConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptContext(ctx, set.connParam()); err != nil {
		t.Fatal(err)
	}
	peer.expect(t, "established")
	raddr, rkey, err := parsePeerData(req.PrivateData)
	if err != nil {
		t.Fatal(err)
	}
	return survivor{id: s, peer: peer, raddr: raddr, rkey: rkey}
}

// env is the peer process's environment for the setting.
func (set deadPeerSetting) env() []string {
	return []string{helperRetryEnv + "=" + strconv.Itoa(int(set.retry)), helperAckEnv + "=" + strconv.Itoa(int(set.ack))}
}

// writeUntilError streams signaled RDMA writes to the peer's buffer,
// kills the peer once `before` of them completed, and then waits, only
// for send completions (the CQ's completion channel, through
// uverbs.CQ.PollContext: GetSendComp would end at once with
// ErrDisconnected when the dying peer's DISCONNECTED arrives), until one
// completes with an error. It returns that completion and the time from
// the kill, or the error of a wait that ended without one.
func (s survivor) writeUntilError(t testing.TB, ctx context.Context, before int) (uverbs.WorkCompletion, time.Duration, error) {
	t.Helper()
	const size, depth = 4096, 8
	mr, _ := regMsgs(t, s.id, size)
	sendCQ, _ := s.id.CQs()
	var wcs [1]uverbs.WorkCompletion
	sendComp := func() (uverbs.WorkCompletion, error) {
		if _, err := sendCQ.PollContext(ctx, wcs[:]); err != nil {
			return uverbs.WorkCompletion{}, err
		}
		return wcs[0], wcs[0].Status.Err()
	}
	post := func(n int) error {
		off := uint64(n%(peerBufSize/size)) * size
		return s.id.PostWrite(uint64(n), mr, 0, size, uverbs.SendSignaled, rdmacm.Remote{Addr: s.raddr + off, RKey: s.rkey})
	}
	posted := 0
	for ; posted < depth; posted++ {
		if err := post(posted); err != nil {
			t.Fatal(err)
		}
	}
	var killed time.Time
	for done := 1; ; done++ {
		wc, err := sendComp()
		switch {
		case err != nil && wc.Status == uverbs.WCSuccess:
			return wc, 0, err // the wait ended without a completion
		case err != nil && killed.IsZero():
			t.Fatalf("write %d to a live peer: %v", wc.WRID, err)
		case err != nil:
			return wc, time.Since(killed), nil
		}
		if done == before {
			s.peer.kill(t)
			killed = time.Now()
		}
		if err := post(posted); err != nil {
			if killed.IsZero() {
				t.Fatal(err)
			}
			// The QP went to the error state after the completion
			// above was queued; the error completion follows.
			continue
		}
		posted++
	}
}

// TestDeadPeerReported kills the peer process of a connection in the
// middle of a stream of RDMA writes, for each documented setting and
// with either side surviving. The survivor waits only for its send
// completions and must get the first error as "transport retry counter
// exceeded" (the peer's QP is gone, so nothing acknowledges), with its
// QP configured as the setting says; DISCONNECTED, which the dying
// process's kernel sends, must be waiting on its channel afterwards.
// Each wait is bounded (deadPeerBound) so that a setting that never
// reports fails instead of hanging.
func TestDeadPeerReported(t *testing.T) {
	needDevices(t)
	testenv.NotIWARP(t, "the retry count and ACK timeout are InfiniBand transport settings; iWARP's TCP detects a dead peer")
	for _, set := range deadPeerSettings {
		for _, role := range set.roles {
			t.Run(set.name+"/"+role, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*deadPeerBound)
				defer cancel()
				var s survivor
				if role == "client" {
					s = survivorClient(t, ctx, set)
				} else {
					s = survivorServer(t, ctx, set)
				}
				a, err := s.id.QP().Query(uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt)
				if err != nil {
					t.Fatal(err)
				}
				if a.RetryCnt != set.retry || (set.ack != 0 && a.Timeout != set.ack) {
					t.Fatalf("QP retry count %d, ACK timeout %d; want %d, %d (0: the kernel's)", a.RetryCnt, a.Timeout, set.retry, set.ack)
				}
				wctx, wcancel := context.WithTimeout(ctx, deadPeerBound)
				defer wcancel()
				wc, took, err := s.writeUntilError(t, wctx, 64)
				if err != nil {
					t.Fatalf("no error completion %v after the peer was killed: %v", deadPeerBound, err)
				}
				if wc.Status != uverbs.WCRetryExcErr {
					t.Errorf("first error completion %v, want %v", wc.Status, uverbs.WCRetryExcErr)
				}
				t.Logf("retry count %d, ACK timeout %d: %q %v after the kill", a.RetryCnt, a.Timeout, wc.Status, took.Round(time.Millisecond))

				ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
				defer ecancel()
				ev, err := s.id.Channel().Next(ectx)
				if err != nil {
					t.Fatalf("no DISCONNECTED after the peer was killed: %v", err)
				}
				if ev.Type != rdmacm.EventDisconnected || ev.ID != s.id {
					t.Errorf("after the peer was killed: %v, want DISCONNECTED", ev)
				}
				if err := s.id.Close(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestConnParamAckTimeout checks where a QP's ACK timeout and retry
// count come from: a nil ConnParam gives both sides DefaultConnParam's;
// the accepting side's QP takes the connecting side's retry count, not
// its own; SetAckTimeout takes precedence over ConnParam.AckTimeout;
// and an AckTimeout above 31 fails before any kernel call.
func TestConnParamAckTimeout(t *testing.T) {
	testenv.NotIWARP(t, "the ACK timeout and retry counts are InfiniBand transport settings; iWARP retransmits by TCP")
	needDevices(t)
	ctx := testContext(t)
	type sideWant struct{ retry, ack uint8 }
	for _, tc := range []struct {
		name           string
		client, server *rdmacm.ConnParam
		clientSet      int // SetAckTimeout on the client before Connect; -1: none
		want           [2]sideWant
	}{
		{"nil", nil, nil, -1, [2]sideWant{{6, 17}, {6, 17}}},
		{"connector's retry count", &rdmacm.ConnParam{RetryCount: 2, RNRRetryCount: 7, AckTimeout: 15},
			&rdmacm.ConnParam{RetryCount: 5, RNRRetryCount: 7, AckTimeout: 16}, -1, [2]sideWant{{2, 15}, {2, 16}}},
		{"SetAckTimeout first", nil, nil, 12, [2]sideWant{{6, 12}, {6, 17}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, addr := listen(t, rdmacm.PortSpaceTCP)
			var srv *rdmacm.ID
			wait := goRun(t, func() error {
				req, err := l.GetRequest(ctx)
				if err != nil {
					return err
				}
				srv = req.ID
				if _, err := srv.CreateQP(nil, qpConfig()); err != nil {
					return err
				}
				_, err = srv.AcceptContext(ctx, tc.server)
				return err
			})
			c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
			if tc.clientSet >= 0 {
				if err := c.SetAckTimeout(uint8(tc.clientSet)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.CreateQP(nil, qpConfig()); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ConnectContext(ctx, tc.client); err != nil {
				t.Fatal(err)
			}
			wait()
			if srv != nil {
				t.Cleanup(func() { srv.Close() })
			}
			if t.Failed() {
				t.FailNow()
			}
			for i, id := range []*rdmacm.ID{c, srv} {
				a, err := id.QP().Query(uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt)
				if err != nil {
					t.Fatal(err)
				}
				if got := (sideWant{a.RetryCnt, a.Timeout}); got != tc.want[i] {
					t.Errorf("%s QP: retry count %d, ACK timeout %d; want %d, %d", []string{"client", "server"}[i], got.retry, got.ack, tc.want[i].retry, tc.want[i].ack)
				}
			}
		})
	}
	t.Run("too long", func(t *testing.T) {
		l, addr := listen(t, rdmacm.PortSpaceTCP)
		c := dialer(t, ctx, rdmacm.PortSpaceTCP, addr)
		if _, err := c.CreateQP(nil, qpConfig()); err != nil {
			t.Fatal(err)
		}
		p := rdmacm.DefaultConnParam()
		p.AckTimeout = 32
		if err := c.Connect(p); !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("Connect with AckTimeout 32: %v, want EINVAL", err)
		}
		// Nothing reached the kernel: the ID can still connect.
		wait := goRun(t, func() error {
			req, err := l.GetRequest(ctx)
			if err != nil {
				return err
			}
			t.Cleanup(func() { req.ID.Close() })
			if _, err := req.ID.CreateQP(nil, qpConfig()); err != nil {
				return err
			}
			_, err = req.ID.AcceptContext(ctx, nil)
			return err
		})
		if _, err := c.ConnectContext(ctx, nil); err != nil {
			t.Error(err)
		}
		wait()
	})
}
