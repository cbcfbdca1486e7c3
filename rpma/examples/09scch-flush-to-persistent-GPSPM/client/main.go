// Command client is librpma's 09scch-flush-to-persistent-GPSPM client
// in Go, 09 with its CQ and receive CQ on one completion channel
// (Conn.Wait): it writes its greeting (from PMem, or DRAM without a
// path) to the server's memory, asks the server in a GPSPM flush
// request to persist it, waits for the response, and translates its
// greeting for the next run.
//
//	client <server_address> <port> [<pmem-path> [<pmem-offset>]]
//
// pmem-offset is where the example's data begins in pmem-path.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/rpma/examples/internal/gpspm"
	"github.com/purerdma/rdma/uverbs"
)

// flushID is the request's op context (FLUSH_ID).
const flushID = 0xF01D

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path> [<pmem-offset>]]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	var offset uint64
	if len(os.Args) >= 5 {
		offset = common.StrtoulNoError(os.Args[4])
	}
	common.Exit(run(os.Args[1], os.Args[2], os.Args, offset))
}

func run(addr, port string, args []string, offset uint64) error {
	ctx, cancel := common.Context()
	defer cancel()
	if offset > 1<<40 {
		return fmt.Errorf("<pmem-offset> %d is too large", offset)
	}
	mem, err := common.MemForAt(args, 3, int(offset), common.HelloTSize, common.InitHello)
	if err != nil {
		return err
	}
	defer mem.Close()
	hello := mem.Buf[mem.DataOffset : mem.DataOffset+common.HelloTSize]
	fmt.Printf("Next value: %s\n", common.HelloStr(hello))

	msg, err := common.DRAM(common.HelloStrSize)
	if err != nil {
		return err
	}
	defer msg.Close()

	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	cfg := rpma.NewConnCfg()
	cfg.SetRCQSize(gpspm.RCQSize)
	// The CQ and the receive CQ report on one completion channel.
	cfg.SetCompletionChannel(true)
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, cfg, nil)
	if err != nil {
		return err
	}
	err = write(ctx, conn, peer.Peer, mem, msg.Buf)
	if err == nil {
		// Translate the greeting, so the next time it is a surprise.
		common.Translate(hello)
		mem.Persist(hello)
		fmt.Printf("Translation: %s\n", common.HelloStr(hello))
	}
	// C ignores the failures of cleaning up.
	common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

// write writes the greeting to the server and has it persisted.
func write(ctx context.Context, conn *rpma.Conn, peer *rpma.Peer, mem *common.Mem, msg []byte) error {
	srcMR, err := peer.RegMR(mem.Buf, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	defer srcMR.Close()
	msgMR, err := peer.RegMR(msg, rpma.UsageSend|rpma.UsageRecv)
	if err != nil {
		return err
	}
	defer msgMR.Close()

	// The server's memory, from the private data.
	pdata := conn.PrivateData()
	if len(pdata) < common.DataSize {
		fmt.Fprintf(os.Stderr, "Received connection's private data is too small (%d < %d)\n", len(pdata), common.DataSize)
		return common.ErrUnexpected
	}
	data, err := common.DecodeData(pdata)
	if err != nil {
		return err
	}
	dst, err := data.RemoteMR()
	if err != nil {
		return err
	}
	dstOffset := int(data.DataOffset)
	if dst.Size() < uint64(dstOffset) || dst.Size()-uint64(dstOffset) < common.HelloStrSize {
		fmt.Fprintf(os.Stderr, "Size of the remote memory region is too small for writing the data of the assumed size (%d < %d)\n",
			int64(dst.Size())-int64(dstOffset), common.HelloStrSize)
		return common.ErrUnexpected
	}

	if err := conn.Write(dst, dstOffset, srcMR, mem.DataOffset+common.HelloStrOffset, common.HelloStrSize, rpma.CompletionOnError, 0); err != nil {
		return err
	}
	// A receive for the flush response.
	if err := conn.Recv(msgMR, gpspm.RecvOffset, gpspm.MsgSizeMax, 0); err != nil {
		return err
	}
	req := gpspm.FlushRequest{Offset: uint64(dstOffset), Length: common.HelloStrSize, OpContext: flushID}.Append(nil)
	n := copy(msg[gpspm.SendOffset:gpspm.SendOffset+gpspm.MsgSizeMax], req)
	if err := conn.Send(msgMR, gpspm.SendOffset, n, rpma.CompletionAlways, 0); err != nil {
		return err
	}

	var wc uverbs.WorkCompletion
	if err := common.WaitForSendAndRecv(ctx, conn, &wc); err != nil {
		return err
	}
	resp, err := gpspm.DecodeFlushResponse(msg[gpspm.RecvOffset : gpspm.RecvOffset+min(int(wc.ByteLen), gpspm.MsgSizeMax)])
	if err != nil {
		fmt.Fprintf(os.Stderr, "Cannot unpack the flush response buffer\n")
		return err
	}
	if resp.OpContext != flushID {
		fmt.Fprintf(os.Stderr, "unexpected flush_resp->op_context value (0x%X != 0x%X)\n", resp.OpContext, flushID)
		return common.ErrUnexpected
	}
	return nil
}
