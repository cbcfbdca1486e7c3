// Package pingpong is "purerdma pingpong": rdma-core's ibv_rc_pingpong,
// ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong
// (libibverbs/examples) in Go: the same TCP exchange of
// "LID:QPN:PSN:GID" addresses (port 18515 unless -p), the same queue
// pairs, message sizes, iteration and completion logic, and the same
// printed lines, so either end can be the C tool. Without HOST it is the
// server and waits for one client.
//
// Left out are the C tools' options for features this library does not
// have (on-demand paging, completion timestamps, device memory, the
// ibv_wr_* send API, CoCo unprotected memory); they fail as unsupported.
package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/progress"
	"github.com/purerdma/rdma/spin"
	"github.com/purerdma/rdma/uverbs"
)

// Command is "purerdma pingpong".
var Command = cli.Command{
	Name: "pingpong",
	Usage: "  pingpong rc|uc|ud|srq [flags] [HOST]     exchange messages with ibv_{rc,uc,ud,srq}_pingpong, a server without HOST\n" +
		"                                           flags: -d DEV -i IBPORT -g GIDIDX -s SIZE -n ITERS -r RXDEPTH -e -p TCPPORT\n" +
		"                                           -m MTU -l SL -c, -q NUMQP (srq), -json; pingpong rc -h lists them\n",
	Help: ppHelp(ppRC),
	Run:  pingpongCmd,
}

// ppKind is the example a run speaks as.
type ppKind int

const (
	ppRC ppKind = iota
	ppUC
	ppUD
	ppSRQ
)

var ppKindNames = [...]string{ppRC: "rc", ppUC: "uc", ppUD: "ud", ppSRQ: "srq"}

func (k ppKind) String() string { return ppKindNames[k] }

// ppOptions are the command line of one run.
type ppOptions struct {
	kind    ppKind
	host    string // the server to connect to; "" to be the server
	tcpPort int    // -p
	dev     string // -d; "" for the first device
	ibPort  int    // -i
	size    int    // -s
	mtu     uverbs.MTU
	rxDepth int // -r
	iters   int // -n
	sl      int // -l
	events  bool
	gidx    int // -g; -1 for none
	numQP   int // -q, srq only
	check   bool
	json    bool // -json: only a summary, as JSON
}

// ppOpt is one option of the examples' getopt_long tables.
type ppOpt struct {
	cli.Opt
	kinds []ppKind // nil: every kind
	// unsupported, if set, names the C feature the option enables,
	// which this command does not have.
	unsupported string
}

var ppOpts = []ppOpt{
	{Opt: cli.Opt{Short: 'p', Long: "port", HasArg: true}},
	{Opt: cli.Opt{Short: 'd', Long: "ib-dev", HasArg: true}},
	{Opt: cli.Opt{Short: 'i', Long: "ib-port", HasArg: true}},
	{Opt: cli.Opt{Short: 's', Long: "size", HasArg: true}},
	{Opt: cli.Opt{Short: 'm', Long: "mtu", HasArg: true}, kinds: []ppKind{ppRC, ppUC, ppSRQ}},
	{Opt: cli.Opt{Short: 'q', Long: "num-qp", HasArg: true}, kinds: []ppKind{ppSRQ}},
	{Opt: cli.Opt{Short: 'r', Long: "rx-depth", HasArg: true}},
	{Opt: cli.Opt{Short: 'n', Long: "iters", HasArg: true}},
	{Opt: cli.Opt{Short: 'l', Long: "sl", HasArg: true}},
	{Opt: cli.Opt{Short: 'e', Long: "events"}},
	{Opt: cli.Opt{Short: 'g', Long: "gid-idx", HasArg: true}},
	{Opt: cli.Opt{Short: 'c', Long: "chk"}},
	{Opt: cli.Opt{Short: 'o', Long: "odp"}, kinds: []ppKind{ppRC, ppSRQ}, unsupported: "on-demand paging"},
	{Opt: cli.Opt{Short: 'O', Long: "iodp"}, kinds: []ppKind{ppRC}, unsupported: "implicit on-demand paging"},
	{Opt: cli.Opt{Short: 'P', Long: "prefetch"}, kinds: []ppKind{ppRC}, unsupported: "prefetching an on-demand MR"},
	{Opt: cli.Opt{Short: 't', Long: "ts"}, kinds: []ppKind{ppRC}, unsupported: "completion timestamps"},
	{Opt: cli.Opt{Short: 'j', Long: "dm"}, kinds: []ppKind{ppRC}, unsupported: "device memory"},
	{Opt: cli.Opt{Short: 'N', Long: "new_send"}, kinds: []ppKind{ppRC}, unsupported: "the ibv_wr_* send API"},
	{Opt: cli.Opt{Short: 'U', Long: "allow-cc-unprotected"}, kinds: []ppKind{ppRC}, unsupported: "CoCo unprotected memory"},
}

