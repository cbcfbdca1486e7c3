// Command server is librpma's 05-flush-to-persistent server in Go: it
// exposes its persistent memory (or DRAM) for the client to write a
// greeting to and flush, with its peer configuration (whether RDMA
// writes reach its PMem directly), and prints the value it had and,
// after the client disconnected, the new one.
//
//	server <server_address> <port> [<pmem-path>] [direct-pmem-write]
//
// direct-pmem-write "on" (after a PMem path) says that writes reach the
// PMem directly, so the client flushes to persistence; anything else,
// or nothing, that they do not, so it flushes to visibility.
package main

import (
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path>] [direct-pmem-write]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2], os.Args[3:]))
}

func run(addr, port string, args []string) error {
	mem, err := common.MemFor(args, 0, common.HelloStrSize, nil)
	if err != nil {
		return err
	}
	defer mem.Close()
	value := mem.Buf[mem.DataOffset : mem.DataOffset+common.HelloStrSize]
	if value[0] != 0 {
		fmt.Printf("Old value: %s\n", common.CString(value))
	}

	pcfg := rpma.NewPeerCfg()
	if len(args) >= 2 {
		pcfg.SetDirectWriteToPMem(args[1] == "on")
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
	usage := rpma.UsageWriteDst | rpma.UsageFlushVisibility
	if mem.IsPMem {
		usage |= rpma.UsageFlushPersistent
	}
	mr, err := peer.RegMR(mem.Buf, usage)
	if err != nil {
		return err
	}
	defer mr.Close()
	if len(args) > 0 {
		if err := common.AdviseFsDAX(mem, args[0], mr); err != nil {
			return err
		}
	}

	// Where the client writes to, the region, and the peer
	// configuration after it.
	data, err := common.NewData(mem.DataOffset, mr, pcfg)
	if err != nil {
		return err
	}
	conn, err := common.ServerAcceptConnection(ctx, ep, nil, data.Encode())
	if err != nil {
		return err
	}
	// The client writes and flushes between the connection's
	// establishment and its close.
	if err := common.WaitForConnCloseAndDisconnect(ctx, conn); err != nil {
		return err
	}
	fmt.Printf("New value: %s\n", common.CString(value))
	return nil
}
