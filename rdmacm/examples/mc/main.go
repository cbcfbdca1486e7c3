// Command mc is the multicast example of the "RDMA Aware Networks
// Programming User Manual" (Mellanox, Rev 1.4, section 8.2) in Go:
// rdma_getaddrinfo, rdma_reg_msgs, rdma_post_recv and
// rdma_join_multicast, with a UD queue pair on each side.
//
//	mc -m mc_address [-s] [-b bind_address] [-p port_number] [-c msg_count] [-l msg_length]
//
// Both sides join the group; the sender (-s) then sends msg_count
// datagrams of msg_length bytes of 0x12, each a SEND with immediate
// holding its QP number, to the group's QP 0xffffff, and the receiver
// waits for as many. On RoCE (soft-RoCE included) give -b, the address
// of the device to join from. -p is accepted and unused, as in C. The
// messages (stdout, and the VERB_ERR lines on stderr), the exit status
// (the result of the final rdma_leave_multicast, as in C: 0, or 255 for
// -1) and the datagrams are the C program's; it works with the C program
// and with rdma-core's mckey (whose default message size is 100 bytes:
// give it -S 64, or give this one -l 100).
//
// # Where the Go port differs from the listing
//
//   - The listing busy-polls its CQ for each completion; the port sleeps
//     on the CQ's completion channel between completions.
//   - The listing's CQ holds 2 completions while the receiver posts
//     msg_count (4) receives: datagrams that arrive faster than it polls
//     overflow the CQ, and the receiver waits for ever for the one lost.
//     The port's CQ holds msg_count.
//   - The listing's create_resources returns an uninitialized value when
//     a PD or CQ cannot be made; the port returns -1.
//   - The listing never frees the event channel (its event thread is
//     still reading it at exit); neither does the port.
//
// The C listing is under testdata/, with only what the manual's text
// conversion broke repaired.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rdmacm/examples/internal/clike"
	"github.com/purerdma/rdma/uverbs"
)

// verbErr is VERB_ERR: "<verb> returned <ret> errno <errno>" on stderr.
var verbErr = clike.VerbErr

const (
	defaultPort      = "51216"
	defaultMsgCount  = 4
	defaultMsgLength = 64
	grhSize          = 40 // sizeof(struct ibv_grh)

	eaddrnotavail = 99 // what librdmacm's rdma_leave_multicast sets for a group it did not join
	einval        = 22
)

// context is struct context.
type mcContext struct {
	// User parameters
	sender     bool
	bindAddr   string
	mcastAddr  string
	serverPort string
	msgCount   int
	msgLength  int

	// Resources
	mcastSockaddr netip.Addr
	joined        bool
	id            *rdmacm.ID
	channel       *rdmacm.EventChannel
	pd            *uverbs.PD
	cqCh          *uverbs.CompChannel
	cq            *uverbs.CQ
	mr            *uverbs.MR
	buf           []byte
	ah            *uverbs.AH
	remoteQPN     uint32
	remoteQKey    uint32
}

func printf(format string, a ...any) { fmt.Printf(format, a...) }

// cmThread is cm_thread: it prints every later CM event.
func cmThread(ctx *mcContext) {
	for {
		ev, err := ctx.channel.Next(context.Background())
		if err != nil {
			verbErr("rdma_get_cm_event", -1, clike.Errno(err, 22))
			return
		}
		printf("event %s, status %d\n", clike.EventStr(ev.Type), ev.Status)
	}
}

// getCMEvent is get_cm_event: the next event, -1 unless it is of type t.
func getCMEvent(ch *rdmacm.EventChannel, t rdmacm.EventType) (*rdmacm.Event, int) {
	ev, err := ch.Next(context.Background())
	if err != nil {
		verbErr("rdma_resolve_addr", -1, clike.Errno(err, 22)) // sic
		return nil, -1
	}
	if ev.Type != t {
		printf("event: %s, status: %d\n", clike.EventStr(ev.Type), ev.Status)
		return ev, -1
	}
	return ev, 0
}

