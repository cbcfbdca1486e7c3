// Command server is librpma's 02-read-to-volatile server in Go: it
// exposes a greeting in DRAM for the client to read, sends the region's
// descriptor as the connection's private data and waits for the client
// to disconnect.
//
//	server <server_address> <port>
package main

import (
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

const helloStr = "Hello client!"

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

	// The greeting with its terminating zero, in page-aligned memory.
	mem, err := common.DRAM(len(helloStr) + 1)
	if err != nil {
		return err
	}
	defer mem.Close()
	copy(mem.Buf, helloStr)
	mr, err := peer.RegMR(mem.Buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	defer mr.Close()
	data, err := common.NewData(0, mr, nil)
	if err != nil {
		return err
	}

	conn, err := common.ServerAcceptConnection(ctx, ep, nil, data.Encode())
	if err != nil {
		return err
	}
	// The client reads the greeting between the connection's
	// establishment and its close. As in C, how the close goes does not
	// change the exit status.
	_ = common.WaitForConnCloseAndDisconnect(ctx, conn)
	return nil
}
