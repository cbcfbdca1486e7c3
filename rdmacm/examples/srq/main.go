// Command srq is the shared receive queue example of the "RDMA Aware
// Networks Programming User Manual" (Mellanox, Rev 1.4, section 8.3) in
// Go: each side has one SRQ and one receive CQ (with a completion
// channel) that all its RC queue pairs share.
//
//	srq -s -a local_address [-p port] [-c msg_count] [-l msg_length] [-q qp_count] [-w max_wr]   server
//	srq -a server_address [-p port] [-c msg_count] [-l msg_length] [-q qp_count] [-w max_wr]     client
//
// The client makes qp_count connections (4), each with a QP that
// receives from its SRQ, and sends msg_length-byte messages (100000
// bytes of zeros) over them in turn, max_wr (64) at a time; the server
// receives them all through its SRQ, and after each batch sends one
// message to the client on its first connection, telling it to go on,
// until msg_count (100) messages have gone. The messages, the exit
// status (0; 1 for a bad command line; -1, that is 255, or an errno for
// a failed call) and the bytes on the wire are the C program's, and it
// works with the C program built from the listing in either role.
//
// # Where the Go port differs from the listing
//
//   - The listing prints its uint64_t counters with %d, which works on
//     x86-64 only by the calling convention; the port prints the numbers.
//   - The listing frees its rdma_addrinfo with free(); the port has
//     nothing to free.
//
// The C listing is under testdata/, with only what the manual's text
// conversion broke repaired.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/rdmacm/examples/internal/clike"
	"github.com/purerdma/rdma/uverbs"
)

// verbErr is VERB_ERR: "<verb> returned <ret> errno <errno>" on stderr,
// with the errno librdmacm leaves for err.
func verbErr(verb string, ret int, err error) { clike.VerbErr(verb, ret, clike.CMErrno(err)) }

const (
	defaultPort      = "51216"
	defaultMsgCount  = 100
	defaultMsgLength = 100000
	defaultQPCount   = 4
	defaultMaxWR     = 64
)

// srqContext is struct context.
type srqContext struct {
	// User parameters
	server     bool
	serverName string
	serverPort string
	msgCount   int
	msgLength  int
	qpCount    int
	maxWR      int

	// Resources
	srqID        *rdmacm.ID
	listenID     *rdmacm.ID
	connID       []*rdmacm.ID
	connected    []bool
	sendMR       *uverbs.MR
	recvMR       *uverbs.MR
	srq          *uverbs.SRQ
	srqCQ        *uverbs.CQ
	srqCQChannel *uverbs.CompChannel
	sendBuf      []byte
	recvBuf      []byte
}

var bg = context.Background()

// librdmacmDefaults are the connection parameters librdmacm sends for a
// NULL rdma_conn_param, as the listing passes: the device's limits for
// reads and atomics, and 7 (for ever) for both retry counts.
func librdmacmDefaults() *rdmacm.ConnParam {
	return &rdmacm.ConnParam{ResponderResources: rdmacm.MaxResources, InitiatorDepth: rdmacm.MaxResources,
		RetryCount: 7, RNRRetryCount: 7}
}

func printf(format string, a ...any) { fmt.Printf(format, a...) }

// initResources is init_resources: the SRQ's ID bound to the device
// (resolved on the client, bound on the server), the memory regions,
// the SRQ with max_wr receives posted, and the CQ all QPs receive on.
func initResources(ctx *srqContext, rai *rdmacm.AddrInfo) int {
	var err error
	// Create an ID used for creating/accessing our SRQ
	if ctx.srqID, err = rdmacm.CreateID(nil, rdmacm.PortSpaceTCP); err != nil {
		verbErr("rdma_create_id", -1, err)
		return -1
	}
	// We need to bind the ID to a particular RDMA device
	// This is done by resolving the address or binding to the address
	if !ctx.server {
		rctx, cancel := context.WithTimeout(bg, 1000*time.Millisecond)
		err = ctx.srqID.ResolveAddrContext(rctx, rai.Src, rai.Dst)
		cancel()
		if err != nil {
			verbErr("rdma_resolve_addr", -1, err)
			return -1
		}
	} else if err = ctx.srqID.Bind(rai.Src); err != nil {
		verbErr("rdma_bind_addr", -1, err)
		return -1
	}
	// Create the memory regions being used in this example
	if ctx.recvMR, err = ctx.srqID.RegMsgs(ctx.recvBuf); err != nil {
		verbErr("rdma_reg_msgs", -1, err)
		return -1
	}
	if ctx.sendMR, err = ctx.srqID.RegMsgs(ctx.sendBuf); err != nil {
		verbErr("rdma_reg_msgs", -1, err)
		return -1
	}
	// Create our shared receive queue
	if ctx.srq, err = ctx.srqID.CreateSRQ(nil, uverbs.SRQConfig{MaxWR: uint32(ctx.maxWR), MaxSGE: 1}); err != nil {
		verbErr("rdma_create_srq", -1, err)
		return -1
	}
	// Post our receive buffers on the SRQ
	for i := 0; i < ctx.maxWR; i++ {
		if err := ctx.srqID.PostRecv(0, ctx.recvMR, 0, ctx.msgLength); err != nil {
			verbErr("rdma_post_rcv", -1, err) // sic
			return -1
		}
	}
	vctx, err := ctx.srqID.Context()
	if err == nil {
		// Create a completion channel to use with the SRQ CQ
		ctx.srqCQChannel, err = vctx.CreateCompChannel()
	}
	if err != nil {
		verbErr("ibv_create_comp_channel", -1, err)
		return -1
	}
	// Create a CQ to use for all connections (QPs) that use the SRQ
	if ctx.srqCQ, err = vctx.CreateCQ(uverbs.CQConfig{Size: ctx.maxWR, Channel: ctx.srqCQChannel}); err != nil {
		verbErr("ibv_create_cq", -1, err)
		return -1
	}
	return 0
}