// resolveAddr is resolve_addr: it binds to -b's address, if any, and
// resolves the group's.
func resolveAddr(ctx *mcContext) int {
	var bindRAI *rdmacm.AddrInfo
	hints := rdmacm.AddrInfoHints{PortSpace: rdmacm.PortSpaceUDP}
	if ctx.bindAddr != "" {
		hints.Flags = rdmacm.Passive
		ai, err := rdmacm.GetAddrInfo(context.Background(), ctx.bindAddr, "", &hints)
		if err != nil {
			verbErr("rdma_getaddrinfo (bind)", -1, clike.Errno(err, 22))
			return -1
		}
		bindRAI = &ai[0]
	}
	hints.Flags = 0
	mcastRAI, err := rdmacm.GetAddrInfo(context.Background(), ctx.mcastAddr, "", &hints)
	if err != nil {
		verbErr("rdma_getaddrinfo (mcast)", -1, clike.Errno(err, 22))
		return -1
	}
	var src netip.AddrPort
	if bindRAI != nil {
		// bind to a specific adapter if requested to do so
		if err := ctx.id.Bind(bindRAI.Src); err != nil {
			verbErr("rdma_bind_addr", -1, clike.Errno(err, 22))
			return -1
		}
		src = bindRAI.Src
	}
	if err := ctx.id.ResolveAddr(src, mcastRAI[0].Dst, 2*time.Second); err != nil {
		verbErr("rdma_resolve_addr", -1, clike.Errno(err, 22))
		return -1
	}
	if _, ret := getCMEvent(ctx.channel, rdmacm.EventAddrResolved); ret != 0 {
		return ret
	}
	ctx.mcastSockaddr = mcastRAI[0].Dst.Addr()
	return 0
}

