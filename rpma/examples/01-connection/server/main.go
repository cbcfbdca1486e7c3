// Command server is librpma's 01-connection server in Go: it accepts
// one connection with a greeting as private data, prints the client's
// greeting, disconnects and waits for the close.
//
//	server <addr> <port>
package main

import (
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <addr> <port>\n", os.Args[0])
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
	conn, err := common.ServerAcceptConnection(ctx, ep, nil, []byte("Hello client!\x00"))
	if err != nil {
		return err
	}
	if pd := conn.PrivateData(); pd != nil {
		fmt.Printf("Received a message: %s\n", common.CString(pd))
	} else {
		fmt.Printf("No message received\n")
	}
	return common.DisconnectAndWaitForConnClose(ctx, conn)
}