func ppHelp(k ppKind) string {
	size := "4096"
	if k == ppUD {
		size = "1024"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n")
	fmt.Fprintf(&b, "  purerdma pingpong %s            start a server and wait for connection\n", k)
	fmt.Fprintf(&b, "  purerdma pingpong %s <host>     connect to server at <host>\n\n", k)
	fmt.Fprintf(&b, "Options:\n")
	fmt.Fprintf(&b, "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n")
	fmt.Fprintf(&b, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(&b, "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n")
	fmt.Fprintf(&b, "  -s, --size=<size>      size of message to exchange (default %s)\n", size)
	if k != ppUD {
		fmt.Fprintf(&b, "  -m, --mtu=<size>       path MTU (default 1024)\n")
	}
	if k == ppSRQ {
		fmt.Fprintf(&b, "  -q, --num-qp=<num>     number of QPs to use (default 16)\n")
	}
	fmt.Fprintf(&b, "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n")
	fmt.Fprintf(&b, "  -n, --iters=<iters>    number of exchanges (default 1000)\n")
	fmt.Fprintf(&b, "  -l, --sl=<sl>          service level value\n")
	fmt.Fprintf(&b, "  -e, --events           sleep on CQ events (default poll)\n")
	fmt.Fprintf(&b, "  -g, --gid-idx=<gid index> local port gid index (RoCE needs one)\n")
	fmt.Fprintf(&b, "  -c, --chk              validate received buffer\n")
	fmt.Fprintf(&b, "  -json, --json          print only a summary, as one JSON object: test, role, size,\n")
	fmt.Fprintf(&b, "                         iters, bytes, seconds, mbit_per_sec, usec_per_iter\n")
	fmt.Fprintf(&b, "\nExamples:\n")
	fmt.Fprintf(&b, "  purerdma pingpong %s -d rxe0 -g 1                      (the server)\n", k)
	fmt.Fprintf(&b, "  purerdma pingpong %s -d rxe1 -g 1 -json 198.18.0.1     (a client; both sides need the same -n, -s)\n", k)
	return b.String()
}

func pingpongCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parsePingpongArgs(args)
	if errors.Is(err, cli.ErrHelp) {
		io.WriteString(stdout, ppHelp(o.kind))
		return nil
	}
	if err != nil {
		return err
	}
	return runPingpong(ctx, o, stdout, progress.New(stderr))
}

// ppSummaryJSON is the summary "pingpong -json" prints.
type ppSummaryJSON struct {
	Test         string  `json:"test"` // rc, uc, ud or srq
	Role         string  `json:"role"` // server or client
	Size         int     `json:"size"`
	Iters        int     `json:"iters"`
	Bytes        int64   `json:"bytes"` // both ways
	Seconds      float64 `json:"seconds"`
	MbitPerSec   float64 `json:"mbit_per_sec"`
	USecPerIter  float64 `json:"usec_per_iter"`
	InvalidPages int     `json:"invalid_pages"` // with -c, on the server
}

// parsePingpongArgs parses "KIND [options] [HOST]" the way the examples'
// getopt_long does (cli.Getopt, operands among the options) and
// purerdma's -json. Numbers are C's strtol base 0 (0x1f, 017, 31), but
// checked.
func parsePingpongArgs(args []string) (ppOptions, error) {
	if len(args) == 0 {
		return ppOptions{}, cli.UsageError("pingpong needs rc, uc, ud or srq")
	}
	o := ppOptions{tcpPort: 18515, ibPort: 1, size: 4096, mtu: uverbs.MTU1024, rxDepth: 500, iters: 1000, gidx: -1, numQP: 16}
	switch args[0] {
	case "rc":
		o.kind = ppRC
	case "uc":
		o.kind = ppUC
	case "ud":
		o.kind, o.size = ppUD, 1024
	case "srq":
		o.kind = ppSRQ
	case "-h", "-help", "--help", "help":
		return o, cli.ErrHelp
	default:
		return ppOptions{}, cli.UsageError("pingpong: unknown transport %q (rc, uc, ud or srq)", args[0])
	}
	g := cli.Getopt{Cmd: "pingpong " + o.kind.String(), Permute: true, JSON: &o.json}
	unsupported := map[byte]string{}
	for _, op := range ppOpts {
		if op.kinds == nil || slices.Contains(op.kinds, o.kind) {
			g.Opts = append(g.Opts, op.Opt)
			unsupported[op.Short] = op.unsupported
		}
	}
	operands, err := g.Parse(args[1:], func(op cli.Opt, val string) (err error) {
		if u := unsupported[op.Short]; u != "" {
			return cli.UsageError("%s: -%c (%s) is not supported", g.Cmd, op.Short, u)
		}
		num := func(lo, hi int64) (int, error) {
			n, err := strconv.ParseInt(val, 0, 64)
			if err != nil || n < lo || n > hi {
				return 0, cli.UsageError("%s: -%c %q: want a number from %d to %d", g.Cmd, op.Short, val, lo, hi)
			}
			return int(n), nil
		}
		switch op.Short {
		case 'p':
			o.tcpPort, err = num(0, 65535)
		case 'd':
			o.dev = val
		case 'i':
			o.ibPort, err = num(1, 255)
		case 's':
			o.size, err = num(1, 1<<30)
		case 'm':
			var n int
			if n, err = num(256, 4096); err == nil {
				o.mtu = ppMTU(n)
				if o.mtu == 0 {
					err = cli.UsageError("%s: -m %q: the MTU is 256, 512, 1024, 2048 or 4096", g.Cmd, val)
				}
			}
		case 'q':
			o.numQP, err = num(1, ppSRQMsgs-1)
		case 'r':
			o.rxDepth, err = num(1, 1<<20)
		case 'n':
			o.iters, err = num(1, 1<<31-1)
		case 'l':
			o.sl, err = num(0, 15)
		case 'e':
			o.events = true
		case 'g':
			o.gidx, err = num(-1, 255)
		case 'c':
			o.check = true
		}
		return err
	})
	if err != nil {
		return o, err
	}
	switch len(operands) {
	case 0:
	case 1:
		o.host = operands[0]
	default:
		return o, cli.UsageError("%s takes at most one host, got %q", g.Cmd, operands)
	}
	if o.kind == ppSRQ && o.numQP > o.rxDepth {
		return o, cli.UsageError("%s: rx_depth %d is too small for %d QPs -- must have at least one receive per QP", g.Cmd, o.rxDepth, o.numQP)
	}
	return o, nil
}

// ppMTU is pp_mtu_to_enum: 0 for a size that is no MTU.
func ppMTU(n int) uverbs.MTU {
	for m := uverbs.MTU256; m <= uverbs.MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// ppQKey is the Q_Key ibv_ud_pingpong uses.
const ppQKey = 0x11111111

// ppSession is one run's verbs objects (struct pingpong_context).
type ppSession struct {
	o         ppOptions
	ctx       *uverbs.Context
	ch        *uverbs.CompChannel
	pd        *uverbs.PD
	buf       *uverbs.Buffer
	mr        *uverbs.MR
	cq        *uverbs.CQ
	srq       *uverbs.SRQ
	qps       []*uverbs.QP
	ah        *uverbs.AH
	sendFlags uverbs.SendFlags
	recvSGE   [1]uverbs.SGE
	sendSGE   [1]uverbs.SGE
	recvWR    uverbs.RecvWR
	sendWR    uverbs.SendWR
	closers   []func() error // in creation order; closed in reverse
}

// closeAll closes everything the session created, newest first, and
// returns the first error.
func (s *ppSession) closeAll() error {
	var first error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	s.closers = nil
	return first
}

func (s *ppSession) onClose(f func() error) { s.closers = append(s.closers, f) }

// open creates what pp_init_ctx creates, in its order, and moves the QPs
// to INIT.
func (s *ppSession) open(dev uverbs.Device) error {
	o := &s.o
	bufLen := o.size
	if o.kind == ppUD {
		bufLen += 40 // room for the GRH a UD receive starts with
	}
	buf, err := uverbs.AllocBuffer(bufLen)
	if err != nil {
		return err
	}
	s.buf = buf
	s.onClose(buf.Close)
	if o.kind != ppSRQ {
		b := buf.Bytes()
		for i := range b {
			b[i] = 0x7b // as the examples' memset; ibv_srq_pingpong's buffer stays zero
		}
	}
	c, err := dev.Open(nil)
	if err != nil {
		return fmt.Errorf("pingpong: couldn't get context for %s: %w", dev.Name, err)
	}
	s.ctx = c
	s.onClose(c.Close)
	if o.kind == ppUD {
		pa, err := c.QueryPort(o.ibPort)
		if err != nil {
			return fmt.Errorf("pingpong: unable to query port info for port %d: %w", o.ibPort, err)
		}
		if mtu := pa.ActiveMTU.Bytes(); o.size > mtu {
			return fmt.Errorf("pingpong: requested size larger than port MTU (%d)", mtu)
		}
	}
	if o.events {
		if s.ch, err = c.CreateCompChannel(); err != nil {
			return fmt.Errorf("pingpong: couldn't create completion channel: %w", err)
		}
		s.onClose(s.ch.Close)
	}
	if s.pd, err = c.AllocPD(); err != nil {
		return fmt.Errorf("pingpong: couldn't allocate PD: %w", err)
	}
	s.onClose(s.pd.Close)
	if s.mr, err = s.pd.RegBuffer(buf, uverbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("pingpong: couldn't register MR: %w", err)
	}
	s.onClose(s.mr.Close)
	cqSize := o.rxDepth + 1
	if o.kind == ppSRQ {
		cqSize = o.rxDepth + o.numQP
	}
	if s.cq, err = c.CreateCQ(uverbs.CQConfig{Size: cqSize, Channel: s.ch}); err != nil {
		return fmt.Errorf("pingpong: couldn't create CQ: %w", err)
	}
	s.onClose(s.cq.Close)
	typ, nqp := uverbs.QPTypeRC, 1
	switch o.kind {
	case ppUC:
		typ = uverbs.QPTypeUC
	case ppUD:
		typ = uverbs.QPTypeUD
	case ppSRQ:
		nqp = o.numQP
		if s.srq, err = s.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: uint32(o.rxDepth), MaxSGE: 1}); err != nil {
			return fmt.Errorf("pingpong: couldn't create SRQ: %w", err)
		}
		s.onClose(s.srq.Close)
	}
	s.sendFlags = uverbs.SendSignaled
	for i := range nqp {
		cfg := uverbs.QPConfig{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}}
		if s.srq == nil {
			cfg.Cap.MaxRecvWR, cfg.Cap.MaxRecvSGE = uint32(o.rxDepth), 1
		}
		qp, err := s.pd.CreateQP(cfg)
		if err != nil {
			return fmt.Errorf("pingpong: couldn't create QP[%d]: %w", i, err)
		}
		s.qps = append(s.qps, qp)
		s.onClose(qp.Close)
		if int(qp.Cap().MaxInlineData) >= o.size {
			s.sendFlags |= uverbs.SendInline
		}
	}
	for i, qp := range s.qps {
		attr := &uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: o.ibPort}
		mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
		if typ == uverbs.QPTypeUD {
			attr.QKey = ppQKey
			mask |= uverbs.QPAttrQKey
		} else {
			mask |= uverbs.QPAttrAccessFlags // none: the peer only sends
		}
		if err := qp.Modify(attr, mask); err != nil {
			return fmt.Errorf("pingpong: failed to modify QP[%d] to INIT: %w", i, err)
		}
	}
	// The work requests every post reuses (pp_post_recv, pp_post_send).
	addr := s.mr.Addr()
	s.recvSGE[0] = uverbs.SGE{Addr: addr, Length: uint32(o.size), LKey: s.mr.LKey()}
	s.sendSGE[0] = s.recvSGE[0]
	if o.kind == ppUD {
		s.recvSGE[0].Length += 40
		s.sendSGE[0].Addr += 40
	}
	s.recvWR = uverbs.RecvWR{WRID: ppRecvWRID, SGL: s.recvSGE[:]}
	s.sendWR = uverbs.SendWR{WRID: ppSendWRID, Opcode: uverbs.WRSend, Flags: s.sendFlags, SGL: s.sendSGE[:]}
	return nil
}

