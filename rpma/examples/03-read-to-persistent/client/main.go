// Command client is librpma's 03-read-to-persistent client in Go: it
// exposes a greeting, kept in persistent memory (or DRAM), for the
// server to read, waits for the server to disconnect, then translates
// the greeting so the next run sends the other language.
//
//	client <server_address> <port> [<pmem-path> [<pmem-offset>]]
package main

import (
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

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
	mr, err := peer.RegMR(mem.Buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	defer mr.Close()

	// Where the server reads from: the string of the hello_t.
	data, err := common.NewData(mem.DataOffset+common.HelloStrOffset, mr, nil)
	if err != nil {
		return err
	}
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, data.Encode())
	if err != nil {
		return err
	}
	// The server reads between the connection's establishment and its
	// close. As in C, how the close goes does not change the exit
	// status.
	_ = common.WaitForConnCloseAndDisconnect(ctx, conn)

	// Translate the greeting, so that the next one is a surprise.
	common.Translate(hello)
	mem.Persist(hello)
	fmt.Printf("Translation: %s\n", common.HelloStr(hello))
	return nil
}
