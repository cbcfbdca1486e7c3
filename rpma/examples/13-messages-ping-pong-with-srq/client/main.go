// Command client is librpma's 13-messages-ping-pong-with-srq client in
// Go: it connects, sends its counter, prints what the server sends back
// and sends that again, rounds times, then says it is done and waits
// for the server to disconnect. Its lines carry its process ID, as
// many clients share the server.
//
//	client <server_address> <port> <seed> <rounds> [<sleep>]
//
// seed is the counter's first value; sleep is in microseconds, between
// rounds.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

func main() {
	if len(os.Args) < 5 {
		common.Usage("usage: %s <server_address> <port> <seed> <rounds> [<sleep>]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	cntr := common.StrtoulNoError(os.Args[3])
	rounds := common.StrtoulNoError(os.Args[4])
	var sleep uint64
	if len(os.Args) >= 6 {
		sleep = common.StrtoulNoError(os.Args[5])
	}
	common.ExitMinus1(run(os.Args[1], os.Args[2], cntr, rounds, time.Duration(sleep)*time.Microsecond))
}

func run(addr, port string, cntr, rounds uint64, sleep time.Duration) (err error) {
	ctx, cancel := common.Context()
	defer cancel()
	recv, err := common.DRAM(common.MsgSize)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, recv)
	send, err := common.DRAM(common.MsgSize)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, send)

	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, peer)
	recvMR, err := peer.RegMR(recv.Buf, rpma.UsageRecv)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, recvMR)
	sendMR, err := peer.RegMR(send.Buf, rpma.UsageSend)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, sendMR)

	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, nil)
	if err != nil {
		return err
	}
	err = pingPong(ctx, conn, recv.Buf, send.Buf, recvMR, sendMR, cntr, rounds, sleep)
	// Say goodbye, whatever happened.
	common.PutUint64(send.Buf, common.IMDone)
	err = errors.Join(err, conn.Send(sendMR, 0, common.MsgSize, rpma.CompletionOnError, 0))
	return errors.Join(err, common.WaitForConnCloseAndDisconnect(ctx, conn))
}

func pingPong(ctx context.Context, conn *rpma.Conn, recv, send []byte, recvMR, sendMR *rpma.MR, cntr, rounds uint64, sleep time.Duration) error {
	cq := conn.CQ()
	recvCtx := common.OpContext(recvMR, 0)
	pid := os.Getpid()
	// As C's do { ... } while (--rounds).
	for {
		// A receive for the server's answer.
		if err := conn.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
			return err
		}
		fmt.Printf("[client #%d] value sent: %d\n", pid, cntr)
		common.PutUint64(send, cntr)
		if err := conn.Send(sendMR, 0, common.MsgSize, rpma.CompletionAlways, 0); err != nil {
			return err
		}
		var c common.Completions
		if err := c.WaitAndProcess(ctx, cq, recvCtx); err != nil {
			return err
		}
		cntr = common.Uint64(recv)
		fmt.Printf("[client #%d] value received: %d\n", pid, cntr)
		if sleep > 0 {
			time.Sleep(sleep)
		}
		if rounds--; rounds == 0 {
			return nil
		}
	}
}
