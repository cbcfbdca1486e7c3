// Command client is librpma's 01-connection client in Go: it connects
// with a greeting as private data (retrying while the server is not
// there yet), prints the server's greeting and waits for the server to
// close the connection.
//
//	client <addr> <port>
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

const (
	maxRetry   = 10
	retryDelay = 5 * time.Second
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
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	var conn *rpma.Conn
	for retry := 0; retry < maxRetry && conn == nil; retry++ {
		req, err := peer.NewConnReq(ctx, addr, port, nil)
		if err != nil {
			return err
		}
		c, err := req.Connect([]byte("Hello server!\x00"))
		if err != nil {
			return err
		}
		ev, err := c.NextEvent(ctx)
		switch {
		case err != nil:
			c.Disconnect()
			c.Close()
			return err
		case ev == rpma.ConnEstablished:
			conn = c
		case ev == rpma.ConnRejected:
			c.Disconnect()
			c.Close()
			if retry < maxRetry-1 {
				fmt.Fprintf(os.Stderr, "Retrying...\n")
				time.Sleep(retryDelay)
			} else {
				fmt.Fprintf(os.Stderr, "The retry number exceeded. Closing.\n")
			}
		default:
			fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
			c.Disconnect()
			c.Close()
			return common.ErrUnexpected
		}
	}
	if conn == nil {
		return errors.New("no connection")
	}
	if pd := conn.PrivateData(); pd != nil {
		fmt.Printf("Received a message: %s\n", common.CString(pd))
	} else {
		fmt.Printf("No message received\n")
	}
	return common.WaitForConnCloseAndDisconnect(ctx, conn)
}
