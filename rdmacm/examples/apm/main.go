// Command apm is the automatic path migration (APM) example of the "RDMA
// Aware Networks Programming User Manual" (Mellanox, Rev 1.4, section
// 8.1) in Go: an RC connection made with rdma_cm, an alternate path
// loaded into each side's QP (IBV_QP_ALT_PATH, path migration state
// REARM), and sends back and forth while the path migrates, by a pulled
// cable or, with -m, by software (path_mig_state MIGRATED). Migration
// events (PATH_MIG, PATH_MIG_ERR) are printed as they arrive.
//
//	apm -s [-p port] [-c msg_count] [-l msg_length] [-d alt_dlid -r alt_srcport] [-w msec]    server
//	apm -a server_address [-p port] [-c msg_count] [-l msg_length] [-m n] [-w msec]           client
//
// Each side tells the other the LID of its alternate port in the
// connection's private data (4 bytes: the LID big-endian, then two
// bytes the listing reads past its 16-bit variable, zeros here). The
// messages (stdout, and the VERB_ERR lines on stderr), the exit status
// and the bytes on the wire are the C program's.
//
// # On RoCE
//
// Alternate paths need InfiniBand. Linux refuses IBV_QP_ALT_PATH on a
// RoCE port (soft-RoCE included) with EINVAL: "the core code can only
// handle alternate paths and APM for IB", drivers/infiniband/core/
// verbs.c. There, as the C program does, each side connects, prints
//
//	loading alt path - local port: 1, dlid: 0
//
// and stops with "ibv_modify_qp returned 22 errno 22" and exit status
// 22; the Go port adds a line on stderr saying what the device refused
// and why. Only InfiniBand hardware with two paths between the hosts
// shows the migration itself; the library's part of it (QPAttr's
// AltAHAttr, AltPortNum, AltPKeyIndex, AltTimeout and PathMigState;
// the PATH_MIG and PATH_MIG_ERR async events) is what this program
// uses, and on soft-RoCE only the refusal is tested.
//
// # Where the Go port differs from the listing
//
//   - load_alt_path has no return statement on success (its caller reads
//     whatever the register held); the port returns 0.
//   - The listing's getopt string lacks "w:", so -w, which its usage
//     offers, is refused; the port takes it.
//   - The listing tests the APM capability with "|", which is never
//     false; the port tests the bit (soft-RoCE sets it).
//   - The listing sends 4 bytes of private data from a 2-byte variable;
//     the port sends the LID and two zero bytes.
//
// The C listing is under testdata/, with only what the manual's text
// conversion broke repaired.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	defaultMsgCount  = 100
	defaultMsgLength = 1000000
	defaultMsecDelay = 500
	einval           = 22
)

// apmContext is struct context.
type apmContext struct {
	// User parameters
	server       bool
	serverName   string
	serverPort   string
	msgCount     int
	msgLength    int
	msecDelay    int
	altSrcport   uint8
	altDLID      uint16
	myAltDLID    uint16
	migrateAfter int

	// Resources
	id       *rdmacm.ID
	listenID *rdmacm.ID
	event    *rdmacm.Event // the ID's last event (ctx->id->event)
	sendMR   *uverbs.MR
	recvMR   *uverbs.MR
	sendBuf  []byte
	recvBuf  []byte
}

var bg = context.Background()

func printf(format string, a ...any) { fmt.Printf(format, a...) }

// asyncEventThread is async_event_thread: it prints the async events of
// the connection's device, the migration ones by name.
func asyncEventThread(ctx *apmContext, vctx *uverbs.Context) {
	for {
		ev, err := vctx.AsyncEvent(bg)
		if errors.Is(err, os.ErrClosed) {
			return // the program is ending: C's thread dies with the process, silently
		}
		if err != nil {
			e := clike.Errno(err, einval)
			verbErr("ibv_get_async_event", e, e)
			return
		}
		switch ev.Type {
		case uverbs.EventPathMig:
			printf("QP path migrated\n")
		case uverbs.EventPathMigErr:
			printf("QP path migration error\n")
		default:
			printf("Async Event %d\n", uint32(ev.Type))
		}
	}
}

