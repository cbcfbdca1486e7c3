package uverbs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// stream is a flow of signaled 4 KiB RDMA writes from a to b, each
// with a pattern of its sequence number, into one of slots regions of
// b's memory, at most window in flight.
type stream struct {
	a, b       *end
	src, dst   *uverbs.MR
	posted     int // writes posted
	done       int // writes completed, whatever the status
	errs       []uverbs.WorkCompletion
	drain      bool  // run posts nothing more, it waits for what is posted (set by the first error)
	lastSlot   []int // per destination slot, the newest write that completed there successfully
	firstError time.Time
}

const (
	streamSlots  = 8
	streamSize   = 4096
	streamWindow = streamSlots
)

func newStream(t *testing.T, a, b *end) *stream {
	t.Helper()
	reg := func(pd *uverbs.PD) *uverbs.MR {
		mr, err := pd.RegMR(make([]byte, streamSlots*streamSize), allAccess)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close() })
		return mr
	}
	s := &stream{a: a, b: b, src: reg(a.pd), dst: reg(b.pd), lastSlot: make([]int, streamSlots)}
	for i := range s.lastSlot {
		s.lastSlot[i] = -1
	}
	return s
}

// seqPattern fills b with a pattern of write seq.
func seqPattern(b []byte, seq int) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], uint64(seq)<<20|uint64(i))
	}
}

// run keeps the window full for d, or until want more writes completed
// successfully (0: no such limit), and polls. It returns the number of
// writes that completed successfully.
func (s *stream) run(t *testing.T, d time.Duration, want int) int {
	t.Helper()
	ok := 0
	var wc [16]uverbs.WorkCompletion
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && (want == 0 || ok < want) && !(s.drain && s.done == s.posted) {
		for !s.drain && s.posted-s.done < streamWindow {
			slot := s.posted % streamSlots
			src := s.src.Bytes()[slot*streamSize : (slot+1)*streamSize]
			seqPattern(src, s.posted)
			err := s.a.qp.PostSend(&uverbs.SendWR{WRID: uint64(s.posted), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL:        []uverbs.SGE{{Addr: s.src.Addr() + uint64(slot*streamSize), Length: streamSize, LKey: s.src.LKey()}},
				RemoteAddr: s.dst.Addr() + uint64(slot*streamSize), RKey: s.dst.RKey()})
			if err != nil {
				t.Fatalf("post write %d: %v", s.posted, err)
			}
			s.posted++
		}
		n, err := s.a.cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if int(w.WRID) != s.done {
				t.Fatalf("completion of write %d, want %d (in order)", w.WRID, s.done)
			}
			s.done++
			if w.Status != uverbs.WCSuccess {
				if s.firstError.IsZero() {
					s.firstError = time.Now()
					s.drain = true // the QP is in ERR: post no more
				}
				s.errs = append(s.errs, w)
				continue
			}
			ok++
			s.lastSlot[int(w.WRID)%streamSlots] = int(w.WRID)
		}
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return ok
}

// check compares b's memory with the newest write that completed
// successfully in each slot.
//
// It first waits for the writes still in flight: a write that lands
// after its slot's newer completion was read would be a false mismatch.
func (s *stream) check(t *testing.T) {
	t.Helper()
	s.drain = true
	s.run(t, 5*time.Second, 0)
	if s.done != s.posted || len(s.errs) > 0 {
		t.Fatalf("draining the stream: %d of %d writes completed, errors %s", s.done, s.posted, wcSummary(s.errs))
	}
	want := make([]byte, streamSize)
	for slot, seq := range s.lastSlot {
		if seq < 0 {
			continue
		}
		seqPattern(want, seq)
		if got := s.dst.Bytes()[slot*streamSize : (slot+1)*streamSize]; !bytes.Equal(got, want) {
			t.Errorf("slot %d does not hold write %d", slot, seq)
		}
	}
}

// hwCounters reads rxe's counters of dev's port 1 (hw_counters in
// sysfs), for the logs.
func hwCounters(dev string) map[string]int64 {
	dir := "/sys/class/infiniband/" + dev + "/ports/1/hw_counters"
	ents, _ := os.ReadDir(dir)
	m := make(map[string]int64)
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil {
			m[e.Name()] = n
		}
	}
	return m
}

