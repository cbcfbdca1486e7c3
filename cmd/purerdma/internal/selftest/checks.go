package selftest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// Checks are selftest's rows, in the order they run. Each makes
// its own QPs, CQs and memory (closed when it ends), moves data through
// the provider's post and poll paths and checks the data and every
// completion field the verbs define for it.
var Checks = []Check{
	{"rc send/recv", stSendRecv},
	{"rc send with imm", stSendImm},
	{"rc rdma write", stWrite},
	{"rc rdma write with imm", stWriteImm},
	{"rc rdma read", stRead},
	{"rc compare-and-swap", stCompareSwap},
	{"rc fetch-and-add", stFetchAdd},
	{"rc inline send", stInline},
	{"rc fence", stFence},
	{"rc unsignaled", stUnsignaled},
	{"rc post list", stPostList},
	{"rc ring wrap", stRingWrap},
	{"cq resize", stCQResize},
	{"uc send/recv", stUCSend},
	{"uc rdma write", stUCWrite},
	{"ud send", stUDSend},
	{"srq", stSRQ},
	{"completion channel", stChannel},
	{"error completion", stErrorCompletion},
	{"send queue full", stSendQueueFull},
}

// Reasons of the rows iWARP cannot do.
const (
	stNoImm = "iWARP (RDMAP) has no immediate data"
	stNoUC  = "iWARP has reliable connected QPs only, no UC"
)

// notIWARP returns a not-applicable error with reason on an iWARP
// device, nil otherwise.
func (r *Case) notIWARP(reason string) error {
	if r.env.iwarp {
		return stNA("%s", reason)
	}
	return nil
}

// sendRecv sends n bytes from a to b and checks both completions and the
// data; imm, if not nil, goes with it.
func (r *Case) sendRecv(a, b *stEnd, n int, imm *uint32, wrid uint64) error {
	msg := stPattern(a.buf[:n], byte(wrid))
	clear(b.buf[:n+64])
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: wrid + 1, SGL: []uverbs.SGE{b.sge(0, n+64)}}); err != nil {
		return fmt.Errorf("post recv: %w", err)
	}
	wr := &uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, n)}}
	if imm != nil {
		wr.Opcode, wr.Imm = uverbs.WRSendWithImm, *imm
	}
	if err := a.qp.PostSend(wr); err != nil {
		return fmt.Errorf("post send: %w", err)
	}
	sc, err := r.poll1(a.scq, "send")
	if err != nil {
		return err
	}
	if err := sendWant(a.qp, wrid, uverbs.WCSend).check("send", sc); err != nil {
		return err
	}
	rc, err := r.poll1(b.rcq, "receive")
	if err != nil {
		return err
	}
	want := recvWant(b.qp, wrid+1, n)
	if imm != nil {
		want.imm, want.immVal = true, *imm
	}
	if err := want.check("receive", rc); err != nil {
		return err
	}
	if err := r.wantBytes("received data", msg, b.buf[:n]); err != nil {
		return err
	}
	return r.wantBytes("bytes past the message", make([]byte, 64), b.buf[n:n+64])
}

func stSendRecv(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	n := min(4096, r.env.portAttr.ActiveMTU.Bytes()*2+100) // more than one packet
	if err := r.sendRecv(a, b, n, nil, 0x100); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes; wc opcode, byte_len, qp_num, wr_id", n), nil
}

func stSendImm(r *Case) (string, error) {
	if err := r.notIWARP(stNoImm); err != nil {
		return "", err
	}
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	imm := uint32(0xdeadbeef)
	if err := r.sendRecv(a, b, 100, &imm, 0x200); err != nil {
		return "", err
	}
	return "imm 0xdeadbeef and WITH_IMM on the receive", nil
}

func stWrite(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	n := 8192
	src := stPattern(a.buf[:n], 3)
	clear(b.buf)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x300, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, n)}, RemoteAddr: b.mr.Addr() + 1000, RKey: b.mr.RKey()})
	if err != nil {
		return "", fmt.Errorf("post write: %w", err)
	}
	wc, err := r.poll1(a.scq, "write")
	if err != nil {
		return "", err
	}
	if err := sendWant(a.qp, 0x300, uverbs.WCRDMAWrite).check("write", wc); err != nil {
		return "", err
	}
	want := make([]byte, len(b.buf))
	copy(want[1000:], src)
	if err := r.wantBytes("remote memory", want, b.buf); err != nil {
		return "", err
	}
	if err := r.quiet(b.rcq, "the target's receive CQ"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes at offset 1000, nothing else written, no receive consumed", n), nil
}