// getAltDLIDFromPrivateData is get_alt_dlid_from_private_data.
func getAltDLIDFromPrivateData(ev *rdmacm.Event) (uint16, int) {
	if len(ev.PrivateData) < 4 {
		printf("unexpected private data len: %d", len(ev.PrivateData))
		return 0, -1
	}
	return binary.BigEndian.Uint16(ev.PrivateData), 0
}

// getAltPortDetails is get_alt_port_details: an active port of the
// device other than the QP's, if there is one, else the QP's own.
func getAltPortDetails(ctx *apmContext) int {
	vctx, err := ctx.id.Context()
	var devAttr uverbs.DeviceAttr
	if err == nil {
		devAttr, err = vctx.QueryDevice()
	}
	if err != nil {
		e := clike.Errno(err, einval)
		verbErr("ibv_query_device", e, e)
		return e
	}
	// Verify the APM is supported by the HCA
	if devAttr.DeviceCapFlags&uverbs.DeviceCapAutoPathMig == 0 {
		printf("device does not support auto path migration!\n")
		return -1
	}
	// Query the QP to determine which port we are bound to
	qpAttr, err := ctx.id.QP().Query(uverbs.QPAttrState | uverbs.QPAttrPort)
	if err != nil {
		e := clike.Errno(err, einval)
		verbErr("ibv_query_qp", e, e)
		return e
	}
	for i := 1; i <= devAttr.PhysPortCnt; i++ {
		// Query all ports until we find one in the active state that is
		// not the port we are currently connected to.
		pa, err := vctx.QueryPort(i)
		if err != nil {
			e := clike.Errno(err, einval)
			verbErr("ibv_query_device", e, e) // sic
			return e
		}
		if pa.State == uverbs.PortActive {
			ctx.myAltDLID = pa.LID
			ctx.altSrcport = uint8(i)
			if qpAttr.PortNum != i {
				break
			}
		}
	}
	return 0
}

// qpAttrAll is what ibv_query_qp fills: the whole attribute set.
const qpAttrAll = uverbs.QPAttrState | uverbs.QPAttrCurState | uverbs.QPAttrEnSQDAsyncNotify |
	uverbs.QPAttrAccessFlags | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrQKey |
	uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt |
	uverbs.QPAttrRNRRetry | uverbs.QPAttrRQPSN | uverbs.QPAttrMaxQPRdAtomic | uverbs.QPAttrAltPath |
	uverbs.QPAttrMinRNRTimer | uverbs.QPAttrSQPSN | uverbs.QPAttrMaxDestRdAtomic |
	uverbs.QPAttrPathMigState | uverbs.QPAttrCap | uverbs.QPAttrDestQPN

// loadAltPath is load_alt_path: the current path, with -r's port and
// -d's LID when given, loaded as the alternate path, and the migration
// state set to REARM.
func loadAltPath(ctx *apmContext) int {
	// query to get the current attributes of the qp
	qp := ctx.id.QP()
	qpAttr, err := qp.Query(qpAttrAll)
	if err != nil {
		e := clike.Errno(err, einval)
		verbErr("ibv_query_qp", e, e)
		return e
	}
	// initialize the alternate path attributes with the current path attributes
	qpAttr.AltAHAttr = qpAttr.AHAttr
	// set the alt path attributes to some basic values
	qpAttr.AltPKeyIndex = qpAttr.PKeyIndex
	qpAttr.AltTimeout = qpAttr.Timeout
	qpAttr.PathMigState = uverbs.MigRearm
	// if an alternate path was supplied, set the source port and the dlid
	if ctx.altSrcport != 0 {
		qpAttr.AltPortNum = int(ctx.altSrcport)
	} else {
		qpAttr.AltPortNum = qpAttr.PortNum
	}
	if ctx.altDLID != 0 {
		qpAttr.AltAHAttr.DLID = ctx.altDLID
	}
	printf("loading alt path - local port: %d, dlid: %d\n", qpAttr.AltPortNum, qpAttr.AltAHAttr.DLID)
	if err := qp.Modify(&qpAttr, uverbs.QPAttrAltPath|uverbs.QPAttrPathMigState); err != nil {
		e := clike.Errno(err, einval)
		verbErr("ibv_modify_qp", e, e)
		explainRefusal(ctx, qpAttr.PortNum, err)
		return e
	}
	return 0
}