// createResources is create_resources: PD, CQ, QP, MR. (The listing
// takes the PD librdmacm made for a bound ID, and allocates one when
// there is none; the port allocates one in both cases.)
func createResources(ctx *mcContext) int {
	vctx, err := ctx.id.Context()
	if err != nil {
		verbErr("ibv_alloc_pd", -1, clike.Errno(err, 22))
		return -1
	}
	if ctx.pd == nil {
		if ctx.pd, err = vctx.AllocPD(); err != nil {
			verbErr("ibv_alloc_pd", -1, clike.Errno(err, 22))
			return -1
		}
	}
	if ctx.cqCh, err = vctx.CreateCompChannel(); err == nil {
		ctx.cq, err = vctx.CreateCQ(uverbs.CQConfig{Size: max(2, ctx.msgCount), Channel: ctx.cqCh})
	}
	if err != nil {
		verbErr("ibv_create_cq", -1, clike.Errno(err, 22))
		return -1
	}
	_, err = ctx.id.CreateQP(ctx.pd, uverbs.QPConfig{
		Type:   uverbs.QPTypeUD,
		SendCQ: ctx.cq,
		RecvCQ: ctx.cq,
		Cap:    uverbs.QPCap{MaxSendWR: uint32(ctx.msgCount), MaxRecvWR: uint32(ctx.msgCount), MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		verbErr("rdma_create_qp", -1, clike.Errno(err, 22))
		return -1
	}
	// The receiver must allow enough space in the receive buffer for the GRH
	bufSize := ctx.msgLength
	if !ctx.sender {
		bufSize += grhSize
	}
	ctx.buf = make([]byte, bufSize)
	if ctx.mr, err = ctx.id.RegMsgs(ctx.buf); err != nil {
		verbErr("rdma_reg_msgs", -1, clike.Errno(err, 22))
		return -1
	}
	return 0
}

// destroyResources is destroy_resources.
func destroyResources(ctx *mcContext) {
	if ctx.ah != nil {
		ctx.ah.Close()
	}
	if ctx.id.QP() != nil {
		ctx.id.DestroyQP()
	}
	if ctx.cq != nil {
		ctx.cq.Close()
	}
	if ctx.cqCh != nil {
		ctx.cqCh.Close()
	}
	if ctx.mr != nil {
		ctx.mr.Close()
	}
	if ctx.pd != nil {
		ctx.pd.Close()
	}
	ctx.id.Close()
}

// postSend is post_send: one datagram of 0x12 bytes to the group.
func postSend(ctx *mcContext) int {
	buf := ctx.mr.Bytes()[:ctx.msgLength]
	for i := range buf {
		buf[i] = 0x12 // set the data to non-zero
	}
	// Multicast requires that the message is sent with immediate data
	// and that the QP number is the contents of the immediate data
	qp := ctx.id.QP()
	err := qp.PostSend(&uverbs.SendWR{
		Opcode:     uverbs.WRSendWithImm,
		Flags:      uverbs.SendSignaled,
		Imm:        qp.Num(),
		AH:         ctx.ah,
		RemoteQPN:  ctx.remoteQPN,
		RemoteQKey: ctx.remoteQKey,
		SGL:        []uverbs.SGE{{Addr: ctx.mr.Addr(), Length: uint32(ctx.msgLength), LKey: ctx.mr.LKey()}},
	})
	if err != nil {
		e := clike.Errno(err, 22)
		verbErr("ibv_post_send", e, e)
		return -1
	}
	return 0
}

// getCompletion is get_completion: the next completion, which must be
// a success.
func getCompletion(ctx *mcContext) int {
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := ctx.cq.PollContext(context.Background(), wc); err != nil {
		verbErr("ibv_poll_cq", -1, clike.Errno(err, 22))
		return -1
	}
	if wc[0].Status != uverbs.WCSuccess {
		printf("work completion status %s\n", wc[0].Status.String())
		return -1
	}
	return 0
}

func main() {
	ctx := &mcContext{msgCount: defaultMsgCount, msgLength: defaultMsgLength, serverPort: defaultPort}
	opts, _ := clike.Getopt(os.Stderr, os.Args, "shb:m:p:c:l:")
	for _, o := range opts {
		switch o.Letter {
		case 's':
			ctx.sender = true
		case 'b':
			ctx.bindAddr = o.Arg
		case 'm':
			ctx.mcastAddr = o.Arg
		case 'p':
			ctx.serverPort = o.Arg
		case 'c':
			ctx.msgCount = clike.Atoi(o.Arg)
		case 'l':
			ctx.msgLength = clike.Atoi(o.Arg)
		default: // -h too
			printf("usage: %s -m mc_address\n", os.Args[0])
			printf("\t-s[ender mode]\n")
			printf("\t-b bind_address\n")
			printf("\t-p port_number\n")
			printf("\t-c msg_count\n")
			printf("\t-l msg_length\n")
			os.Exit(1)
		}
	}
	if ctx.mcastAddr == "" {
		printf("multicast address must be specified with -m\n")
		os.Exit(1)
	}
	var err error
	if ctx.channel, err = rdmacm.NewEventChannel(); err != nil {
		verbErr("rdma_create_event_channel", -1, clike.Errno(err, 22))
		os.Exit(1)
	}
	if ctx.id, err = rdmacm.CreateID(ctx.channel, rdmacm.PortSpaceUDP); err != nil {
		verbErr("rdma_create_id", -1, clike.Errno(err, 22))
		os.Exit(1)
	}
	run(ctx)
	// out:
	ret := 0
	if !ctx.joined {
		// librdmacm's answers: EINVAL while the group's address is not
		// filled in (resolve_addr failed), else EADDRNOTAVAIL.
		ret = -1
		errno := eaddrnotavail
		if !ctx.mcastSockaddr.IsValid() {
			errno = einval
		}
		verbErr("rdma_leave_multicast", ret, errno)
	} else if err := ctx.id.LeaveMulticast(ctx.mcastSockaddr); err != nil {
		ret = -1
		verbErr("rdma_leave_multicast", ret, clike.Errno(err, 22))
	}
	destroyResources(ctx)
	os.Exit(ret & 0xff)
}

// run is main's body up to its out label.
func run(ctx *mcContext) {
	if resolveAddr(ctx) != 0 {
		return
	}
	// Verify that the buffer length is not larger than the MTU
	vctx, err := ctx.id.Context()
	var pa uverbs.PortAttr
	if err == nil {
		pa, err = vctx.QueryPort(ctx.id.Port())
	}
	if err != nil {
		e := clike.Errno(err, 22)
		verbErr("ibv_query_port", e, e)
		return
	}
	if mtu := 1 << (int(pa.ActiveMTU) + 7); ctx.msgLength > mtu {
		printf("buffer length %d is larger then active mtu %d\n", ctx.msgLength, mtu)
		return
	}
	if createResources(ctx) != 0 {
		return
	}
	if !ctx.sender {
		for i := 0; i < ctx.msgCount; i++ {
			if err := ctx.id.PostRecv(0, ctx.mr, 0, ctx.msgLength+grhSize); err != nil {
				verbErr("rdma_post_recv", -1, clike.Errno(err, 22))
				return
			}
		}
	}
	// Join the multicast group
	if err := ctx.id.JoinMulticast(ctx.mcastSockaddr, false); err != nil {
		verbErr("rdma_join_multicast", -1, clike.Errno(err, 22))
		return
	}
	ctx.joined = true
	// Verify that we successfully joined the multicast group
	ev, ret := getCMEvent(ctx.channel, rdmacm.EventMulticastJoin)
	if ret != 0 {
		return
	}
	ah := ev.UD.AHAttr
	printf("joined dgid: %s, mlid 0x%x, sl %d\n", netip.AddrFrom16(ah.GRH.DGID).String(), ah.DLID, ah.SL)
	ctx.remoteQPN = ev.UD.QPNum
	ctx.remoteQKey = ev.UD.QKey
	if ctx.sender {
		// Create an address handle for the sender
		if ctx.ah, err = ev.UD.CreateAH(ctx.pd); err != nil {
			verbErr("ibv_create_ah", -1, clike.Errno(err, 22))
			return
		}
	}
	// A goroutine handles any CM events while messages are exchanged
	go cmThread(ctx)
	if !ctx.sender {
		printf("waiting for messages...\n")
	}
	for i := 0; i < ctx.msgCount; i++ {
		if ctx.sender {
			if postSend(ctx) != 0 {
				return
			}
		}
		if getCompletion(ctx) != 0 {
			return
		}
		if ctx.sender {
			printf("sent message %d\n", i+1)
		} else {
			printf("received message %d\n", i+1)
		}
	}
}