func stWriteImm(r *Case) (string, error) {
	if err := r.notIWARP(stNoImm); err != nil {
		return "", err
	}
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	n := 3000
	src := stPattern(a.buf[:n], 4)
	clear(b.buf)
	// The receive the immediate consumes: its buffer must stay as it is.
	recvArea := stPattern(b.buf[32768:32768+64], 9)
	recvWas := append([]byte(nil), recvArea...)
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 0x401, SGL: []uverbs.SGE{b.sge(32768, 64)}}); err != nil {
		return "", fmt.Errorf("post recv: %w", err)
	}
	const imm = 0x01020304
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x400, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled, Imm: imm,
		SGL: []uverbs.SGE{a.sge(0, n)}, RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()})
	if err != nil {
		return "", fmt.Errorf("post write with imm: %w", err)
	}
	wc, err := r.poll1(a.scq, "write with imm")
	if err != nil {
		return "", err
	}
	if err := sendWant(a.qp, 0x400, uverbs.WCRDMAWrite).check("write with imm", wc); err != nil {
		return "", err
	}
	rc, err := r.poll1(b.rcq, "receive")
	if err != nil {
		return "", err
	}
	want := wcWant{wrid: 0x401, opcode: uverbs.WCRecvRDMAWithImm, qpn: b.qp.Num(), byteLen: n, imm: true, immVal: imm}
	if err := want.check("receive", rc); err != nil {
		return "", err
	}
	if err := r.wantBytes("remote memory", src, b.buf[100:100+n]); err != nil {
		return "", err
	}
	if err := r.wantBytes("the receive's buffer", recvWas, b.buf[32768:32768+64]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes written; receive RECV_RDMA_WITH_IMM with imm %#x, its buffer untouched", n, imm), nil
}

func stRead(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	n := 5000
	src := stPattern(b.buf[2000:2000+n], 5)
	clear(a.buf)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x500, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(100, n)}, RemoteAddr: b.mr.Addr() + 2000, RKey: b.mr.RKey()})
	if err != nil {
		return "", fmt.Errorf("post read: %w", err)
	}
	wc, err := r.poll1(a.scq, "read")
	if err != nil {
		return "", err
	}
	want := sendWant(a.qp, 0x500, uverbs.WCRDMARead)
	want.byteLen = n
	if err := want.check("read", wc); err != nil {
		return "", err
	}
	if err := r.wantBytes("read data", src, a.buf[100:100+n]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes; wc byte_len %d", n, n), nil
}

// The atomics' operands are byte palindromes and their sums carry-free,
// so they read the same in either byte order: ConnectX (mlx5) does
// atomics on memory and returns the old value in big-endian order on a
// little-endian host, rxe in host order, and both are correct. The
// fetch-and-add check also says which order the device uses.
const (
	stAtomA = 0x0102030404030201
	stAtomB = 0x1122334444332211
	stAtomC = 0x5566778888776655
	stAtomD = 0x0101010101010101
)

func (r *Case) atomicsApply() error {
	if err := r.notIWARP("iWARP (RDMAP) has no atomics"); err != nil {
		return err
	}
	if r.env.attr.AtomicCap == uverbs.AtomicNone {
		return stNA("the device reports atomic_cap %v", r.env.attr.AtomicCap)
	}
	return nil
}

// atomic posts one atomic from a to b's memory at off, returning the old
// value into a's memory at 512, and checks its completion.
func (r *Case) atomic(a, b *stEnd, op uverbs.WROpcode, off int, compareAdd, swap uint64, wrid uint64) error {
	clear(a.buf[512:520])
	err := a.qp.PostSend(&uverbs.SendWR{WRID: wrid, Opcode: op, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(512, 8)},
		RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey(), CompareAdd: compareAdd, Swap: swap})
	if err != nil {
		return fmt.Errorf("post %v: %w", op, err)
	}
	wc, err := r.poll1(a.scq, op.String())
	if err != nil {
		return err
	}
	wcOp := uverbs.WCCompSwap
	if op == uverbs.WRAtomicFetchAndAdd {
		wcOp = uverbs.WCFetchAdd
	}
	want := sendWant(a.qp, wrid, wcOp)
	want.byteLen = 8
	return want.check(op.String(), wc)
}

func stU64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func stCompareSwap(r *Case) (string, error) {
	if err := r.atomicsApply(); err != nil {
		return "", err
	}
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	binary.NativeEndian.PutUint64(b.buf[64:], stAtomA)
	if err := r.atomic(a, b, uverbs.WRAtomicCmpAndSwp, 64, stAtomA, stAtomB, 0x600); err != nil {
		return "", err
	}
	if err := r.wantBytes("old value returned by a matching compare", stU64(stAtomA), a.buf[512:520]); err != nil {
		return "", err
	}
	if err := r.wantBytes("memory after a matching compare", stU64(stAtomB), b.buf[64:72]); err != nil {
		return "", err
	}
	if err := r.atomic(a, b, uverbs.WRAtomicCmpAndSwp, 64, stAtomA, stAtomC, 0x601); err != nil {
		return "", err
	}
	if err := r.wantBytes("old value returned by a failing compare", stU64(stAtomB), a.buf[512:520]); err != nil {
		return "", err
	}
	if err := r.wantBytes("memory after a failing compare", stU64(stAtomB), b.buf[64:72]); err != nil {
		return "", err
	}
	return "matching compare swapped; failing compare left memory; old values returned", nil
}

