// Command rc-example is the RC example of the "RDMA Aware Networks
// Programming User Manual" (Mellanox, Rev 1.4, sections 7.1 and 7.2) in
// Go: two processes exchange what connects their RC queue pairs over a
// TCP connection, then the server sends a message, and the client reads
// the server's buffer with RDMA read and overwrites it with RDMA write.
//
// It is the C program, function by function (sock_connect is
// sockConnect, and so on; docs/migrating.md walks through it beside the
// listing), with its command line, its messages, its exit status (0, or
// 1 on any failure) and its bytes on the wire: the 34-byte packed
// cm_con_data_t (buffer address, rkey and QP number big-endian, LID,
// GID) exchanged over TCP, the one-byte syncs "Q", "R" and "W", and
// 16-byte (MSG_SIZE) sends, reads and writes. It works with the C
// program built from the listing in either role.
//
//	rc-example [-d dev] [-i port] [-g gid_idx] [-p tcp_port]          server
//	rc-example [-d dev] [-i port] [-g gid_idx] [-p tcp_port] host     client
//
// On RoCE (soft-RoCE included) give -g: every address needs a GID, and
// -g names this side's (its index in the port's GID table, e.g. from
// `purerdma devinfo -v`; on rxe the IPv4 address's RoCE v2 GID is at 1).
// Give -d too when there is more than one device: without it the first
// one found is used, as in C.
//
// # Where the Go port differs from the listing
//
// The bytes on the wire are the same; these are the printed program's
// bugs, which the port does not copy:
//
//   - The listing copies RDMAMSGR and RDMAMSGW, 20 characters and a NUL,
//     with strcpy into the 16-byte buffer (MSG_SIZE is the length of MSG,
//     "SEND operation " and its NUL). C overruns its heap buffer and then
//     prints what the buffer holds past the 16 bytes that moved. The Go
//     port stores what fits, the 16 bytes that travel, and prints those:
//     "Contents of server's buffer: 'RDMA read operat'", "Now replacing
//     it with: 'RDMA write opera'" and, on the server, "Contents of server
//     buffer: 'RDMA write opera'" (C's server prints the written bytes
//     followed by the tail of its own overrun, "ion ").
//   - The listing's sock_sync_data loops forever when the peer closes the
//     connection (read returns 0); the port reports the failure as the
//     listing does for a failed read.
//   - poll_completion busy-polls for up to 2 s (MAX_POLL_CQ_TIMEOUT); the
//     port waits up to the same 2 s on the CQ's completion channel
//     instead of spinning a core.
//
// The C text itself is under testdata/, with only what the manual's text
// conversion broke repaired (its first comment lists each repair).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/purerdma/rdma/uverbs"
)

// maxPollCQTimeout is MAX_POLL_CQ_TIMEOUT: how long poll_completion
// waits for a completion.
const maxPollCQTimeout = 2000 * time.Millisecond

const (
	msg      = "SEND operation "
	rdmaMsgR = "RDMA read operation "
	rdmaMsgW = "RDMA write operation"
	msgSize  = len(msg) + 1 // MSG_SIZE: 16
)

// config is struct config_t: the test's parameters.
type config struct {
	devName    string // "" is NULL: the first device found
	serverName string // "" is server mode
	tcpPort    uint32
	ibPort     int
	gidIdx     int
}

var cfg = config{tcpPort: 19875, ibPort: 1, gidIdx: -1}

// cmConData is struct cm_con_data_t, the data that connects the QPs;
// on the wire it is packed, 34 bytes, the integers big-endian.
type cmConData struct {
	addr  uint64   // buffer address
	rkey  uint32   // remote key
	qpNum uint32   // QP number
	lid   uint16   // LID of the IB port
	gid   [16]byte // GID
}

const cmConDataSize = 8 + 4 + 4 + 2 + 16

func (d cmConData) marshal() []byte {
	b := make([]byte, cmConDataSize)
	binary.BigEndian.PutUint64(b[0:], d.addr)
	binary.BigEndian.PutUint32(b[8:], d.rkey)
	binary.BigEndian.PutUint32(b[12:], d.qpNum)
	binary.BigEndian.PutUint16(b[16:], d.lid)
	copy(b[18:], d.gid[:])
	return b
}

func unmarshalConData(b []byte) cmConData {
	var d cmConData
	d.addr = binary.BigEndian.Uint64(b[0:])
	d.rkey = binary.BigEndian.Uint32(b[8:])
	d.qpNum = binary.BigEndian.Uint32(b[12:])
	d.lid = binary.BigEndian.Uint16(b[16:])
	copy(d.gid[:], b[18:])
	return d
}

