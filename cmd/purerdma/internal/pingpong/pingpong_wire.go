package pingpong

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"

	"github.com/purerdma/rdma/uverbs"
)

// This file is the part of the pingpong command that is not about verbs
// or flags: the out-of-band address exchange of rdma-core's
// ibv_{rc,uc,ud,srq}_pingpong (libibverbs/examples/*_pingpong.c and
// pingpong.c), the completion bookkeeping of their main loops, and the
// text they print.

// ppDest is one queue pair's address as the pingpong examples exchange it
// (struct pingpong_dest).
type ppDest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID uverbs.GID
}

// ppMsgLen is the size of one address message: the examples send
// sizeof "0000:000000:000000:00000000000000000000000000000000", the text
// and its NUL.
const ppMsgLen = len("0000:000000:000000:00000000000000000000000000000000") + 1

// ppDone is what the client sends last: sizeof "done", with the NUL.
const ppDone = "done\x00"

// ppSRQMsgs is how many addresses ibv_srq_pingpong exchanges each way,
// whatever its -q: MAX_QP. Those past the QPs in use are zero.
const ppSRQMsgs = 256

// marshal formats d the way the examples' sprintf("%04x:%06x:%06x:%s")
// and gid_to_wire_gid do: the GID as 32 hex digits of its bytes in order.
// It fails for a QPN or PSN wider than 24 bits, which would not fit.
func (d ppDest) marshal() ([ppMsgLen]byte, error) {
	var msg [ppMsgLen]byte
	if d.QPN > 0xffffff || d.PSN > 0xffffff {
		return msg, fmt.Errorf("pingpong: QPN %#x or PSN %#x is wider than 24 bits", d.QPN, d.PSN)
	}
	s := fmt.Sprintf("%04x:%06x:%06x:%032x", d.LID, d.QPN, d.PSN, d.GID[:])
	copy(msg[:], s) // len(s) == ppMsgLen-1: the last byte stays NUL
	return msg, nil
}

// parsePPDest decodes one address message: up to the first NUL, four
// colon-separated hex fields, LID (16 bits), QPN and PSN (24 bits) and
// the GID as exactly 32 hex digits. It accepts everything the examples
// send and rejects what their sscanf would misread.
func parsePPDest(msg []byte) (ppDest, error) {
	text := msg
	for i, c := range msg {
		if c == 0 {
			text = msg[:i]
			break
		}
	}
	var fields [4][]byte
	n, start := 0, 0
	for i := 0; i <= len(text); i++ {
		if i < len(text) && text[i] != ':' {
			continue
		}
		if n == len(fields) {
			return ppDest{}, fmt.Errorf("pingpong: address %q: more than 4 fields", text)
		}
		fields[n] = text[start:i]
		n++
		start = i + 1
	}
	if n != len(fields) {
		return ppDest{}, fmt.Errorf("pingpong: address %q: %d fields, want LID:QPN:PSN:GID", text, n)
	}
	var d ppDest
	lid, err := ppHex(fields[0], 16, "LID")
	if err != nil {
		return ppDest{}, err
	}
	d.LID = uint16(lid)
	if d.QPN, err = ppHex(fields[1], 24, "QPN"); err != nil {
		return ppDest{}, err
	}
	if d.PSN, err = ppHex(fields[2], 24, "PSN"); err != nil {
		return ppDest{}, err
	}
	g := fields[3]
	if len(g) != 2*len(d.GID) {
		return ppDest{}, fmt.Errorf("pingpong: GID %q: want %d hex digits", g, 2*len(d.GID))
	}
	for i := range d.GID {
		hi, ok1 := ppNibble(g[2*i])
		lo, ok2 := ppNibble(g[2*i+1])
		if !ok1 || !ok2 {
			return ppDest{}, fmt.Errorf("pingpong: GID %q: not hex", g)
		}
		d.GID[i] = hi<<4 | lo
	}
	return d, nil
}