func stFetchAdd(r *Case) (string, error) {
	if err := r.atomicsApply(); err != nil {
		return "", err
	}
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	binary.NativeEndian.PutUint64(b.buf[128:], stAtomA)
	for i, want := range []uint64{stAtomA, stAtomA + stAtomD} {
		if err := r.atomic(a, b, uverbs.WRAtomicFetchAndAdd, 128, stAtomD, 0, 0x700+uint64(i)); err != nil {
			return "", err
		}
		if err := r.wantBytes(fmt.Sprintf("old value of add %d", i+1), stU64(want), a.buf[512:520]); err != nil {
			return "", err
		}
		if err := r.wantBytes(fmt.Sprintf("memory after add %d", i+1), stU64(want+stAtomD), b.buf[128:136]); err != nil {
			return "", err
		}
	}
	// 0 + 1 shows the device's byte order.
	clear(b.buf[192:200])
	if err := r.atomic(a, b, uverbs.WRAtomicFetchAndAdd, 192, 1, 0, 0x710); err != nil {
		return "", err
	}
	order := ""
	switch {
	case binary.NativeEndian.Uint64(b.buf[192:]) == 1:
		order = "host"
	case binary.BigEndian.Uint64(b.buf[192:]) == 1:
		order = "big-endian"
	default:
		return "", fmt.Errorf("0 + 1 left % x in memory: 1 in neither byte order", b.buf[192:200])
	}
	if err := r.wantBytes("old value of 0 + 1", make([]byte, 8), a.buf[512:520]); err != nil {
		return "", err
	}
	return fmt.Sprintf("2 adds: old values and sums right; the device adds in %s byte order", order), nil
}

func stInline(r *Case) (string, error) {
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeRC, inline: 64}, stEndConfig{typ: uverbs.QPTypeRC})
	if err != nil {
		if _, _, err2 := r.rcPair(); err2 == nil {
			return "", stNA("the device refuses a QP with 64 bytes of inline data: %v", err)
		}
		return "", err
	}
	if a.qp.Cap().MaxInlineData == 0 {
		return "", stNA("the QP's MaxInlineData is 0")
	}
	// Memory that is not registered at all.
	unreg, err := uverbs.AllocBuffer(4096)
	if err != nil {
		return "", err
	}
	r.onClose(unreg.Close)
	n := int(min(a.qp.Cap().MaxInlineData, 256))
	msg := append([]byte(nil), stPattern(unreg.Bytes()[:n], 6)...)
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: 0x801, SGL: []uverbs.SGE{b.sge(0, n+16)}}); err != nil {
		return "", fmt.Errorf("post recv: %w", err)
	}
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x800, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: uint64(sys.PointerTo(unreg.Bytes())), Length: uint32(n)}}})
	if err != nil {
		return "", fmt.Errorf("post inline send: %w", err)
	}
	clear(unreg.Bytes()) // copied when posted: this must not change what arrives
	sc, err := r.poll1(a.scq, "inline send")
	if err != nil {
		return "", err
	}
	if err := sendWant(a.qp, 0x800, uverbs.WCSend).check("inline send", sc); err != nil {
		return "", err
	}
	rc, err := r.poll1(b.rcq, "receive")
	if err != nil {
		return "", err
	}
	if err := recvWant(b.qp, 0x801, n).check("receive", rc); err != nil {
		return "", err
	}
	if err := r.wantBytes("received data", msg, b.buf[:n]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes (MaxInlineData %d) from unregistered memory, cleared after the post", n, a.qp.Cap().MaxInlineData), nil
}

func stFence(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	const n, rounds = 1024, 8
	for round := range rounds {
		remote := stPattern(b.buf[8192:8192+n], byte(round*11+1))
		want := append([]byte(nil), remote...)
		stPattern(a.buf[:n], byte(round*11+5)) // stale: what an unfenced send might carry
		clear(b.buf[:n])
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(round), SGL: []uverbs.SGE{b.sge(0, n)}}); err != nil {
			return "", fmt.Errorf("post recv: %w", err)
		}
		read := &uverbs.SendWR{WRID: 0x900, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(0, n)}, RemoteAddr: b.mr.Addr() + 8192, RKey: b.mr.RKey()}
		read.Next = &uverbs.SendWR{WRID: 0x901, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendFence,
			SGL: []uverbs.SGE{a.sge(0, n)}}
		if err := a.qp.PostSend(read); err != nil {
			return "", fmt.Errorf("post read and fenced send: %w", err)
		}
		wcs, err := r.poll(a.scq, 2, "read and fenced send")
		if err != nil {
			return "", err
		}
		rw := sendWant(a.qp, 0x900, uverbs.WCRDMARead)
		rw.byteLen = n
		if err := rw.check("read (first)", wcs[0]); err != nil {
			return "", err
		}
		if err := sendWant(a.qp, 0x901, uverbs.WCSend).check("fenced send (second)", wcs[1]); err != nil {
			return "", err
		}
		rc, err := r.poll1(b.rcq, "receive")
		if err != nil {
			return "", err
		}
		if err := recvWant(b.qp, uint64(round), n).check("receive", rc); err != nil {
			return "", err
		}
		if err := r.wantBytes(fmt.Sprintf("round %d: what the fenced send carried", round), want, b.buf[:n]); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d rounds: the fenced send carried the data the read brought, completions in order", rounds), nil
}