// resources is struct resources.
type resources struct {
	portAttr    uverbs.PortAttr
	remoteProps cmConData
	ibCtx       *uverbs.Context
	pd          *uverbs.PD
	ch          *uverbs.CompChannel // the Go port waits on it (see the package doc)
	cq          *uverbs.CQ
	qp          *uverbs.QP
	mr          *uverbs.MR
	buf         []byte // MSG_SIZE bytes, registered as mr
	sock        net.Conn
}

var stdout, stderr io.Writer = os.Stdout, os.Stderr

func printf(format string, a ...any)  { fmt.Fprintf(stdout, format, a...) }
func eprintf(format string, a ...any) { fmt.Fprintf(stderr, format, a...) }

// sockConnect is sock_connect: as a client (servername set) it connects
// to servername:port, as a server it accepts one connection on port.
func sockConnect(servername string, port uint32) net.Conn {
	var conn net.Conn
	if servername != "" {
		addrs, err := net.DefaultResolver.LookupIPAddr(context.Background(), servername)
		var ip4 []net.IP
		for _, a := range addrs {
			if v4 := a.IP.To4(); v4 != nil {
				ip4 = append(ip4, v4)
			}
		}
		if err != nil || len(ip4) == 0 {
			eprintf("%s for %s:%d\n", gaiStrerror(err), servername, port)
		}
		for _, ip := range ip4 {
			c, err := net.DialTCP("tcp4", nil, &net.TCPAddr{IP: ip, Port: int(port)})
			if err != nil {
				printf("failed connect \n")
				continue
			}
			conn = c
		}
		if conn == nil {
			eprintf("Couldn't connect to %s:%d\n", servername, port)
		}
		return conn
	}
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: int(port)})
	if err == nil {
		conn, err = ln.Accept()
		ln.Close()
	}
	if conn == nil {
		eprintf("server accept: %s\n", strerror(err))
		eprintf("accept() failed\n")
	}
	return conn
}

// gaiStrerror is what gai_strerror says for a failed lookup.
func gaiStrerror(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && !dnsErr.IsNotFound {
		return "Temporary failure in name resolution"
	}
	return "Name or service not known"
}

// strerror is perror's text for err: the errno's message (Go's errno
// strings are glibc's), else what err says.
func strerror(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t := reflect.TypeOf(e); t.PkgPath() == "syscall" && t.Name() == "Errno" {
			s := e.Error()
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	if err == nil {
		return "Success"
	}
	return err.Error()
}

// sockSyncData is sock_sync_data: it sends local and waits for as many
// bytes from the peer. It fails (non-nil) when either direction fails,
// the peer's close included.
func sockSyncData(sock net.Conn, local, remote []byte) error {
	if _, err := sock.Write(local); err != nil {
		eprintf("Failed writing data during sock_sync_data\n")
		return err
	}
	_, err := io.ReadFull(sock, remote)
	return err
}

// pollCompletion is poll_completion: it waits up to MAX_POLL_CQ_TIMEOUT
// for one completion and reports 1 when there is none or it failed.
func pollCompletion(res *resources) int {
	ctx, cancel := context.WithTimeout(context.Background(), maxPollCQTimeout)
	defer cancel()
	wc := make([]uverbs.WorkCompletion, 1)
	_, err := res.cq.PollContext(ctx, wc)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		eprintf("completion wasn't found in the CQ after timeout\n")
		return 1
	case err != nil:
		eprintf("poll CQ failed\n")
		return 1
	}
	printf("completion was found in CQ with status 0x%x\n", uint32(wc[0].Status))
	if wc[0].Status != uverbs.WCSuccess {
		eprintf("got bad completion with status: 0x%x, vendor syndrome: 0x%x\n", uint32(wc[0].Status), wc[0].VendorErr)
		return 1
	}
	return 0
}