// destroyResources is destroy_resources.
func destroyResources(ctx *srqContext) {
	for i, id := range ctx.connID {
		if id == nil {
			continue
		}
		if ctx.connected[i] {
			id.Disconnect()
		}
		id.Close() // its QP and send CQ with it
	}
	if ctx.recvMR != nil {
		ctx.recvMR.Close()
	}
	if ctx.sendMR != nil {
		ctx.sendMR.Close()
	}
	if ctx.srqCQ != nil {
		ctx.srqCQ.Close()
	}
	if ctx.srqCQChannel != nil {
		ctx.srqCQChannel.Close()
	}
	if ctx.srqID != nil {
		ctx.srqID.Close() // its SRQ with it
	}
}

// awaitCompletion is await_completion followed by the listing's polling
// loop: it waits until the SRQ's CQ has a completion (on its completion
// channel, as ibv_get_cq_event does after ibv_req_notify_cq), then calls
// f with each completion until the CQ is empty. f's non-zero result ends
// it.
func awaitCompletion(ctx *srqContext, f func(wc *uverbs.WorkCompletion) int) int {
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := ctx.srqCQ.PollContext(bg, wc); err != nil {
		verbErr("ibv_get_cq_event", -1, err)
		return -1
	}
	for {
		if ret := f(&wc[0]); ret != 0 {
			return ret
		}
		n, err := ctx.srqCQ.Poll(wc)
		if err != nil {
			verbErr("ibv_poll_cq", -1, err)
			return -1
		}
		if n == 0 {
			return 0
		}
	}
}

// runServer is run_server.
func runServer(ctx *srqContext, rai *rdmacm.AddrInfo) int {
	if ret := initResources(ctx, rai); ret != 0 {
		printf("init_resources returned %d\n", ret)
		return ret
	}
	// Use the srq_id as the listen_id since it is already setup
	ctx.listenID = ctx.srqID
	if err := ctx.listenID.Listen(4); err != nil {
		verbErr("rdma_listen", -1, err)
		return -1
	}
	printf("waiting for connection from client...\n")
	for i := 0; i < ctx.qpCount; i++ {
		ev, err := ctx.listenID.GetRequest(bg)
		if err != nil {
			verbErr("rdma_get_request", -1, err)
			return -1
		}
		ctx.connID[i] = ev.ID
		// Create the queue pair
		_, err = ctx.connID[i].CreateQP(nil, uverbs.QPConfig{
			Type:   uverbs.QPTypeRC,
			RecvCQ: ctx.srqCQ,
			SRQ:    ctx.srq,
			Cap:    uverbs.QPCap{MaxSendWR: uint32(ctx.maxWR), MaxRecvWR: uint32(ctx.maxWR), MaxSendSGE: 1, MaxRecvSGE: 1},
		})
		if err != nil {
			verbErr("rdma_create_qp", -1, err)
			return -1
		}
		if _, err := ctx.connID[i].AcceptContext(bg, librdmacmDefaults()); err != nil {
			verbErr("rdma_accept", -1, err)
			return -1
		}
		ctx.connected[i] = true
	}
	var sendCount, recvCount uint64
	for recvCount < uint64(ctx.msgCount) {
		i := 0
		for i < ctx.maxWR && recvCount < uint64(ctx.msgCount) {
			ret := awaitCompletion(ctx, func(wc *uverbs.WorkCompletion) int {
				if wc.Status != uverbs.WCSuccess {
					printf("work completion status %s\n", wc.Status)
					return -1
				}
				recvCount++
				printf("recv count: %d, qp_num: %d\n", recvCount, wc.QPNum)
				if err := ctx.srqID.PostRecv(wc.WRID, ctx.recvMR, 0, ctx.msgLength); err != nil {
					verbErr("rdma_post_recv", -1, err)
					return -1
				}
				i++
				return 0
			})
			if ret != 0 {
				return ret
			}
		}
		if err := ctx.connID[0].PostSend(0, ctx.sendMR, 0, ctx.msgLength, uverbs.SendSignaled); err != nil {
			verbErr("rdma_post_send", -1, err)
			return -1
		}
		if _, err := ctx.connID[0].GetSendComp(bg); err != nil && !clike.IsWCStatus(err) {
			verbErr("rdma_get_send_comp", -1, err)
			return -1
		}
		sendCount++
		printf("send count: %d\n", sendCount)
	}
	return 0
}