func stUnsignaled(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	depth := int(a.qp.Cap().MaxSendWR)
	const size = 64
	rounds := 4 // each fills the send queue: unsignaled requests must be retired
	for round := range rounds {
		clear(b.buf)
		want := make([]byte, depth*size)
		for i := range depth {
			src := stPattern(a.buf[i*size:(i+1)*size], byte(round*depth+i))
			copy(want[i*size:], src)
			wr := &uverbs.SendWR{WRID: uint64(round<<16 | i), Opcode: uverbs.WRRDMAWrite,
				SGL: []uverbs.SGE{a.sge(i*size, size)}, RemoteAddr: b.mr.Addr() + uint64(i*size), RKey: b.mr.RKey()}
			if i == depth-1 {
				wr.Flags = uverbs.SendSignaled
			}
			if err := a.qp.PostSend(wr); err != nil {
				return "", fmt.Errorf("round %d: post %d of %d: %w", round, i+1, depth, err)
			}
		}
		wc, err := r.poll1(a.scq, "signaled write")
		if err != nil {
			return "", err
		}
		if err := sendWant(a.qp, uint64(round<<16|(depth-1)), uverbs.WCRDMAWrite).check("signaled write", wc); err != nil {
			return "", err
		}
		if err := r.quiet(a.scq, "after the signaled write"); err != nil {
			return "", err
		}
		if err := r.wantBytes(fmt.Sprintf("round %d: memory", round), want, b.buf[:depth*size]); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d rounds of %d unsignaled writes + 1 signaled: one completion each, all data landed", rounds, depth-1), nil
}

// stCQResize resizes a send CQ while the completions of a full send
// queue of RDMA writes are due (their data has landed), to more entries
// and then to fewer: each completion must come out once, in order, and
// the CQ must go on through three wraps of each new size.
func stCQResize(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	depth := int(a.qp.Cap().MaxSendWR)
	const size = 64
	seq := 0
	// writes posts n signaled writes, each of its own pattern into its
	// own slot of b's memory, and returns the first's sequence number.
	writes := func(n int) (int, error) {
		from := seq
		for range n {
			slot := seq % depth * size
			stPattern(a.buf[slot:slot+size], byte(seq))
			wr := &uverbs.SendWR{WRID: uint64(seq), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{a.sge(slot, size)}, RemoteAddr: b.mr.Addr() + uint64(slot), RKey: b.mr.RKey()}
			if err := a.qp.PostSend(wr); err != nil {
				return 0, fmt.Errorf("post write %d: %w", seq, err)
			}
			seq++
		}
		return from, nil
	}
	complete := func(what string, from, n int) error {
		wcs, err := r.poll(a.scq, n, what)
		if err != nil {
			return err
		}
		for i, wc := range wcs {
			if err := sendWant(a.qp, uint64(from+i), uverbs.WCRDMAWrite).check(fmt.Sprintf("%s: write %d", what, from+i), wc); err != nil {
				return err
			}
		}
		return nil
	}
	var sizes []string
	for _, n := range []int{4 * depth, depth} {
		from, err := writes(depth)
		if err != nil {
			return "", err
		}
		// The last write's data in place: the writes are done, their
		// completions due or in the CQ.
		last := (seq - 1) % depth * size
		deadline := time.Now().Add(pollWait)
		for !bytes.Equal(b.buf[last:last+size], a.buf[last:last+size]) {
			if time.Now().After(deadline) {
				return "", fmt.Errorf("the writes' data did not land in %v", pollWait)
			}
			runtime.Gosched()
		}
		if err := a.scq.Resize(n); errors.Is(err, uverbs.ErrNotSupported) {
			return "", stNA("%v", err)
		} else if err != nil {
			return "", fmt.Errorf("resize the send CQ to %d with %d completions due: %w", n, depth, err)
		}
		what := fmt.Sprintf("after the resize to %d", n)
		if err := complete(what, from, depth); err != nil {
			return "", err
		}
		for range 3 * a.scq.Size() / depth {
			from, err := writes(depth)
			if err != nil {
				return "", err
			}
			if err := complete(what, from, depth); err != nil {
				return "", err
			}
		}
		sizes = append(sizes, fmt.Sprint(a.scq.Size()))
		if err := r.wantBytes(what+": memory", a.buf[:depth*size], b.buf[:depth*size]); err != nil {
			return "", err
		}
	}
	if err := r.quiet(a.scq, "after the resizes"); err != nil {
		return "", err
	}
	return fmt.Sprintf("resized to %s entries with %d completions due: each once, in order; %d writes in all", strings.Join(sizes, " and "), depth, seq), nil
}

func stPostList(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	const n, size = 8, 256 // alternately sends and writes
	clear(b.buf)
	var head *uverbs.SendWR
	tail := &head
	for i := range n {
		stPattern(a.buf[i*size:(i+1)*size], byte(i+20))
		wr := &uverbs.SendWR{WRID: uint64(0xa00 + i), Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(i*size, size)}}
		if i%2 == 0 {
			wr.Opcode = uverbs.WRSend
			if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(0xb00 + i), SGL: []uverbs.SGE{b.sge(i*size, size)}}); err != nil {
				return "", fmt.Errorf("post recv: %w", err)
			}
		} else {
			wr.Opcode, wr.RemoteAddr, wr.RKey = uverbs.WRRDMAWrite, b.mr.Addr()+uint64(i*size), b.mr.RKey()
		}
		*tail = wr
		tail = &wr.Next
	}
	if err := a.qp.PostSend(head); err != nil {
		return "", fmt.Errorf("post a list of %d: %w", n, err)
	}
	wcs, err := r.poll(a.scq, n, "the list's completions")
	if err != nil {
		return "", err
	}
	for i, wc := range wcs {
		op := uverbs.WCSend
		if i%2 == 1 {
			op = uverbs.WCRDMAWrite
		}
		if err := sendWant(a.qp, uint64(0xa00+i), op).check(fmt.Sprintf("request %d", i), wc); err != nil {
			return "", err
		}
	}
	rcs, err := r.poll(b.rcq, n/2, "receives")
	if err != nil {
		return "", err
	}
	for i, wc := range rcs {
		if err := recvWant(b.qp, uint64(0xb00+2*i), size).check(fmt.Sprintf("receive %d", i), wc); err != nil {
			return "", err
		}
	}
	if err := r.wantBytes("data of the list", a.buf[:n*size], b.buf[:n*size]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d requests (sends and writes) in one post: completions in order, all data", n), nil
}