// postSend is post_send: one signaled work request of opcode over the
// whole buffer (MSG_SIZE bytes), to the peer's buffer for RDMA.
func postSend(res *resources, opcode uverbs.WROpcode) error {
	sr := uverbs.SendWR{
		Opcode: opcode,
		Flags:  uverbs.SendSignaled,
		SGL:    []uverbs.SGE{{Addr: res.mr.Addr(), Length: uint32(msgSize), LKey: res.mr.LKey()}},
	}
	if opcode != uverbs.WRSend {
		sr.RemoteAddr = res.remoteProps.addr
		sr.RKey = res.remoteProps.rkey
	}
	// there is a Receive Request in the responder side, so we won't get any into RNR flow
	if err := res.qp.PostSend(&sr); err != nil {
		eprintf("failed to post SR\n")
		return err
	}
	switch opcode {
	case uverbs.WRSend:
		printf("Send Request was posted\n")
	case uverbs.WRRDMARead:
		printf("RDMA Read Request was posted\n")
	case uverbs.WRRDMAWrite:
		printf("RDMA Write Request was posted\n")
	default:
		printf("Unknown Request was posted\n")
	}
	return nil
}

// postReceive is post_receive: one receive of MSG_SIZE bytes.
func postReceive(res *resources) error {
	rr := uverbs.RecvWR{SGL: []uverbs.SGE{{Addr: res.mr.Addr(), Length: uint32(msgSize), LKey: res.mr.LKey()}}}
	if err := res.qp.PostRecv(&rr); err != nil {
		eprintf("failed to post RR\n")
		return err
	}
	printf("Receive Request was posted\n")
	return nil
}

// resourcesCreate is resources_create: the TCP connection, then the
// device, port query, PD, CQ, buffer and MR, and the QP. On failure it
// frees what it made and returns 1.
func resourcesCreate(res *resources) (rc int) {
	defer func() {
		if rc != 0 {
			// Error encountered, cleanup
			for _, c := range []io.Closer{res.qp, res.mr, res.cq, res.ch, res.pd, res.ibCtx} {
				if !reflect.ValueOf(c).IsNil() {
					c.Close()
				}
			}
			res.qp, res.mr, res.cq, res.ch, res.pd, res.ibCtx, res.buf = nil, nil, nil, nil, nil, nil, nil
			if res.sock != nil {
				if res.sock.Close() != nil {
					eprintf("failed to close socket\n")
				}
				res.sock = nil
			}
		}
	}()
	if cfg.serverName != "" {
		res.sock = sockConnect(cfg.serverName, cfg.tcpPort)
		if res.sock == nil {
			eprintf("failed to establish TCP connection to server %s, port %d\n", cfg.serverName, cfg.tcpPort)
			return -1
		}
	} else {
		printf("waiting on port %d for TCP connection\n", cfg.tcpPort)
		res.sock = sockConnect("", cfg.tcpPort)
		if res.sock == nil {
			eprintf("failed to establish TCP connection with client on port %d\n", cfg.tcpPort)
			return -1
		}
	}
	printf("TCP connection was established\n")
	printf("searching for IB devices in host\n")

	devs, err := uverbs.Devices()
	if err != nil {
		eprintf("failed to get IB devices list\n")
		return 1
	}
	if len(devs) == 0 {
		eprintf("found %d device(s)\n", len(devs))
		return 1
	}
	printf("found %d device(s)\n", len(devs))
	var ibDev *uverbs.Device
	for i := range devs {
		if cfg.devName == "" {
			cfg.devName = devs[i].Name
			printf("device not specified, using first one found: %s\n", cfg.devName)
		}
		if devs[i].Name == cfg.devName {
			ibDev = &devs[i]
			break
		}
	}
	if ibDev == nil {
		eprintf("IB device %s wasn't found\n", cfg.devName)
		return 1
	}
	if res.ibCtx, err = ibDev.Open(nil); err != nil {
		eprintf("failed to open device %s\n", cfg.devName)
		return 1
	}
	if res.portAttr, err = res.ibCtx.QueryPort(cfg.ibPort); err != nil {
		eprintf("ibv_query_port on port %d failed\n", uint32(cfg.ibPort))
		return 1
	}
	if res.pd, err = res.ibCtx.AllocPD(); err != nil {
		eprintf("ibv_alloc_pd failed\n")
		return 1
	}
	// each side will send only one WR, so Completion Queue with 1 entry is enough
	cqSize := 1
	if res.ch, err = res.ibCtx.CreateCompChannel(); err == nil {
		res.cq, err = res.ibCtx.CreateCQ(uverbs.CQConfig{Size: cqSize, Channel: res.ch})
	}
	if err != nil {
		eprintf("failed to create CQ with %d entries\n", cqSize)
		return 1
	}
	res.buf = make([]byte, msgSize)
	// only in the server side put the message in the memory buffer
	if cfg.serverName == "" {
		strcpy(res.buf, msg)
		printf("going to send the message: \"%s\"\n", cstring(res.buf))
	}
	mrFlags := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	if res.mr, err = res.pd.RegMR(res.buf, mrFlags); err != nil {
		eprintf("ibv_reg_mr failed with mr_flags=0x%x\n", uint32(mrFlags))
		return 1
	}
	printf("MR was registered with addr=%#x, lkey=0x%x, rkey=0x%x, flags=0x%x\n",
		res.mr.Addr(), res.mr.LKey(), res.mr.RKey(), uint32(mrFlags))
	res.qp, err = res.pd.CreateQP(uverbs.QPConfig{
		Type:      uverbs.QPTypeRC,
		SignalAll: true,
		SendCQ:    res.cq,
		RecvCQ:    res.cq,
		Cap:       uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		eprintf("failed to create QP\n")
		return 1
	}
	printf("QP was created, QP number=0x%x\n", res.qp.Num())
	return 0
}

// strcpy copies s into buf as far as it fits (the listing's strcpy
// overran it; see the package doc), NUL-terminated when there is room.
func strcpy(buf []byte, s string) {
	clear(buf)
	copy(buf, s)
}

// cstring is buf up to its first NUL, as %s prints a char array; all
// of buf when it has none (the listing would read on past it).
func cstring(buf []byte) string {
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		return string(buf[:i])
	}
	return string(buf)
}

