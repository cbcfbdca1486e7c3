// Command server is librpma's 09scch-flush-to-persistent-GPSPM server
// in Go, 09 with its CQ and receive CQ on one completion channel
// (Conn.Wait): it exposes its memory (PMem, or DRAM without a path)
// to the client in the private data, waits for the client's GPSPM
// flush request, persists the range it names, answers, and prints the
// new contents once the client disconnects.
//
//	server <server_address> <port> [<pmem-path>]
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/rpma/examples/internal/gpspm"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path>]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2], os.Args))
}

func run(addr, port string, args []string) error {
	ctx, cancel := common.Context()
	defer cancel()
	mem, err := common.MemFor(args, 3, common.HelloStrSize, nil)
	if err != nil {
		return err
	}
	defer mem.Close()
	msg, err := common.DRAM(common.HelloStrSize)
	if err != nil {
		return err
	}
	defer msg.Close()

	if s := common.CString(mem.Buf[mem.DataOffset:]); s != "" {
		fmt.Printf("Old value: %s\n", s)
	}

	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer peer.Close()
	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer ep.Close()

	usage := rpma.UsageWriteDst | rpma.UsageFlushVisibility
	if mem.IsPMem {
		usage = rpma.UsageWriteDst | rpma.UsageFlushPersistent
	}
	mr, err := peer.RegMR(mem.Buf, usage)
	if err != nil {
		return err
	}
	defer mr.Close()
	// Only FS DAX memory takes advice (on-demand paging).
	if mem.IsPMem && !strings.Contains(args[3], "/dev/dax") {
		if err := mr.Advise(0, len(mem.Buf), uverbs.AdvisePrefetchWrite, uverbs.AdviseFlush); err != nil {
			return err
		}
	}
	msgMR, err := peer.RegMR(msg.Buf, rpma.UsageSend|rpma.UsageRecv|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	defer msgMR.Close()

	data, err := common.NewData(mem.DataOffset, mr, nil)
	if err != nil {
		return err
	}
	cfg := rpma.NewConnCfg()
	cfg.SetRCQSize(gpspm.RCQSize)
	// The CQ and the receive CQ report on one completion channel.
	cfg.SetCompletionChannel(true)

	req, err := ep.NextConnReq(ctx, cfg)
	if err != nil {
		return err
	}
	// A receive for the flush request.
	if err := req.Recv(msgMR, gpspm.RecvOffset, gpspm.MsgSizeMax, 0); err != nil {
		req.Close()
		return err
	}
	conn, err := req.Connect(data.Encode())
	if err != nil {
		return err
	}
	if err := serve(ctx, conn, mem, msg.Buf, msgMR); err != nil {
		conn.Close()
		return err
	}
	// Wait for the client to disconnect, then show what it wrote.
	if err := common.WaitForConnCloseAndDisconnect(ctx, conn); err != nil {
		return err
	}
	fmt.Printf("New value: %s\n", common.CString(mem.Buf[mem.DataOffset:]))
	return nil
}

// serve answers one flush request.
func serve(ctx context.Context, conn *rpma.Conn, mem *common.Mem, msg []byte, msgMR *rpma.MR) error {
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
		return common.ErrUnexpected
	}

	var wc uverbs.WorkCompletion
	if err := common.WaitAndValidateCompletion(ctx, conn, uverbs.WCRecv, &wc); err != nil {
		return err
	}
	req, err := gpspm.DecodeFlushRequest(msg[gpspm.RecvOffset : gpspm.RecvOffset+min(int(wc.ByteLen), gpspm.MsgSizeMax)])
	if err != nil {
		fmt.Fprintf(os.Stderr, "Cannot unpack the flush request buffer\n")
		return err
	}
	fmt.Printf("Flush request received: {offset: 0x%X, length: 0x%X, op_context: 0x%X}\n", req.Offset, req.Length, req.OpContext)
	if req.Offset > uint64(len(mem.Buf)) || req.Length > uint64(len(mem.Buf))-req.Offset {
		fmt.Fprintf(os.Stderr, "The flush request's range (0x%X + 0x%X) is outside the memory (0x%X)\n", req.Offset, req.Length, len(mem.Buf))
		return common.ErrUnexpected
	}
	mem.Persist(mem.Buf[req.Offset : req.Offset+req.Length])

	resp := gpspm.FlushResponse{OpContext: req.OpContext}.Append(nil)
	n := copy(msg[gpspm.SendOffset:gpspm.SendOffset+gpspm.MsgSizeMax], resp)
	if err := conn.Send(msgMR, gpspm.SendOffset, n, rpma.CompletionAlways, 0); err != nil {
		return err
	}
	return common.WaitAndValidateCompletion(ctx, conn, uverbs.WCSend, &wc)
}