// explainRefusal says on stderr what the device refused, which the C
// program leaves to its reader: on RoCE the kernel has no alternate
// paths.
func explainRefusal(ctx *apmContext, port int, err error) {
	dev := "the device"
	if d, ok := ctx.id.Device(); ok {
		dev = d.Name
	}
	why := ""
	if vctx, cerr := ctx.id.Context(); cerr == nil {
		if pa, perr := vctx.QueryPort(port); perr == nil && pa.LinkLayer == uverbs.LinkLayerEthernet && clike.Errno(err, 0) == einval {
			why = ": Linux loads alternate paths (and migrates) on InfiniBand ports only, not on RoCE, soft-RoCE included"
		}
	}
	fmt.Fprintf(os.Stderr, "apm: %s port %d refused the alternate path (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE: %v)%s\n", dev, port, err, why)
}

// regMem is reg_mem: the send buffer of 0x12 bytes and the receive buffer.
func regMem(ctx *apmContext) int {
	ctx.sendBuf = make([]byte, max(ctx.msgLength, 0))
	for i := range ctx.sendBuf {
		ctx.sendBuf[i] = 0x12
	}
	ctx.recvBuf = make([]byte, max(ctx.msgLength, 0))
	var err error
	if ctx.sendMR, err = ctx.id.RegMsgs(ctx.sendBuf); err != nil {
		verbErr("rdma_reg_msgs", -1, clike.Errno(err, einval))
		return -1
	}
	if ctx.recvMR, err = ctx.id.RegMsgs(ctx.recvBuf); err != nil {
		verbErr("rdma_reg_msgs", -1, clike.Errno(err, einval))
		return -1
	}
	return 0
}

// getaddrinfoAndCreateEP is getaddrinfo_and_create_ep.
func getaddrinfoAndCreateEP(ctx *apmContext) int {
	hints := rdmacm.AddrInfoHints{PortSpace: rdmacm.PortSpaceTCP}
	if ctx.server {
		hints.Flags = rdmacm.Passive // this makes it a server
	}
	printf("rdma_getaddrinfo\n")
	rai, err := rdmacm.GetAddrInfo(bg, ctx.serverName, ctx.serverPort, &hints)
	if err != nil {
		verbErr("rdma_getaddrinfo", -1, clike.Errno(err, einval))
		return -1
	}
	printf("rdma_create_ep\n")
	ctx.id, err = rdmacm.CreateEP(bg, &rai[0], &rdmacm.QPOptions{Config: uverbs.QPConfig{
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
	}})
	if err != nil {
		verbErr("rdma_create_ep", -1, clike.Errno(err, einval))
		return -1
	}
	return 0
}

// getConnectRequest is get_connect_request.
func getConnectRequest(ctx *apmContext) int {
	printf("rdma_listen\n")
	if err := ctx.id.Listen(4); err != nil {
		verbErr("rdma_listen", -1, clike.Errno(err, einval))
		return -1
	}
	ctx.listenID = ctx.id
	ctx.id = nil
	printf("rdma_get_request\n")
	ev, err := ctx.listenID.GetRequest(bg)
	if err != nil {
		verbErr("rdma_get_request", -1, clike.Errno(err, einval))
		return -1
	}
	ctx.id, ctx.event = ev.ID, ev
	// If the alternate path info was not set on the command line, get
	// it from the private data
	if ctx.altDLID == 0 && ctx.altSrcport == 0 {
		dlid, ret := getAltDLIDFromPrivateData(ev)
		if ret != 0 {
			return ret
		}
		ctx.altDLID = dlid
	}
	return 0
}