// stRingWrap sends -iters messages through queues of 16 (as the device
// rounds them), kept full: batches of 1 to 16 posted one by one or as a
// list, so that posts start everywhere in the rings and cross their
// ends, only the last send of a batch signaled (its completion retires
// the batch's unsignaled sends). Every receive is checked in order, data
// and completion, and every send completion must be a batch's last.
func stRingWrap(r *Case) (string, error) {
	a, b, err := r.rcPair()
	if err != nil {
		return "", err
	}
	depth := int(min(a.qp.Cap().MaxSendWR, b.qp.Cap().MaxRecvWR))
	const size = 16
	total := r.env.iters
	recvs := make([]uverbs.RecvWR, depth)
	sends := make([]uverbs.SendWR, depth)
	wcs := make([]uverbs.WorkCompletion, depth)
	var signaled []int // the seq of each batch's signaled send, oldest first
	sent, retired, recvDone, batches := 0, 0, 0, 0
	want := make([]byte, size)
	deadline := time.Now().Add(pollWait)
	for spins := 0; recvDone < total || retired < total; spins++ {
		progress := false
		if n := min(1+batches%depth, total-sent); sent < total && sent-retired+n <= depth && sent-recvDone+n <= depth {
			if err := postRingBatch(a, b, recvs[:n], sends[:n], sent, depth, batches%3 == 2); err != nil {
				return "", err
			}
			signaled = append(signaled, sent+n-1)
			sent += n
			batches++
			progress = true
		}
		k, err := b.rcq.Poll(wcs)
		if err != nil {
			return "", fmt.Errorf("poll the receive CQ: %w", err)
		}
		for _, wc := range wcs[:k] {
			seq := recvDone
			if err := recvWant(b.qp, uint64(seq), size).check(fmt.Sprintf("message %d", seq), wc); err != nil {
				return "", err
			}
			slot := seq % depth
			binary.LittleEndian.PutUint64(want, uint64(seq))
			binary.LittleEndian.PutUint64(want[8:], ^uint64(seq))
			if err := r.wantBytes(fmt.Sprintf("message %d", seq), want, b.buf[slot*size:slot*size+size]); err != nil {
				return "", err
			}
			recvDone++
		}
		progress = progress || k > 0
		if k, err = a.scq.Poll(wcs); err != nil {
			return "", fmt.Errorf("poll the send CQ: %w", err)
		}
		for _, wc := range wcs[:k] {
			if len(signaled) == 0 {
				return "", fmt.Errorf("send completion %s with no signaled send outstanding", stFmtWC(wc))
			}
			seq := signaled[0]
			signaled = signaled[1:]
			if err := sendWant(a.qp, uint64(seq), uverbs.WCSend).check(fmt.Sprintf("message %d (a batch's signaled send)", seq), wc); err != nil {
				return "", err
			}
			retired = seq + 1
		}
		progress = progress || k > 0
		if progress {
			spins = 0
			deadline = time.Now().Add(pollWait)
			continue
		}
		if spins%64 == 63 {
			if err := r.ctx.Err(); err != nil {
				return "", err
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("%d messages sent, %d received, %d sends completed; then nothing for %v", sent, recvDone, retired, pollWait)
			}
		}
		runtime.Gosched()
	}
	return fmt.Sprintf("%d messages through queues of %d (%d times around), %d batches; data and completions checked",
		total, depth, total/depth, batches), nil
}

// postRingBatch posts receives and sends of messages first .. first+n-1
// (n = len(recvs)), one by one or as lists; message seq carries seq and
// its complement in slot seq % depth.
func postRingBatch(a, b *stEnd, recvs []uverbs.RecvWR, sends []uverbs.SendWR, first, depth int, asList bool) error {
	const size = 16
	n := len(recvs)
	for k := range n {
		seq := first + k
		slot := seq % depth
		binary.LittleEndian.PutUint64(a.buf[slot*size:], uint64(seq))
		binary.LittleEndian.PutUint64(a.buf[slot*size+8:], ^uint64(seq))
		recvs[k] = uverbs.RecvWR{WRID: uint64(seq), SGL: []uverbs.SGE{b.sge(slot*size, size)}}
		sends[k] = uverbs.SendWR{WRID: uint64(seq), Opcode: uverbs.WRSend, SGL: []uverbs.SGE{a.sge(slot*size, size)}}
		if k == n-1 {
			sends[k].Flags = uverbs.SendSignaled
		}
		if asList && k > 0 {
			recvs[k-1].Next, sends[k-1].Next = &recvs[k], &sends[k]
		}
	}
	if asList {
		if err := b.qp.PostRecv(&recvs[0]); err != nil {
			return fmt.Errorf("message %d: post a list of %d receives: %w", first, n, err)
		}
		if err := a.qp.PostSend(&sends[0]); err != nil {
			return fmt.Errorf("message %d: post a list of %d sends: %w", first, n, err)
		}
		return nil
	}
	for k := range n {
		if err := b.qp.PostRecv(&recvs[k]); err != nil {
			return fmt.Errorf("message %d: post recv: %w", first+k, err)
		}
	}
	for k := range n {
		if err := a.qp.PostSend(&sends[k]); err != nil {
			return fmt.Errorf("message %d: post send: %w", first+k, err)
		}
	}
	return nil
}