// ppHex parses a non-empty field of hex digits that fits in bits.
func ppHex(f []byte, bits int, what string) (uint32, error) {
	if len(f) == 0 || len(f) > 8 {
		return 0, fmt.Errorf("pingpong: %s %q: want 1 to %d hex digits", what, f, bits/4)
	}
	var v uint64
	for _, c := range f {
		x, ok := ppNibble(c)
		if !ok {
			return 0, fmt.Errorf("pingpong: %s %q: not hex", what, f)
		}
		v = v<<4 | uint64(x)
	}
	if v >= 1<<bits {
		return 0, fmt.Errorf("pingpong: %s %#x: wider than %d bits", what, v, bits)
	}
	return uint32(v), nil
}

func ppNibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ppWriteDests sends the addresses, one message each, in one write.
func ppWriteDests(w io.Writer, dests []ppDest) error {
	buf := make([]byte, 0, len(dests)*ppMsgLen)
	for _, d := range dests {
		msg, err := d.marshal()
		if err != nil {
			return err
		}
		buf = append(buf, msg[:]...)
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("pingpong: sending the local address: %w", err)
	}
	return nil
}

// ppReadDests reads n address messages.
func ppReadDests(r io.Reader, n int) ([]ppDest, error) {
	dests := make([]ppDest, n)
	var msg [ppMsgLen]byte
	for i := range dests {
		if _, err := io.ReadFull(r, msg[:]); err != nil {
			return nil, fmt.Errorf("pingpong: reading remote address %d of %d: %w", i+1, n, err)
		}
		d, err := parsePPDest(msg[:])
		if err != nil {
			return nil, err
		}
		dests[i] = d
	}
	return dests, nil
}

// ppClientExchange is pp_client_exch_dest after the connect: send ours,
// read as many of theirs, send "done".
func ppClientExchange(rw io.ReadWriter, mine []ppDest) ([]ppDest, error) {
	if err := ppWriteDests(rw, mine); err != nil {
		return nil, err
	}
	theirs, err := ppReadDests(rw, len(mine))
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(rw, ppDone); err != nil {
		return nil, fmt.Errorf("pingpong: sending done: %w", err)
	}
	return theirs, nil
}

// ppServerExchange is pp_server_exch_dest after the accept: read the
// client's addresses, connect to them (before answering, so the client
// can send at once), send ours, wait for "done".
func ppServerExchange(rw io.ReadWriter, mine []ppDest, connect func([]ppDest) error) ([]ppDest, error) {
	theirs, err := ppReadDests(rw, len(mine))
	if err != nil {
		return nil, err
	}
	if err := connect(theirs); err != nil {
		return nil, fmt.Errorf("pingpong: couldn't connect to remote QP: %w", err)
	}
	if err := ppWriteDests(rw, mine); err != nil {
		return nil, err
	}
	var done [len(ppDone)]byte
	if _, err := io.ReadFull(rw, done[:]); err != nil {
		return nil, fmt.Errorf("pingpong: waiting for done: %w", err)
	}
	return theirs, nil
}

// ppNtop formats a GID as inet_ntop(AF_INET6) does in the examples'
// address lines: RFC 5952 text, with the last 32 bits dotted for
// IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses.
func ppNtop(g uverbs.GID) string {
	a := netip.AddrFrom16(g)
	// glibc prints ::a.b.c.d when exactly the first 96 bits are zero
	// (the 7th group is not); netip prints hex groups instead.
	if g[12] != 0 || g[13] != 0 {
		zero := true
		for _, b := range g[:12] {
			zero = zero && b == 0
		}
		if zero {
			return "::" + netip.AddrFrom4([4]byte(g[12:])).String()
		}
	}
	return a.String()
}