// establishConnection is establish_connection: a receive posted, then
// accept (server) or connect (client) with this side's alternate LID in
// the private data.
func establishConnection(ctx *apmContext) int {
	// post a receive to catch the first send
	if err := ctx.id.PostRecv(0, ctx.recvMR, 0, ctx.msgLength); err != nil {
		verbErr("rdma_post_recv", -1, clike.Errno(err, einval))
		return -1
	}
	// send the dlid for the alternate port in the private data
	privateData := make([]byte, 4) // sizeof(int)
	binary.BigEndian.PutUint16(privateData, ctx.myAltDLID)
	param := &rdmacm.ConnParam{
		PrivateData:        privateData,
		ResponderResources: 2,
		InitiatorDepth:     2,
		RetryCount:         5,
		RNRRetryCount:      5,
	}
	var ev *rdmacm.Event
	var err error
	if ctx.server {
		printf("rdma_accept\n")
		if ev, err = ctx.id.AcceptContext(bg, param); err != nil {
			verbErr("rdma_accept", -1, clike.CMErrno(err))
			return -1
		}
	} else {
		printf("rdma_connect\n")
		if ev, err = ctx.id.ConnectContext(bg, param); err != nil {
			verbErr("rdma_connect", -1, clike.CMErrno(err))
			return -1
		}
	}
	ctx.event = ev
	if ev.Type != rdmacm.EventEstablished {
		printf("unexpected event: %s", clike.EventStr(ev.Type))
		return -1
	}
	// If the alternate path info was not set on the command line, get
	// it from the private data
	if ctx.altDLID == 0 && ctx.altSrcport == 0 {
		dlid, ret := getAltDLIDFromPrivateData(ev)
		if ret != 0 {
			return ret
		}
		ctx.altDLID = dlid
	}
	return 0
}

// sendMsg is send_msg: one signaled send, waited for.
func sendMsg(ctx *apmContext) int {
	if err := ctx.id.PostSend(0, ctx.sendMR, 0, ctx.msgLength, uverbs.SendSignaled); err != nil {
		verbErr("rdma_send_recv", -1, clike.Errno(err, einval)) // sic
		return -1
	}
	if _, err := ctx.id.GetSendComp(bg); err != nil && !clike.IsWCStatus(err) {
		verbErr("rdma_get_send_comp", -1, clike.Errno(err, einval))
		return -1
	}
	return 0
}

// recvMsg is recv_msg: a receive completion waited for, and the next
// receive posted.
func recvMsg(ctx *apmContext) int {
	if _, err := ctx.id.GetRecvComp(bg); err != nil && !clike.IsWCStatus(err) {
		verbErr("rdma_get_recv_comp", -1, clike.Errno(err, einval))
		return -1
	}
	if err := ctx.id.PostRecv(0, ctx.recvMR, 0, ctx.msgLength); err != nil {
		verbErr("rdma_post_recv", -1, clike.Errno(err, einval))
		return -1
	}
	return 0
}

func usage(argv0 string) {
	printf("usage: %s [-s or -a required]\n", argv0)
	printf("\t[-s[server mode]\n")
	printf("\t[-a ip_address]\n")
	printf("\t[-p port_number]\n")
	printf("\t[-c msg_count]\n")
	printf("\t[-l msg_length]\n")
	printf("\t[-d alt_dlid] (requires -r)\n")
	printf("\t[-r alt_srcport] (requires -d)\n")
	printf("\t[-m num_iterations_then_migrate] (client only)\n")
	printf("\t[-w msec_wait_between_sends]\n")
}