func stUCSend(r *Case) (string, error) {
	if err := r.notIWARP(stNoUC); err != nil {
		return "", err
	}
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeUC}, stEndConfig{typ: uverbs.QPTypeUC})
	if err != nil {
		return "", err
	}
	if err := r.sendRecv(a, b, 2000, nil, 0xc00); err != nil {
		return "", err
	}
	imm := uint32(0xfeedf00d)
	if err := r.sendRecv(a, b, 64, &imm, 0xc10); err != nil {
		return "", err
	}
	return "2000 bytes, then 64 with imm; completions and data", nil
}

func stUCWrite(r *Case) (string, error) {
	if err := r.notIWARP(stNoUC); err != nil {
		return "", err
	}
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeUC}, stEndConfig{typ: uverbs.QPTypeUC})
	if err != nil {
		return "", err
	}
	n := 3000
	src := append([]byte(nil), stPattern(a.buf[:n], 12)...)
	clear(b.buf)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0xd00, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, n)}, RemoteAddr: b.mr.Addr() + 500, RKey: b.mr.RKey()})
	if err != nil {
		return "", fmt.Errorf("post write: %w", err)
	}
	wc, err := r.poll1(a.scq, "write")
	if err != nil {
		return "", err
	}
	if err := sendWant(a.qp, 0xd00, uverbs.WCRDMAWrite).check("write", wc); err != nil {
		return "", err
	}
	// UC completes a write when it is sent, not when it landed: wait for
	// the memory (a following send with a receive would also do).
	if err := r.sendRecv(a, b, 16, nil, 0xd10); err != nil {
		return "", fmt.Errorf("send after the write: %w", err)
	}
	if err := r.wantBytes("remote memory", src, b.buf[500:500+n]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes written (checked after a following send arrived)", n), nil
}

func stUDSend(r *Case) (string, error) {
	if err := r.notIWARP("iWARP has reliable connected QPs only, no UD"); err != nil {
		return "", err
	}
	e := r.env
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeUD}, stEndConfig{typ: uverbs.QPTypeUD})
	if err != nil {
		return "", err
	}
	pd, _ := r.pd()
	ah, err := pd.CreateAH(e.ahAttr())
	if err != nil {
		return "", fmt.Errorf("create AH: %w", err)
	}
	r.onClose(ah.Close)
	const n = 200
	for i := range 2 {
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(0xe10 + i), SGL: []uverbs.SGE{b.sge(i*1024, uverbs.GRHLen+n)}}); err != nil {
			return "", fmt.Errorf("post recv: %w", err)
		}
	}
	// First a datagram with the wrong Q_Key, which b must drop, then the
	// right one, which must land in b's first receive.
	stPattern(a.buf[:n], 99)
	msg := stPattern(a.buf[n:2*n], 13)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0xe00, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, n)}, AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: udQKey + 1,
		Next: &uverbs.SendWR{WRID: 0xe01, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(n, n)}, AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: udQKey}})
	if err != nil {
		return "", fmt.Errorf("post send: %w", err)
	}
	wcs, err := r.poll(a.scq, 2, "sends")
	if err != nil {
		return "", err
	}
	for i, wc := range wcs {
		if err := sendWant(a.qp, uint64(0xe00+i), uverbs.WCSend).check("send", wc); err != nil {
			return "", err
		}
	}
	rc, err := r.poll1(b.rcq, "receive")
	if err != nil {
		return "", err
	}
	global := e.gidIndex >= 0
	want := wcWant{wrid: 0xe10, opcode: uverbs.WCRecv, qpn: b.qp.Num(), byteLen: uverbs.GRHLen + n, ud: true,
		srcQP: a.qp.Num(), grh: global}
	if err := want.check("receive", rc); err != nil {
		return "", err
	}
	if err := r.wantBytes("datagram (a datagram with the wrong Q_Key must be dropped)", msg, b.buf[uverbs.GRHLen:uverbs.GRHLen+n]); err != nil {
		return "", err
	}
	if err := r.quiet(b.rcq, "the receive CQ (the wrong Q_Key's datagram)"); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("%d bytes via an AH; src_qp, byte_len; the wrong Q_Key's datagram dropped", n)
	if global {
		grh, err := uverbs.ParseGRH(b.buf[:uverbs.GRHLen])
		if err != nil {
			return "", fmt.Errorf("the receive's GRH: %w", err)
		}
		if grh.Src != e.gid || grh.Dst != e.gid {
			return "", fmt.Errorf("the receive's GRH says %v -> %v, want %v both", grh.Src, grh.Dst, e.gid)
		}
		detail += fmt.Sprintf("; GRH (IPv%d) with source and destination GID", grh.Version)
	}
	return detail, nil
}