// postRecv posts up to n receives and returns how many it posted.
func (s *ppSession) postRecv(n int) (int, error) {
	for i := range n {
		var err error
		if s.srq != nil {
			err = s.srq.PostRecv(&s.recvWR)
		} else {
			err = s.qps[0].PostRecv(&s.recvWR)
		}
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

func (s *ppSession) postSend(qp int) error { return s.qps[qp].PostSend(&s.sendWR) }

// connect moves the QPs to RTR and RTS towards the peer's (pp_connect_ctx).
func (s *ppSession) connect(my, rem []ppDest) error {
	o := &s.o
	// The examples use a GRH when the peer sent a GID, as RoCE requires,
	// and take the GID of the first address for every QP.
	global := [8]byte(rem[0].GID[8:]) != [8]byte{}
	if global && o.gidx < 0 {
		return errors.New("the peer sent a GID but -g gave no local GID index")
	}
	grh := uverbs.GlobalRoute{DGID: rem[0].GID, SGIDIndex: o.gidx, HopLimit: 1}
	if o.kind == ppUD {
		if err := s.qps[0].Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
			return fmt.Errorf("failed to modify QP to RTR: %w", err)
		}
		if err := s.qps[0].Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: my[0].PSN}, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
			return fmt.Errorf("failed to modify QP to RTS: %w", err)
		}
		ah := uverbs.AHAttr{DLID: rem[0].LID, SL: uint8(o.sl), PortNum: o.ibPort}
		if global {
			grh.HopLimit = 64
			ah.IsGlobal, ah.GRH = true, grh
		}
		var err error
		if s.ah, err = s.pd.CreateAH(ah); err != nil {
			return fmt.Errorf("failed to create AH: %w", err)
		}
		s.onClose(s.ah.Close)
		s.sendWR.AH, s.sendWR.RemoteQPN, s.sendWR.RemoteQKey = s.ah, rem[0].QPN, ppQKey
		return nil
	}
	for i, qp := range s.qps {
		attr := &uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: o.mtu, DestQPNum: rem[i].QPN, RQPSN: rem[i].PSN,
			AHAttr: uverbs.AHAttr{DLID: rem[i].LID, SL: uint8(o.sl), PortNum: o.ibPort}}
		if global {
			attr.AHAttr.IsGlobal, attr.AHAttr.GRH = true, grh
		}
		mask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
		if o.kind != ppUC {
			attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
			mask |= uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
		}
		if err := qp.Modify(attr, mask); err != nil {
			return fmt.Errorf("failed to modify QP[%d] to RTR: %w", i, err)
		}
		attr.State, attr.SQPSN = uverbs.QPStateRTS, my[i].PSN
		mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
		if o.kind != ppUC {
			attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = 14, 7, 7, 1
			mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
		}
		if err := qp.Modify(attr, mask); err != nil {
			return fmt.Errorf("failed to modify QP[%d] to RTS: %w", i, err)
		}
	}
	return nil
}