func main() {
	ctx := &apmContext{
		serverPort:   defaultPort,
		msgCount:     defaultMsgCount,
		msgLength:    defaultMsgLength,
		msecDelay:    defaultMsecDelay,
		migrateAfter: -1,
	}
	opts, _ := clike.Getopt(os.Stderr, os.Args, "sa:p:c:l:d:r:m:w:")
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
		case 'd':
			ctx.altDLID = uint16(clike.Atoi(o.Arg))
		case 'r':
			ctx.altSrcport = uint8(clike.Atoi(o.Arg))
		case 'm':
			ctx.migrateAfter = clike.Atoi(o.Arg)
		case 'w':
			ctx.msecDelay = clike.Atoi(o.Arg)
		default:
			usage(os.Args[0])
			os.Exit(1)
		}
	}
	mode, address := "client", "NULL"
	if ctx.server {
		mode = "server"
	}
	if ctx.serverName != "" {
		address = ctx.serverName
	}
	printf("mode:      %s\n", mode)
	printf("address:   %s\n", address)
	printf("port:      %s\n", ctx.serverPort)
	printf("count:     %d\n", ctx.msgCount)
	printf("length:    %d\n", ctx.msgLength)
	printf("alt_dlid:  %d\n", ctx.altDLID)
	printf("alt_port:  %d\n", ctx.altSrcport)
	printf("mig_after: %d\n", ctx.migrateAfter)
	printf("msec_wait: %d\n", ctx.msecDelay)
	printf("\n")
	if !ctx.server && ctx.serverName == "" {
		printf("server address must be specified for client mode\n")
		os.Exit(1)
	}
	// both of these must be set or neither should be set
	if !((ctx.altDLID > 0 && ctx.altSrcport > 0) || (ctx.altDLID == 0 && ctx.altSrcport == 0)) {
		printf("-d and -r must be used together\n")
		os.Exit(1)
	}
	if ctx.migrateAfter > ctx.msgCount {
		printf("num_iterations_then_migrate must be less than msg_count\n")
		os.Exit(1)
	}
	ret := run(ctx)
	// out:
	if ctx.sendMR != nil {
		ctx.sendMR.Close()
	}
	if ctx.recvMR != nil {
		ctx.recvMR.Close()
	}
	if ctx.id != nil {
		ctx.id.Close()
	}
	if ctx.listenID != nil {
		ctx.listenID.Close()
	}
	os.Exit(ret & 0xff)
}

// run is main's body up to its out label; it returns main's ret.
func run(ctx *apmContext) int {
	if ret := getaddrinfoAndCreateEP(ctx); ret != 0 {
		return ret
	}
	if ctx.server {
		if ret := getConnectRequest(ctx); ret != 0 {
			return ret
		}
	}
	// only query for alternate port if information was not specified on
	// the command line
	if ctx.altDLID == 0 && ctx.altSrcport == 0 {
		if ret := getAltPortDetails(ctx); ret != 0 {
			return ret
		}
	}
	// a goroutine handles async events
	if vctx, err := ctx.id.Context(); err == nil {
		go asyncEventThread(ctx, vctx)
	}
	if ret := regMem(ctx); ret != 0 {
		return ret
	}
	establishConnection(ctx) // its result is not checked, as in C
	// load the alternate path after the connection was created. This can
	// be done at connection time, but the connection must be created and
	// established using all ib verbs
	ret := loadAltPath(ctx)
	if ret != 0 {
		return ret
	}
	sendCnt, recvCnt := 0, 0
	for i := 0; i < ctx.msgCount; i++ {
		if ctx.server {
			if recvMsg(ctx) != 0 {
				break
			}
			recvCnt++
			printf("recv: %d\n", recvCnt)
		}
		if ctx.msecDelay > 0 {
			time.Sleep(time.Duration(ctx.msecDelay) * time.Millisecond)
		}
		if sendMsg(ctx) != 0 {
			break
		}
		sendCnt++
		printf("send: %d\n", sendCnt)
		if !ctx.server {
			if recvMsg(ctx) != 0 {
				break
			}
			recvCnt++
			printf("recv: %d\n", recvCnt)
		}
		// migrate the path manually if desired after the specified number
		// of sends
		if !ctx.server && i == ctx.migrateAfter {
			attr := uverbs.QPAttr{PathMigState: uverbs.MigMigrated}
			if err := ctx.id.QP().Modify(&attr, uverbs.QPAttrPathMigState); err != nil {
				e := clike.Errno(err, einval)
				verbErr("ibv_modify_qp", e, e)
				return e
			}
		}
	}
	ctx.id.Disconnect()
	return ret
}