// counterDiff lists the counters that changed from before to after.
func counterDiff(before, after map[string]int64) string {
	var out []string
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out = append(out, fmt.Sprintf("%s+%d", k, d))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// allEvents returns every async event of c that arrives within d.
func allEvents(c *uverbs.Context, d time.Duration) []uverbs.AsyncEvent {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var evs []uverbs.AsyncEvent
	for {
		ev, err := c.AsyncEvent(ctx)
		if err != nil {
			return evs
		}
		evs = append(evs, ev)
	}
}

// hasPortEvent reports whether evs holds an event of type typ on port 1.
func hasPortEvent(evs []uverbs.AsyncEvent, typ uverbs.AsyncEventType) bool {
	for _, ev := range evs {
		if ev.Type == typ && ev.Port == 1 {
			return true
		}
	}
	return false
}

// TestFaultNetdevDownUp takes veth1 (rxe1's network device) down for a
// while during a stream of RDMA writes from rxe0 to rxe1, then up
// again. veth1 and veth0 are a pair, so both ports go down: each
// context gets PORT_ERR, then PORT_ACTIVE; no QP gets an event.
//
// What the stream does differs between the kernels:
//
//   - 6.1: rxe0 keeps sending into the link with no carrier, and the
//     packets vanish (some sends may fail, counted in send_err, without
//     an error completion or a state change). With retry count 7, which rxe takes as "for ever",
//     the writes stop without error completions and resume when the
//     link is up: every write completes successfully, in order, and the
//     peer's memory holds the data. With retry count 3 the write in
//     flight fails with "transport retry counter exceeded" and the rest
//     are flushed.
//   - 6.12: rxe0's first send on the link without carrier fails (its
//     send_err counter), which moves the QP to ERR at once, whatever the
//     retry count: every outstanding write completes with "Work Request
//     Flushed Error", the failed one too.
//
// A QP in ERR recovers by RESET and connecting again (the peer's as
// well: its PSNs must match), after which the stream runs again.
func TestFaultNetdevDownUp(t *testing.T) {
	testenv.NotIWARP(t, "the test asserts rxe's outage behaviour: transport retry counts, rxe's send_err counters, and a reconnect of the reset QPs by QP modify (rdmacm's TestFaultNetdevDownUp runs an outage on siw)")
	testenv.Devices(t, 2)
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the ip tool is needed to take veth1 down: %v", err)
	}
	const down = 2 * time.Second
	for _, tc := range []struct {
		name string
		rs   retrySet
	}{
		{"retry for ever", retrySet{timeout: 14, retry: 7, rnrRetry: 7, minRNRTimer: 1}},
		{"retry 3", retrySet{timeout: 14, retry: 3, rnrRetry: 7, minRNRTimer: 1}}, // 67 ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPairRetry(t, pairOpts{typ: uverbs.QPTypeRC}, tc.rs)
			s := newStream(t, a, b)
			t.Cleanup(func() { // nothing in flight when the MRs close
				s.drain = true
				s.run(t, 5*time.Second, 0)
			})
			if n := s.run(t, 10*time.Second, 32); n < 32 || len(s.errs) > 0 {
				t.Fatalf("before the link went down: %d writes, errors %s", n, wcSummary(s.errs))
			}
			allEvents(a.ctx, 10*time.Millisecond) // earlier tests' events
			allEvents(b.ctx, 10*time.Millisecond)

			cA, cB := hwCounters(a.ctx.Device().Name), hwCounters(b.ctx.Device().Name)
			up := linkDown(t, "veth1")
			downAt := time.Now()
			okDown := s.run(t, down, 0)
			evA, evB := allEvents(a.ctx, 100*time.Millisecond), allEvents(b.ctx, 100*time.Millisecond)
			stA, stB := qpState(t, a.qp), qpState(t, b.qp)
			var after time.Duration
			if !s.firstError.IsZero() {
				after = s.firstError.Sub(downAt).Round(time.Millisecond)
			}
			t.Logf("%s: link down %v: %d writes completed, errors %s (first %v after down); QPs %v, %v; events rxe0 %v, rxe1 %v",
				os.Getenv("PURERDMA_VM"), down, okDown, wcSummary(s.errs), after, stA, stB, evA, evB)
			cA2 := hwCounters(a.ctx.Device().Name)
			t.Logf("counters while down: rxe0 %s; rxe1 %s", counterDiff(cA, cA2), counterDiff(cB, hwCounters(b.ctx.Device().Name)))
			// 6.1 sends into the link without carrier (some of those
			// sends may fail, send_err, without moving the QP to ERR: the
			// stream's outcome below is what tells the kernels apart);
			// 6.12 fails the send.
			sendErr, sent := cA2["send_err"]-cA["send_err"], cA2["sent_pkts"]-cA["sent_pkts"]
			if onKernel612() && sendErr == 0 || !onKernel612() && sent == 0 {
				t.Errorf("rxe0 while down: send_err +%d, sent_pkts +%d", sendErr, sent)
			}
			if !hasPortEvent(evA, uverbs.EventPortErr) || !hasPortEvent(evB, uverbs.EventPortErr) {
				t.Errorf("events while down: rxe0 %v, rxe1 %v; want PORT_ERR on both", evA, evB)
			}
			for _, ev := range append(evA, evB...) {
				if ev.QP != nil || ev.CQ != nil {
					t.Errorf("event %v while down, want port events only", ev)
				}
			}
			if stB != uverbs.QPStateRTS {
				t.Errorf("responder QP %v while down, want RTS", stB)
			}

			up()
			upAt := time.Now()
			evA, evB = allEvents(a.ctx, 100*time.Millisecond), allEvents(b.ctx, 100*time.Millisecond)
			t.Logf("after up: events rxe0 %v, rxe1 %v", evA, evB)
			if !hasPortEvent(evA, uverbs.EventPortActive) || !hasPortEvent(evB, uverbs.EventPortActive) {
				t.Errorf("events after up: rxe0 %v, rxe1 %v; want PORT_ACTIVE on both", evA, evB)
			}

			if !onKernel612() && tc.rs.retry == 7 {
				if len(s.errs) > 0 || stA != uverbs.QPStateRTS {
					t.Fatalf("while down: errors %s, QP %v; want none and RTS", wcSummary(s.errs), stA)
				}
				before := s.posted
				n := s.run(t, 30*time.Second, 64)
				t.Logf("after up: %d writes completed (%d of them posted while down) in %v", n, before-s.done+n, time.Since(upAt).Round(time.Millisecond))
				if n < 64 || len(s.errs) > 0 {
					t.Fatalf("after up: %d of 64 writes, errors %s", n, wcSummary(s.errs))
				}
				s.check(t)
				return
			}

			// The stream failed: wait for the flushed rest.
			s.run(t, 5*time.Second, 0)
			if s.done != s.posted {
				t.Fatalf("%d of %d writes completed", s.done, s.posted)
			}
			// Every write from the first error on fails: the writes in
			// flight when the link went down, up to the window (fewer
			// when a write's ACK came in just before, in the poll that
			// also brought the first error, so no write took its place).
			if n := len(s.errs); n == 0 || n > streamWindow || int(s.errs[0].WRID) != s.posted-n {
				t.Fatalf("error completions %s of %d writes posted, want the last 1 to %d of them (those in flight)", wcSummary(s.errs), s.posted, streamWindow)
			}
			first := uverbs.WCRetryExcErr
			if onKernel612() {
				first = uverbs.WCWRFlushErr
			}
			if st := s.errs[0].Status; st != first {
				t.Errorf("first error completion %v, want %v", st, first)
			}
			for _, w := range s.errs[1:] {
				if w.Status != uverbs.WCWRFlushErr {
					t.Errorf("later error completion %d: %v, want %v", w.WRID, w.Status, uverbs.WCWRFlushErr)
				}
			}
			if stA != uverbs.QPStateErr {
				t.Errorf("requester QP %v after the error, want ERR", stA)
			}
			// The memory is not checked here: the streamWindow writes
			// in flight, one per slot, completed in error, and an error
			// completion says nothing of the data (on 6.12 a write
			// flushed at the link's loss was seen to have landed whole
			// or in part). The check after reconnecting covers every
			// slot again.
			for _, e := range []*end{a, b} {
				if err := e.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
					t.Fatal(err)
				}
				e.gidx, e.gid = roceV2GID(t, e.ctx.Device().Name)
			}
			connectRetry(t, a, b.qp.Num(), b.gid, tc.rs)
			connectRetry(t, b, a.qp.Num(), a.gid, defaultRetry)
			s.posted, s.done, s.errs, s.drain, s.firstError = 0, 0, nil, false, time.Time{}
			if n := s.run(t, 10*time.Second, 32); n < 32 || len(s.errs) > 0 {
				t.Fatalf("after the QPs connected again: %d writes, errors %s", n, wcSummary(s.errs))
			}
			s.check(t)
		})
	}
}
