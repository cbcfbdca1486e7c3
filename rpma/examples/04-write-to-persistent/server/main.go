// Command server is librpma's 04-write-to-persistent server in Go: it
// exposes its persistent memory (or DRAM) for the client to write a
// greeting to, and prints the value it had and, after the client
// disconnected, the new one.
//
//	server <server_address> <port> [<pmem-path>]
package main

import (
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path>]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2], os.Args[3:]))
}

func run(addr, port string, pmem []string) error {
	// All of the space after the signature is for the string; it is
	// assumed to be at least 1 KiB.
	mem, err := common.MemFor(pmem, 0, common.HelloStrSize, nil)
	if err != nil {
		return err
	}
	defer mem.Close()
	value := mem.Buf[mem.DataOffset : mem.DataOffset+common.HelloStrSize]
	if value[0] != 0 {
		fmt.Printf("Old value: %s\n", common.CString(value))
	}

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
	mr, err := peer.RegMR(mem.Buf, rpma.UsageWriteDst|rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	defer mr.Close()
	if len(pmem) > 0 {
		if err := common.AdviseFsDAX(mem, pmem[0], mr); err != nil {
			return err
		}
	}

	// Where the client writes to: after the signature in PMem.
	data, err := common.NewData(mem.DataOffset, mr, nil)
	if err != nil {
		return err
	}
	conn, err := common.ServerAcceptConnection(ctx, ep, nil, data.Encode())
	if err != nil {
		return err
	}
	// The client writes between the connection's establishment and its
	// close.
	if err := common.WaitForConnCloseAndDisconnect(ctx, conn); err != nil {
		return err
	}
	fmt.Printf("New value: %s\n", common.CString(value))
	return nil
}