// ppAddressLine is the examples' "  local address:  LID ..." or
// "  remote address: LID ..." line. sep is ", " except in
// ibv_ud_pingpong's local line, which has ": ".
func ppAddressLine(which string, d ppDest, sep string) string {
	return fmt.Sprintf("  %-15s LID 0x%04x, QPN 0x%06x, PSN 0x%06x%sGID %s\n",
		which+" address:", d.LID, d.QPN, d.PSN, sep, ppNtop(d.GID))
}

// ppSummary is the two result lines, computed as the examples do: the
// elapsed microseconds as a C float, bytes = size * iters * 2.
func ppSummary(size, iters int, usec int64) string {
	us := float32(usec)
	bytes := int64(size) * int64(iters) * 2
	secs := ppCFloat(float64(us) / 1e6)
	return fmt.Sprintf("%d bytes in %s seconds = %s Mbit/sec\n", bytes, secs, ppCFloat(float64(bytes)*8/float64(us))) +
		fmt.Sprintf("%d iters in %s seconds = %s usec/iter\n", iters, secs, ppCFloat(float64(us/float32(iters))))
}

// ppCFloat is printf's %.2f, including its spelling of infinities and
// NaNs.
func ppCFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// Work request ids of the examples.
const (
	ppRecvWRID = 1
	ppSendWRID = 2
)

// ppLoop is the completion bookkeeping of the examples' main loops
// (parse_single_wc and its copies): count sends and receives, keep the
// receive queue topped up, and send the next message on a QP once both
// its last send and a receive completed.
type ppLoop struct {
	iters    int
	rxDepth  int
	refillAt int   // repost when this few receives are left: 1, or -q for srq
	routs    int   // receives posted
	scnt     int   // send completions
	rcnt     int   // receive completions
	pending  []int // per QP: ppRecvWRID|ppSendWRID bits still awaited
	// postRecv posts up to n receives and returns how many it posted
	// and why it stopped short.
	postRecv func(n int) (int, error)
	postSend func(qp int) error
}

// start posts the initial receives, as main does before the exchange.
func (l *ppLoop) start() error {
	n, err := l.postRecv(l.rxDepth)
	l.routs = n
	if n < l.rxDepth {
		return fmt.Errorf("pingpong: couldn't post receive (%d): %w", n, err)
	}
	return nil
}

// begin sets the QPs' first expectations: the client sends first on each
// QP, the server waits for a message.
func (l *ppLoop) begin(client bool) error {
	for qp := range l.pending {
		l.pending[qp] = ppRecvWRID
		if client {
			if err := l.postSend(qp); err != nil {
				return fmt.Errorf("pingpong: couldn't post send: %w", err)
			}
			l.pending[qp] |= ppSendWRID
		}
	}
	return nil
}

// done reports whether the loop has run its iterations.
func (l *ppLoop) done() bool { return l.rcnt >= l.iters && l.scnt >= l.iters }

// complete handles one completion on the QP with index qp.
func (l *ppLoop) complete(qp int, wc *uverbs.WorkCompletion) error {
	if wc.Status != uverbs.WCSuccess {
		return fmt.Errorf("pingpong: failed status %s (%d) for wr_id %d: %w", wc.Status.String(), uint32(wc.Status), int(wc.WRID), wc.Status)
	}
	switch wc.WRID {
	case ppSendWRID:
		l.scnt++
	case ppRecvWRID:
		l.routs--
		if l.routs <= l.refillAt {
			n, err := l.postRecv(l.rxDepth - l.routs)
			l.routs += n
			if l.routs < l.rxDepth {
				return fmt.Errorf("pingpong: couldn't post receive (%d): %w", l.routs, err)
			}
		}
		l.rcnt++
	default:
		return fmt.Errorf("pingpong: completion for unknown wr_id %d", int(wc.WRID))
	}
	l.pending[qp] &^= int(wc.WRID)
	if l.scnt < l.iters && l.pending[qp] == 0 {
		if err := l.postSend(qp); err != nil {
			return fmt.Errorf("pingpong: couldn't post send: %w", err)
		}
		l.pending[qp] = ppRecvWRID | ppSendWRID
	}
	return nil
}