// modifyQPToInit is modify_qp_to_init: RESET to INIT.
func modifyQPToInit(qp *uverbs.QP) error {
	attr := uverbs.QPAttr{
		State:       uverbs.QPStateInit,
		PortNum:     cfg.ibPort,
		PKeyIndex:   0,
		AccessFlags: uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite,
	}
	flags := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags
	err := qp.Modify(&attr, flags)
	if err != nil {
		eprintf("failed to modify QP state to INIT\n")
	}
	return err
}

// modifyQPToRTR is modify_qp_to_rtr: INIT to RTR, towards remoteQPN at
// dlid, or dgid when -g was given (mandatory for RoCE).
func modifyQPToRTR(qp *uverbs.QP, remoteQPN uint32, dlid uint16, dgid [16]byte) error {
	attr := uverbs.QPAttr{
		State:           uverbs.QPStateRTR,
		PathMTU:         uverbs.MTU256,
		DestQPNum:       remoteQPN,
		RQPSN:           0,
		MaxDestRdAtomic: 1,
		MinRNRTimer:     0x12,
		AHAttr: uverbs.AHAttr{
			IsGlobal:    false,
			DLID:        dlid,
			SL:          0,
			SrcPathBits: 0,
			PortNum:     cfg.ibPort,
		},
	}
	if cfg.gidIdx >= 0 {
		attr.AHAttr.IsGlobal = true
		attr.AHAttr.PortNum = 1
		attr.AHAttr.GRH = uverbs.GlobalRoute{
			DGID:         uverbs.GID(dgid),
			FlowLabel:    0,
			HopLimit:     1,
			SGIDIndex:    cfg.gidIdx,
			TrafficClass: 0,
		}
	}
	flags := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
		uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
	err := qp.Modify(&attr, flags)
	if err != nil {
		eprintf("failed to modify QP state to RTR\n")
	}
	return err
}

// modifyQPToRTS is modify_qp_to_rts: RTR to RTS.
func modifyQPToRTS(qp *uverbs.QP) error {
	attr := uverbs.QPAttr{
		State:       uverbs.QPStateRTS,
		Timeout:     0x12,
		RetryCnt:    6,
		RNRRetry:    0,
		SQPSN:       0,
		MaxRdAtomic: 1,
	}
	flags := uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt |
		uverbs.QPAttrRNRRetry | uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic
	err := qp.Modify(&attr, flags)
	if err != nil {
		eprintf("failed to modify QP state to RTS\n")
	}
	return err
}

