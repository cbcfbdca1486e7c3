// Command client is librpma's 05-flush-to-persistent client in Go: it
// writes its greeting, kept in persistent memory (or DRAM), to the
// server's memory and flushes it there, to persistence when the
// server's peer configuration says its PMem takes writes directly,
// else to visibility; then it translates the greeting so the next run
// sends the other language.
//
//	client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

// flushID is the flush's op context (FLUSH_ID, a random identifier).
const flushID = 0xF01D

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path> [<pmem-offset>]]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2], os.Args[3:]))
}

func run(addr, port string, pmem []string) error {
	mem, err := common.MemAtFor(pmem, 0, common.HelloTSize, common.InitHello)
	if err != nil {
		return err
	}
	defer mem.Close()
	hello := mem.Buf[mem.DataOffset : mem.DataOffset+common.HelloTSize]
	fmt.Printf("Next value: %s\n", common.HelloStr(hello))

	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, nil)
	if err != nil {
		return err
	}
	err = writeAndFlush(ctx, peer.Peer, conn, mem)
	if err == nil {
		// Translate the greeting, so that the next one is a surprise.
		common.Translate(hello)
		mem.Persist(hello)
		fmt.Printf("Translation: %s\n", common.HelloStr(hello))
	}
	// As in C, how the close goes does not change the exit status.
	_ = common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

// writeAndFlush applies the server's peer configuration, writes the
// greeting's string to the server's region and flushes it.
func writeAndFlush(ctx context.Context, peer *rpma.Peer, conn *rpma.Conn, mem *common.Mem) error {
	srcMR, err := peer.RegMR(mem.Buf, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	defer srcMR.Close()
	data, err := common.DecodeData(conn.PrivateData())
	if err != nil {
		return err
	}
	pcfg, err := data.PeerCfg()
	if err != nil {
		return err
	}
	direct := pcfg.DirectWriteToPMem()
	if err := conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return err
	}
	dst, err := data.RemoteMR()
	if err != nil {
		return err
	}
	dstOffset := uint64(data.DataOffset)
	if dstOffset > dst.Size() || dst.Size()-dstOffset < common.HelloStrSize {
		fmt.Fprintf(os.Stderr, "Remote memory region size too small for writing the data of the assumed size (%d < %d)\n",
			int64(dst.Size())-int64(dstOffset), common.HelloStrSize)
		return common.ErrUnexpected
	}
	if err := conn.Write(dst, int(dstOffset), srcMR, mem.DataOffset+common.HelloStrOffset, common.HelloStrSize,
		rpma.CompletionOnError, 0); err != nil {
		return err
	}
	flushType := rpma.FlushVisibility
	if direct {
		fmt.Printf("RPMA_FLUSH_TYPE_PERSISTENT is supported\n")
		flushType = rpma.FlushPersistent
	} else {
		fmt.Printf("RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead\n")
	}
	if err := conn.Flush(dst, int(dstOffset), common.HelloStrSize, flushType, rpma.CompletionAlways, flushID); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	if err := common.WaitForWC(ctx, conn.CQ(), &wc); err != nil {
		return err
	}
	if wc.WRID != flushID {
		fmt.Fprintf(os.Stderr, "unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, flushID)
		return common.ErrUnexpected
	}
	if wc.Status != uverbs.WCSuccess {
		fmt.Fprintf(os.Stderr, "rpma_flush() failed: %v\n", wc.Status)
		return rpma.CompletionErr(&wc)
	}
	return nil
}
