// Command client is librpma's 02-read-to-volatile client in Go: it
// connects, reads the server's greeting with an RDMA read into local
// DRAM and prints it.
//
//	client <server_address> <port>
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port>\n", os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2]))
}

func run(addr, port string) error {
	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()

	// The destination of the read: a local, volatile region.
	dst, err := common.DRAM(common.Kilobyte)
	if err != nil {
		return err
	}
	defer dst.Close()
	dstMR, err := peer.RegMR(dst.Buf, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	defer dstMR.Close()

	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, nil)
	if err != nil {
		return err
	}
	err = read(ctx, conn, dstMR)
	if err == nil {
		fmt.Printf("Read a message: %s\n", common.CString(dst.Buf))
	}
	// As in C, how the close goes does not change the exit status.
	_ = common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

// read reads the whole of the server's region, which its descriptor in
// the private data describes, into dst.
func read(ctx context.Context, conn *rpma.Conn, dst *rpma.MR) error {
	pd := conn.PrivateData()
	if pd == nil {
		fmt.Fprintf(os.Stderr, "The server has not provided a remote memory region. (the connection's private data is empty)\n")
		return common.ErrUnexpected
	}
	data, err := common.DecodeData(pd)
	if err != nil {
		return err
	}
	src, err := data.RemoteMR()
	if err != nil {
		return err
	}
	if src.Size() > uint64(dst.Size()) {
		fmt.Fprintf(os.Stderr, "Remote memory region size too big to reading to the sink buffer of the assumed size (%d > %d)\n",
			src.Size(), dst.Size())
		return common.ErrUnexpected
	}
	if err := conn.Read(dst, 0, src, 0, int(src.Size()), rpma.CompletionAlways, 0); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	return common.WaitForCompletion(ctx, conn.CQ(), uverbs.WCRDMARead, &wc)
}