func stSRQ(r *Case) (string, error) {
	e := r.env
	if e.attr.MaxSRQ == 0 {
		return "", stNA("the device reports max_srq 0")
	}
	pd, err := r.pd()
	if err != nil {
		return "", err
	}
	srq, err := pd.CreateSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		return "", fmt.Errorf("create SRQ: %w", err)
	}
	r.onClose(srq.Close)
	// Two RC connections whose receiving QPs share the SRQ.
	var senders, receivers [2]*stEnd
	for i := range 2 {
		a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeRC}, stEndConfig{typ: uverbs.QPTypeRC, srq: srq})
		if err != nil {
			return "", err
		}
		senders[i], receivers[i] = a, b
	}
	const per, size = 3, 128
	mem := receivers[0] // receive buffers: in the first receiver's memory
	clear(mem.buf)
	for k := range 2 * per {
		if err := srq.PostRecv(&uverbs.RecvWR{WRID: uint64(0xf00 + k), SGL: []uverbs.SGE{mem.sge(k*size, size)}}); err != nil {
			return "", fmt.Errorf("post SRQ recv: %w", err)
		}
	}
	msgs := map[string]int{} // message -> sender
	for k := range per {
		for i := range 2 {
			m := senders[i].buf[k*size : (k+1)*size]
			stPattern(m, byte(16*i+k+1))
			msgs[string(m)] = i
			err := senders[i].qp.PostSend(&uverbs.SendWR{WRID: uint64(k), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{senders[i].sge(k*size, size)}})
			if err != nil {
				return "", fmt.Errorf("post send: %w", err)
			}
		}
	}
	for i := range 2 {
		wcs, err := r.poll(senders[i].scq, per, "sends")
		if err != nil {
			return "", err
		}
		for k, wc := range wcs {
			if err := sendWant(senders[i].qp, uint64(k), uverbs.WCSend).check("send", wc); err != nil {
				return "", err
			}
		}
	}
	used := map[uint64]bool{}
	for i := range 2 {
		wcs, err := r.poll(receivers[i].rcq, per, fmt.Sprintf("receiver %d", i))
		if err != nil {
			return "", err
		}
		for _, wc := range wcs {
			if wc.WRID < 0xf00 || wc.WRID >= 0xf00+2*per || used[wc.WRID] {
				return "", fmt.Errorf("receive %s: wr_id not one of the SRQ's, or used twice", stFmtWC(wc))
			}
			used[wc.WRID] = true
			if err := recvWant(receivers[i].qp, wc.WRID, size).check("receive", wc); err != nil {
				return "", err
			}
			k := int(wc.WRID - 0xf00)
			got := mem.buf[k*size : (k+1)*size]
			if tamper != nil {
				tamper(r.name, got)
			}
			from, ok := msgs[string(got)]
			if !ok {
				return "", fmt.Errorf("receive %#x holds no message that was sent (% x ...)", wc.WRID, got[:8])
			}
			if from != i {
				return "", fmt.Errorf("receive %#x on QP %#x holds a message of the other connection", wc.WRID, wc.QPNum)
			}
			delete(msgs, string(got))
		}
	}
	return fmt.Sprintf("2 RC QPs on one SRQ: %d receives, each message once, qp_num of the QP it came to", 2*per), nil
}

func stChannel(r *Case) (string, error) {
	ch, err := r.env.ctx.CreateCompChannel()
	if err != nil {
		return "", fmt.Errorf("create channel: %w", err)
	}
	r.onClose(ch.Close)
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeRC}, stEndConfig{typ: uverbs.QPTypeRC, channel: ch})
	if err != nil {
		return "", err
	}
	const rounds = 3
	for round := range rounds {
		if err := b.rcq.RequestNotify(false); err != nil {
			return "", fmt.Errorf("request notify: %w", err)
		}
		if err := r.sendRecvNoPoll(a, b, 64, uint64(round)); err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(r.ctx, pollWait)
		cq, err := ch.Wait(ctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("round %d: wait for the event: %w", round, err)
		}
		if cq != b.rcq {
			return "", fmt.Errorf("round %d: the event names another CQ", round)
		}
		cq.AckEvents(1)
		if u := cq.Unacked(); u != 0 {
			return "", fmt.Errorf("round %d: %d events unacknowledged after AckEvents", round, u)
		}
		rc, err := r.poll1(b.rcq, "receive")
		if err != nil {
			return "", err
		}
		if err := recvWant(b.qp, uint64(round)+1, 64).check("receive", rc); err != nil {
			return "", err
		}
		if _, err := r.poll1(a.scq, "send"); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d rounds of arm, send, event, ack, poll", rounds), nil
}

// sendRecvNoPoll posts a receive on b and a send from a.
func (r *Case) sendRecvNoPoll(a, b *stEnd, n int, wrid uint64) error {
	if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: wrid + 1, SGL: []uverbs.SGE{b.sge(0, n)}}); err != nil {
		return fmt.Errorf("post recv: %w", err)
	}
	err := a.qp.PostSend(&uverbs.SendWR{WRID: wrid, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, n)}})
	if err != nil {
		return fmt.Errorf("post send: %w", err)
	}
	return nil
}

