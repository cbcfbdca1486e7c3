// Command server is librpma's 03-read-to-persistent server in Go: it
// reads the client's greeting with an RDMA read into its persistent
// memory (or DRAM), persists it and prints the value it replaced and
// the new one.
//
//	server <server_address> <port> [<pmem-path>]
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
		common.Usage("usage: %s <server_address> <port> [<pmem-path>]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	// C's main returns -1 for any failure.
	common.ExitStatus(run(os.Args[1], os.Args[2], os.Args[3:]), -1)
}

func run(addr, port string, pmem []string) error {
	mem, err := common.MemFor(pmem, 0, common.HelloStrSize, nil)
	if err != nil {
		return err
	}
	defer mem.Close()

	ctx, cancel := common.Context()
	defer cancel()
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
	dstMR, err := peer.RegMR(mem.Buf, rpma.UsageReadDst)
	if err != nil {
		return err
	}
	defer dstMR.Close()
	if len(pmem) > 0 {
		if err := common.AdviseFsDAX(mem, pmem[0], dstMR); err != nil {
			return err
		}
	}

	conn, err := common.ServerAcceptConnection(ctx, ep, nil, nil)
	if err != nil {
		return err
	}
	err = read(ctx, conn, mem, dstMR)
	// C joins the close's result to the read's.
	if cerr := common.DisconnectAndWaitForConnClose(ctx, conn); err == nil {
		err = cerr
	}
	return err
}

// read replaces the string in mem with the client's, which its private
// data describes, and persists it.
func read(ctx context.Context, conn *rpma.Conn, mem *common.Mem, dst *rpma.MR) error {
	data, err := common.DecodeData(conn.PrivateData())
	if err != nil {
		return err
	}
	src, err := data.RemoteMR()
	if err != nil {
		return err
	}
	value := mem.Buf[mem.DataOffset : mem.DataOffset+common.HelloStrSize]
	if value[0] != 0 {
		fmt.Printf("Old value: %s\n", common.CString(value))
	}
	if err := conn.Read(dst, mem.DataOffset, src, int(data.DataOffset), common.HelloStrSize, rpma.CompletionAlways, 0); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	if err := common.WaitForCompletion(ctx, conn.CQ(), uverbs.WCRDMARead, &wc); err != nil {
		return err
	}
	mem.Persist(value)
	fmt.Printf("New value: %s\n", common.CString(value))
	return nil
}