// qpIndex finds the QP a completion belongs to (find_qp); with one QP it
// is always 0, as in the examples that do not look.
func (s *ppSession) qpIndex(wc *uverbs.WorkCompletion) (int, error) {
	if len(s.qps) == 1 {
		return 0, nil
	}
	for i, qp := range s.qps {
		if qp.Num() == wc.QPNum {
			return i, nil
		}
	}
	return 0, fmt.Errorf("pingpong: couldn't find QPN %06x", wc.QPNum)
}

func runPingpong(ctx context.Context, o ppOptions, stdout io.Writer, prog *progress.Line) (err error) {
	text := stdout // the C tools' lines; -json prints only its summary
	if o.json {
		text = io.Discard
	}
	dev, err := ppDevice(o.dev)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(dev.Ports, func(p uverbs.Port) bool { return p.Num == o.ibPort })
	if i < 0 {
		return fmt.Errorf("pingpong: %s has no port %d (-i)", dev.Name, o.ibPort)
	}
	if dev.Ports[i].LinkLayer == "Ethernet" && o.gidx < 0 {
		// The C tools fail later, when the QP refuses an address
		// without a GRH.
		return fmt.Errorf("pingpong: %s port %d is RoCE, which needs a GID: give its index with -g", dev.Name, o.ibPort)
	}
	s := &ppSession{o: o}
	defer func() {
		if cerr := s.closeAll(); err == nil {
			err = cerr
		}
	}()
	if err := s.open(dev); err != nil {
		return err
	}
	loop := &ppLoop{iters: o.iters, rxDepth: o.rxDepth, refillAt: 1, pending: make([]int, len(s.qps)),
		postRecv: s.postRecv, postSend: s.postSend}
	if o.kind == ppSRQ {
		loop.refillAt = o.numQP
	}
	if err := loop.start(); err != nil {
		return err
	}
	if o.events {
		if err := s.cq.RequestNotify(false); err != nil {
			return fmt.Errorf("pingpong: couldn't request CQ notification: %w", err)
		}
	}
	pa, err := s.ctx.QueryPort(o.ibPort)
	if err != nil {
		return fmt.Errorf("pingpong: couldn't get port info: %w", err)
	}
	if o.kind != ppUD && pa.LinkLayer != uverbs.LinkLayerEthernet && pa.LID == 0 {
		return errors.New("pingpong: couldn't get local LID")
	}
	var gid uverbs.GID
	if o.gidx >= 0 {
		if gid, err = s.ctx.QueryGID(o.ibPort, o.gidx); err != nil {
			return fmt.Errorf("pingpong: can't read sgid of index %d: %w", o.gidx, err)
		}
	}
	nmsg := 1
	if o.kind == ppSRQ {
		nmsg = ppSRQMsgs
	}
	my := make([]ppDest, nmsg)
	localSep := ", "
	if o.kind == ppUD {
		localSep = ": " // sic, in ibv_ud_pingpong
	}
	for i, qp := range s.qps {
		my[i] = ppDest{LID: pa.LID, QPN: qp.Num(), PSN: rand.Uint32() & 0xffffff, GID: gid}
		io.WriteString(text, ppAddressLine("local", my[i], localSep))
	}
	var rem []ppDest
	if o.host != "" {
		rem, err = ppDial(ctx, o.host, o.tcpPort, my)
	} else {
		rem, err = ppListen(ctx, o.tcpPort, my, func(rem []ppDest) error { return s.connect(my, rem) })
	}
	if err != nil {
		return err
	}
	for i := range s.qps {
		io.WriteString(text, ppAddressLine("remote", rem[i], ", "))
	}
	if o.host != "" {
		if err := s.connect(my, rem); err != nil {
			return fmt.Errorf("pingpong: %w", err)
		}
	}
	pageSize := os.Getpagesize()
	data := s.buf.Bytes()[len(s.buf.Bytes())-o.size:]
	if o.host != "" && o.check {
		for i := 0; i < o.size; i += pageSize {
			data[i] = 0 // i / page_size % sizeof(char), as the examples write it
		}
	}

	if err := loop.begin(o.host != ""); err != nil {
		return err
	}
	start := time.Now()
	nwc := 2
	if o.kind == ppSRQ {
		nwc = o.numQP + o.rxDepth
	}
	wc := make([]uverbs.WorkCompletion, nwc)
	events := 0
	pace := spin.New(ctx, spin.DefaultInterval)
	defer prog.Done()
	for !loop.done() {
		prog.Tick("pingpong %s: %d of %d sends, %d receives", o.kind, loop.scnt, o.iters, loop.rcnt)
		if o.events {
			cq, err := s.ch.Wait(ctx)
			if err != nil {
				return fmt.Errorf("pingpong: failed to get cq_event: %w", err)
			}
			events++
			if cq != s.cq {
				return errors.New("pingpong: CQ event for unknown CQ")
			}
			if err := s.cq.RequestNotify(false); err != nil {
				return fmt.Errorf("pingpong: couldn't request CQ notification: %w", err)
			}
		}
		var ne int
		for {
			if ne, err = s.cq.Poll(wc); err != nil {
				return fmt.Errorf("pingpong: poll CQ failed: %w", err)
			}
			if ne > 0 || o.events {
				break
			}
			// Busy polling, as the examples do, paced so the runtime
			// does not preempt it; a canceled context still ends it.
			if err := pace.Spin(); err != nil {
				return fmt.Errorf("pingpong: %d of %d sends and %d receives done: %w", loop.scnt, o.iters, loop.rcnt, err)
			}
		}
		for i := range wc[:ne] {
			qp, err := s.qpIndex(&wc[i])
			if err != nil {
				return err
			}
			if err := loop.complete(qp, &wc[i]); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)
	prog.Done()
	io.WriteString(text, ppSummary(o.size, o.iters, elapsed.Microseconds()))
	invalid := 0
	if o.host == "" && o.check {
		for i := 0; i < o.size; i += pageSize {
			if data[i] != 0 {
				fmt.Fprintf(text, "invalid data in page %d\n", i/pageSize)
				invalid++
			}
		}
	}
	if o.json {
		us := max(float64(elapsed.Nanoseconds())/1e3, 1e-3)
		bytes := int64(o.size) * int64(o.iters) * 2
		res := ppSummaryJSON{Test: o.kind.String(), Role: "client", Size: o.size, Iters: o.iters, Bytes: bytes,
			Seconds: us / 1e6, MbitPerSec: float64(bytes) * 8 / us, USecPerIter: us / float64(o.iters), InvalidPages: invalid}
		if o.host == "" {
			res.Role = "server"
		}
		if err := cli.WriteJSON(stdout, res); err != nil {
			return err
		}
	}
	s.cq.AckEvents(events)
	if o.kind == ppSRQ {
		s.linger(ctx, loop, wc)
	}
	return nil
}

// linger keeps the SRQ QPs open a moment after the loop. With several
// QPs, ibv_srq_pingpong's bookkeeping can end on this side while the
// peer still has a message in flight to it (one at most per QP, on a QP
// still waiting for a receive), and the peer may need that message's
// acknowledgement to finish: a destroyed QP would leave it retrying
// until "transport retry counter exceeded" (TestPPLoop shows the race).
// The acknowledgement needs only the QP, so this waits while some QP
// still waits for a receive, until the CQ was quiet for 100 ms, 1 s at
// most. Nothing more is sent.
func (s *ppSession) linger(ctx context.Context, loop *ppLoop, wc []uverbs.WorkCompletion) {
	const quiet, most = 100 * time.Millisecond, time.Second
	waiting := func() bool {
		for _, p := range loop.pending {
			if p&ppRecvWRID != 0 {
				return true
			}
		}
		return false
	}
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	deadline, quietUntil := time.Now().Add(most), time.Now().Add(quiet)
	for waiting() && time.Now().Before(deadline) && time.Now().Before(quietUntil) {
		n, err := s.cq.Poll(wc)
		if err != nil {
			return
		}
		for i := range wc[:n] {
			if qp, err := s.qpIndex(&wc[i]); err == nil && wc[i].WRID == ppRecvWRID {
				loop.pending[qp] &^= ppRecvWRID
			}
		}
		if n > 0 {
			quietUntil = time.Now().Add(quiet)
			continue
		}
		t.Reset(time.Millisecond)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ppDevice is the device -d names, or the first one; the errors list
// the devices that exist, or say how to add one.
func ppDevice(name string) (uverbs.Device, error) {
	if _, err := devs.All(); err != nil {
		return uverbs.Device{}, fmt.Errorf("pingpong: %w", err)
	}
	d, err := devs.Find(name)
	if err != nil {
		// ibv_*_pingpong's words, then what exists.
		return uverbs.Device{}, fmt.Errorf("pingpong: IB device %s not found: %w", name, err)
	}
	return d, nil
}

// ppDial is the client's side of the exchange.
func ppDial(ctx context.Context, host string, port int, my []ppDest) ([]ppDest, error) {
	var d net.Dialer
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pingpong: couldn't connect to %s: %w", addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rem, err := ppClientExchange(conn, my)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return rem, err
}

// ppListen is the server's side: one client, then the listener closes.
func ppListen(ctx context.Context, port int, my []ppDest, connect func([]ppDest) error) ([]ppDest, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("pingpong: couldn't listen to port %d: %w", port, err)
	}
	stopListen := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stopListen()
	ln.Close()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("pingpong: accept() failed: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rem, err := ppServerExchange(conn, my, connect)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return rem, err
}