func stErrorCompletion(r *Case) (string, error) {
	if err := r.notIWARP("an iWARP RDMA WRITE completes once sent: the target's access error ends the connection (TERMINATE), not the write's completion"); err != nil {
		return "", err
	}
	// b's memory allows no remote write.
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeRC}, stEndConfig{typ: uverbs.QPTypeRC, access: uverbs.AccessLocalWrite | uverbs.AccessRemoteRead})
	if err != nil {
		return "", err
	}
	was := append([]byte(nil), stPattern(b.buf[:256], 17)...)
	stPattern(a.buf[:256], 18)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x1000, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(0, 256)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
	if err != nil {
		return "", fmt.Errorf("post write: %w", err)
	}
	wc, err := r.poll1(a.scq, "write without remote write access")
	if err != nil {
		return "", err
	}
	if err := (wcWant{wrid: 0x1000, status: uverbs.WCRemAccessErr, qpn: a.qp.Num()}).check("write", wc); err != nil {
		return "", err
	}
	if err := r.wantBytes("memory without remote write access", was, b.buf[:256]); err != nil {
		return "", err
	}
	attr, err := a.qp.Query(uverbs.QPAttrState)
	if err != nil {
		return "", fmt.Errorf("query the QP: %w", err)
	}
	if attr.State != uverbs.QPStateErr {
		return "", fmt.Errorf("after the error the QP is %v, want ERR", attr.State)
	}
	// A request posted now is flushed.
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x1001, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}})
	if err != nil {
		return "", fmt.Errorf("post to the QP in ERR: %w", err)
	}
	wc, err = r.poll1(a.scq, "send on the QP in ERR")
	if err != nil {
		return "", err
	}
	if err := (wcWant{wrid: 0x1001, status: uverbs.WCWRFlushErr, qpn: a.qp.Num()}).check("send on the QP in ERR", wc); err != nil {
		return "", err
	}
	// Fresh QPs on the same device work.
	c, d, err := r.rcPair()
	if err != nil {
		return "", fmt.Errorf("fresh QPs: %w", err)
	}
	if err := r.sendRecv(c, d, 512, nil, 0x1010); err != nil {
		return "", fmt.Errorf("fresh QPs: %w", err)
	}
	return "REM_ACCESS_ERR, memory untouched, QP in ERR, next request WR_FLUSH_ERR; fresh QPs work", nil
}

func stSendQueueFull(r *Case) (string, error) {
	if err := r.notIWARP("iWARP has no receiver-not-ready retry (a send that finds no receive ends the connection), so sends cannot be held to fill the queue"); err != nil {
		return "", err
	}
	// b posts no receive yet: a's sends wait (receiver not ready,
	// retried for ever) and fill a's send queue.
	a, b, err := r.pair(stEndConfig{typ: uverbs.QPTypeRC}, stEndConfig{typ: uverbs.QPTypeRC, recvWR: 64})
	if err != nil {
		return "", err
	}
	depth := int(a.qp.Cap().MaxSendWR)
	if int(b.qp.Cap().MaxRecvWR) < depth+1 {
		return "", fmt.Errorf("receive queue of %d for a send queue of %d", b.qp.Cap().MaxRecvWR, depth)
	}
	const size = 32
	for i := range depth {
		stPattern(a.buf[i*size:(i+1)*size], byte(i+1))
		err := a.qp.PostSend(&uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{a.sge(i*size, size)}})
		if err != nil {
			return "", fmt.Errorf("post %d of %d (MaxSendWR): %w", i+1, depth, err)
		}
	}
	rejected := stPattern(a.buf[4096:4096+size], 0xee)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0xdead, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(4096, size)}})
	if !errors.Is(err, uverbs.ErrBusy) {
		return "", fmt.Errorf("post %d into a send queue of %d: %v, want ErrBusy", depth+1, depth, err)
	}
	// Now the receives: the queued sends go, one each, and one receive
	// is left for the marker below.
	clear(b.buf)
	for i := range depth + 1 {
		if err := b.qp.PostRecv(&uverbs.RecvWR{WRID: uint64(0x100 + i), SGL: []uverbs.SGE{b.sge(i*size, size)}}); err != nil {
			return "", fmt.Errorf("post recv: %w", err)
		}
	}
	wcs, err := r.poll(a.scq, depth, "the queued sends")
	if err != nil {
		return "", err
	}
	for i, wc := range wcs {
		if err := sendWant(a.qp, uint64(i), uverbs.WCSend).check("queued send", wc); err != nil {
			return "", err
		}
	}
	rcs, err := r.poll(b.rcq, depth, "receives of the queued sends")
	if err != nil {
		return "", err
	}
	for i, wc := range rcs {
		if err := recvWant(b.qp, uint64(0x100+i), size).check("receive", wc); err != nil {
			return "", err
		}
	}
	if err := r.wantBytes("the queued sends' data", a.buf[:depth*size], b.buf[:depth*size]); err != nil {
		return "", err
	}
	// The rejected request must never run: the marker takes the last
	// receive, not it.
	marker := stPattern(a.buf[8192:8192+size], 0x5a)
	err = a.qp.PostSend(&uverbs.SendWR{WRID: 0x4a4b, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.sge(8192, size)}})
	if err != nil {
		return "", fmt.Errorf("post after the queue drained: %w", err)
	}
	sc, err := r.poll1(a.scq, "marker send")
	if err != nil {
		return "", err
	}
	if err := sendWant(a.qp, 0x4a4b, uverbs.WCSend).check("marker send (the refused request must not complete)", sc); err != nil {
		return "", err
	}
	rc, err := r.poll1(b.rcq, "marker receive")
	if err != nil {
		return "", err
	}
	if err := recvWant(b.qp, uint64(0x100+depth), size).check("marker receive", rc); err != nil {
		return "", err
	}
	got := b.buf[depth*size : (depth+1)*size]
	if string(got) == string(rejected) {
		return "", errors.New("the request refused with ErrBusy ran")
	}
	if err := r.wantBytes("the marker after the refused request", marker, got); err != nil {
		return "", err
	}
	if err := r.quiet(a.scq, "send CQ after the marker"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d sends fill MaxSendWR %d, the next is ErrBusy at once and never runs", depth, depth), nil
}