// runClient is run_client.
func runClient(ctx *srqContext, rai *rdmacm.AddrInfo) int {
	if ret := initResources(ctx, rai); ret != 0 {
		printf("init_resources returned %d\n", ret)
		return ret
	}
	for i := 0; i < ctx.qpCount; i++ {
		id, err := rdmacm.CreateEP(bg, rai, &rdmacm.QPOptions{Config: uverbs.QPConfig{
			RecvCQ: ctx.srqCQ,
			SRQ:    ctx.srq,
			Cap:    uverbs.QPCap{MaxSendWR: uint32(ctx.maxWR), MaxRecvWR: uint32(ctx.maxWR), MaxSendSGE: 1, MaxRecvSGE: 1},
		}})
		if err != nil {
			verbErr("rdma_create_ep", -1, err)
			return -1
		}
		ctx.connID[i] = id
		if _, err := id.ConnectContext(bg, librdmacmDefaults()); err != nil {
			verbErr("rdma_connect", -1, err)
			return -1
		}
		ctx.connected[i] = true
	}
	var sendCount, recvCount uint64
	ret := 0
	for sendCount < uint64(ctx.msgCount) {
		for i := 0; i < ctx.maxWR && sendCount < uint64(ctx.msgCount); i++ {
			// perform our send to the server
			id := ctx.connID[i%ctx.qpCount]
			if err := id.PostSend(0, ctx.sendMR, 0, ctx.msgLength, uverbs.SendSignaled); err != nil {
				verbErr("rdma_post_send", -1, err)
				return -1
			}
			wc, err := id.GetSendComp(bg)
			if err != nil && !clike.IsWCStatus(err) {
				verbErr("rdma_get_send_comp", -1, err)
				return -1
			}
			sendCount++
			printf("send count: %d, qp_num: %d\n", sendCount, wc.QPNum)
		}
		// wait for a recv indicating that all buffers were processed
		ret = awaitCompletion(ctx, func(wc *uverbs.WorkCompletion) int {
			if wc.Status != uverbs.WCSuccess {
				printf("work completion status %s\n", wc.Status)
				return -1
			}
			recvCount++
			printf("recv count: %d\n", recvCount)
			if err := ctx.srqID.PostRecv(wc.WRID, ctx.recvMR, 0, ctx.msgLength); err != nil {
				verbErr("rdma_post_recv", -1, err)
				return -1
			}
			return 0
		})
		if ret != 0 {
			return ret
		}
	}
	return ret
}

func main() {
	ctx := &srqContext{
		serverPort: defaultPort,
		msgCount:   defaultMsgCount,
		msgLength:  defaultMsgLength,
		qpCount:    defaultQPCount,
		maxWR:      defaultMaxWR,
	}
	opts, _ := clike.Getopt(os.Stderr, os.Args, "sa:p:c:l:q:w:")
	for _, o := range opts {
		switch o.Letter {
		case 's':
			ctx.server = true
		case 'a':
			ctx.serverName = o.Arg
		case 'p':
			ctx.serverPort = o.Arg
		case 'c':
			ctx.msgCount = clike.Atoi(o.Arg)
		case 'l':
			ctx.msgLength = clike.Atoi(o.Arg)
		case 'q':
			ctx.qpCount = clike.Atoi(o.Arg)
		case 'w':
			ctx.maxWR = clike.Atoi(o.Arg)
		default:
			printf("usage: %s -a server_address\n", os.Args[0])
			printf("\t[-s server mode]\n")
			printf("\t[-p port_number]\n")
			printf("\t[-c msg_count]\n")
			printf("\t[-l msg_length]\n")
			printf("\t[-q qp_count]\n")
			printf("\t[-w max_wr]\n")
			os.Exit(1)
		}
	}
	if ctx.serverName == "" {
		printf("server address required (use -a)!\n")
		os.Exit(1)
	}
	hints := rdmacm.AddrInfoHints{PortSpace: rdmacm.PortSpaceTCP}
	if ctx.server {
		hints.Flags = rdmacm.Passive // this makes it a server
	}
	rai, err := rdmacm.GetAddrInfo(bg, ctx.serverName, ctx.serverPort, &hints)
	if err != nil {
		verbErr("rdma_getaddrinfo", -1, err)
		os.Exit(1)
	}
	// allocate memory for our QPs and send/recv buffers
	ctx.connID = make([]*rdmacm.ID, max(ctx.qpCount, 0))
	ctx.connected = make([]bool, len(ctx.connID))
	ctx.sendBuf = make([]byte, max(ctx.msgLength, 0))
	ctx.recvBuf = make([]byte, max(ctx.msgLength, 0))
	var ret int
	if ctx.server {
		ret = runServer(ctx, &rai[0])
	} else {
		ret = runClient(ctx, &rai[0])
	}
	destroyResources(ctx)
	os.Exit(ret & 0xff)
}
