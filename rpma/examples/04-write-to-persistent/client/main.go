// Command client is librpma's 04-write-to-persistent client in Go: it
// writes its greeting, kept in persistent memory (or DRAM), to the
// server's memory, makes it durable there with an RDMA read after the
// write, then translates the greeting so the next run sends the other
// language.
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

// rawBufferSize is the size of the read-after-write buffer.
const rawBufferSize = 8

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
	raw, err := common.DRAM(rawBufferSize)
	if err != nil {
		return err
	}
	defer raw.Close()
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
	err = write(ctx, peer.Peer, conn, mem, raw)
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

// write writes the greeting's string to the server's region, which its
// private data describes, and reads after it, which completes only
// once the write is placed.
func write(ctx context.Context, peer *rpma.Peer, conn *rpma.Conn, mem, raw *common.Mem) error {
	srcMR, err := peer.RegMR(mem.Buf, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	defer srcMR.Close()
	rawMR, err := peer.RegMR(raw.Buf, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	defer rawMR.Close()
	data, err := common.DecodeData(conn.PrivateData())
	if err != nil {
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
	// The read serves here as the flushing primitive.
	if err := conn.Read(rawMR, 0, dst, 0, rawBufferSize, rpma.CompletionAlways, 0); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	return common.WaitForCompletion(ctx, conn.CQ(), uverbs.WCRDMARead, &wc)
}