// connectQP is connect_qp: exchange cm_con_data_t over TCP, move the QP
// to RTS (the client posts its receive first), and sync once more.
func connectQP(res *resources) int {
	var myGID [16]byte
	if cfg.gidIdx >= 0 {
		g, err := res.ibCtx.QueryGID(cfg.ibPort, cfg.gidIdx)
		if err != nil && errnoOf(err) != 61 { // ENODATA: an empty entry, which ibv_query_gid returns as zeros
			eprintf("could not get gid for port %d, index %d\n", cfg.ibPort, cfg.gidIdx)
			return 1
		}
		myGID = g
	}
	local := cmConData{
		addr:  res.mr.Addr(),
		rkey:  res.mr.RKey(),
		qpNum: res.qp.Num(),
		lid:   res.portAttr.LID,
		gid:   myGID,
	}
	printf("\nLocal LID      = 0x%x\n", res.portAttr.LID)
	tmp := make([]byte, cmConDataSize)
	if sockSyncData(res.sock, local.marshal(), tmp) != nil {
		eprintf("failed to exchange connection data between sides\n")
		return 1
	}
	remote := unmarshalConData(tmp)
	// save the remote side attributes, we will need it for the post SR
	res.remoteProps = remote
	printf("Remote address = 0x%x\n", remote.addr)
	printf("Remote rkey = 0x%x\n", remote.rkey)
	printf("Remote QP number = 0x%x\n", remote.qpNum)
	printf("Remote LID = 0x%x\n", remote.lid)
	if cfg.gidIdx >= 0 {
		p := remote.gid
		printf("Remote GID =%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x\n",
			p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
	}
	if modifyQPToInit(res.qp) != nil {
		eprintf("change QP state to INIT failed\n")
		return 1
	}
	// let the client post RR to be prepared for incoming messages
	if cfg.serverName != "" {
		if postReceive(res) != nil {
			eprintf("failed to post RR\n")
			return 1
		}
	}
	if modifyQPToRTR(res.qp, remote.qpNum, remote.lid, remote.gid) != nil {
		eprintf("failed to modify QP state to RTR\n")
		return 1
	}
	if modifyQPToRTS(res.qp) != nil {
		eprintf("failed to modify QP state to RTR\n") // sic
		return 1
	}
	printf("QP state was change to RTS\n")
	// sync to make sure that both sides are in states that they can connect to prevent packet loose
	if sockSyncData(res.sock, []byte("Q"), make([]byte, 1)) != nil {
		eprintf("sync error after QPs are were moved to RTS\n")
		return 1
	}
	return 0
}

// resourcesDestroy is resources_destroy.
func resourcesDestroy(res *resources) int {
	rc := 0
	for _, o := range []struct {
		c   io.Closer
		msg string
	}{
		{res.qp, "failed to destroy QP\n"},
		{res.mr, "failed to deregister MR\n"},
		{res.cq, "failed to destroy CQ\n"},
		{res.ch, "failed to destroy CQ\n"},
		{res.pd, "failed to deallocate PD\n"},
		{res.ibCtx, "failed to close device context\n"},
		{res.sock, "failed to close socket\n"},
	} {
		if o.c == nil || reflect.ValueOf(o.c).IsNil() {
			continue
		}
		if o.c.Close() != nil {
			eprintf("%s", o.msg)
			rc = 1
		}
	}
	return rc
}

// printConfig is print_config.
func printConfig() {
	dev := "(null)" // glibc's %s of NULL
	if cfg.devName != "" {
		dev = cfg.devName
	}
	printf(" ------------------------------------------------\n")
	printf(" Device name      : \"%s\"\n", dev)
	printf(" IB port          : %d\n", uint32(cfg.ibPort))
	if cfg.serverName != "" {
		printf(" IP              : %s\n", cfg.serverName)
	}
	printf(" TCP port        : %d\n", cfg.tcpPort)
	if cfg.gidIdx >= 0 {
		printf(" GID index       : %d\n", uint32(cfg.gidIdx))
	}
	printf(" ------------------------------------------------\n")
}

// usage prints the listing's usage text (its "default 18515" is the
// listing's; the port is 19875).
func usage(argv0 string) {
	printf("Usage:\n")
	printf(" %s  start a server and wait for connection\n", argv0)
	printf(" %s <host>  connect to server at <host>\n", argv0)
	printf("\n")
	printf("Options:\n")
	printf(" -p, --port <port>  listen on/connect to port <port> (default 18515)\n")
	printf(" -d, --ib-dev <dev>  use IB device <dev> (default first device found)\n")
	printf(" -i, --ib-port <port>  use port <port> of IB device (default 1)\n")
	printf(" -g, --gid_idx <gid index>  gid index to be used in GRH (default not used)\n")
}

func main() {
	os.Exit(run(os.Args))
}

func run(argv []string) int {
	// parse the command line parameters
	opts, operands, ok := getoptLong(argv, "p:d:i:g:", []longOption{
		{"port", 'p'}, {"ib-dev", 'd'}, {"ib-port", 'i'}, {"gid-idx", 'g'},
	})
	if !ok {
		usage(argv[0])
		return 1
	}
	for _, o := range opts {
		switch o.c {
		case 'p':
			cfg.tcpPort = uint32(strtoul(o.arg))
		case 'd':
			cfg.devName = o.arg
		case 'i':
			cfg.ibPort = int(int32(strtoul(o.arg)))
			if cfg.ibPort < 0 {
				usage(argv[0])
				return 1
			}
		case 'g':
			cfg.gidIdx = int(int32(strtoul(o.arg)))
			if cfg.gidIdx < 0 {
				usage(argv[0])
				return 1
			}
		}
	}
	// parse the last parameter (if exists) as the server name
	if len(operands) == 1 {
		cfg.serverName = operands[0]
	} else if len(operands) > 1 {
		usage(argv[0])
		return 1
	}
	printConfig()
	var res resources
	rc := func() int {
		if resourcesCreate(&res) != 0 {
			eprintf("failed to create resources\n")
			return 1
		}
		if connectQP(&res) != 0 {
			eprintf("failed to connect QPs\n")
			return 1
		}
		// let the server post the sr
		if cfg.serverName == "" {
			if postSend(&res, uverbs.WRSend) != nil {
				eprintf("failed to post sr\n")
				return 1
			}
		}
		// in both sides we expect to get a completion
		if pollCompletion(&res) != 0 {
			eprintf("poll completion failed\n")
			return 1
		}
		// after polling the completion we have the message in the client buffer too
		if cfg.serverName != "" {
			printf("Message is: '%s'\n", cstring(res.buf))
		} else {
			// setup server buffer with read message
			strcpy(res.buf, rdmaMsgR)
		}
		// Sync so we are sure server side has data ready before client tries to read it
		if sockSyncData(res.sock, []byte("R"), make([]byte, 1)) != nil {
			eprintf("sync error before RDMA ops\n")
			return 1
		}
		// Now the client performs an RDMA read and then write on server.
		// Note that the server has no idea these events have occurred
		if cfg.serverName != "" {
			// First we read contents of server's buffer
			if postSend(&res, uverbs.WRRDMARead) != nil {
				eprintf("failed to post SR 2\n")
				return 1
			}
			if pollCompletion(&res) != 0 {
				eprintf("poll completion failed 2\n")
				return 1
			}
			printf("Contents of server's buffer: '%s'\n", cstring(res.buf))
			// Now we replace what's in the server's buffer
			strcpy(res.buf, rdmaMsgW)
			printf("Now replacing it with: '%s'\n", cstring(res.buf))
			if postSend(&res, uverbs.WRRDMAWrite) != nil {
				eprintf("failed to post SR 3\n")
				return 1
			}
			if pollCompletion(&res) != 0 {
				eprintf("poll completion failed 3\n")
				return 1
			}
		}
		// Sync so server will know that client is done mucking with its memory
		if sockSyncData(res.sock, []byte("W"), make([]byte, 1)) != nil {
			eprintf("sync error after RDMA ops\n")
			return 1
		}
		if cfg.serverName == "" {
			printf("Contents of server buffer: '%s'\n", cstring(res.buf))
		}
		return 0
	}()
	if resourcesDestroy(&res) != 0 {
		eprintf("failed to destroy resources\n")
		rc = 1
	}
	printf("\ntest result is %d\n", rc)
	return rc
}

// errnoOf is the errno in err's chain, 0 if none.
func errnoOf(err error) int {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if t := reflect.TypeOf(e); t.PkgPath() == "syscall" && t.Name() == "Errno" {
			return int(reflect.ValueOf(e).Uint())
		}
	}
	return 0
}

// strtoul is strtoul(optarg, NULL, 0) on a 64-bit long: the base from
// the prefix (0x hexadecimal, 0 octal, else decimal), the digits up to
// the first other byte, ULONG_MAX on overflow, a leading '-' negating
// modulo 2^64.
func strtoul(s string) uint64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := uint64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && digit(s[2]) < 16:
		base, s = 16, s[2:]
	case s != "" && s[0] == '0':
		base = 8
	}
	var v uint64
	for i := 0; i < len(s) && digit(s[i]) < base; i++ {
		if v > (^uint64(0)-digit(s[i]))/base {
			v = ^uint64(0) // ERANGE
			break
		}
		v = v*base + digit(s[i])
	}
	if neg {
		v = -v
	}
	return v
}

// digit is c's value as a digit of any base up to 36, or 99.
func digit(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 99
}
