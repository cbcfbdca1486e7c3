// Command client is librpma's 12scch-receive-completion-queue client
// in Go: the 08 ping-pong client with its receives completing on a
// separate receive CQ and its sends on the main CQ, both reporting on
// one completion channel (Conn.Wait).
//
//	client <server_address> <port> <start_value> <rounds> [<sleep>]
//
// sleep is in microseconds, between rounds.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const rcqSize = 10

func main() {
	if len(os.Args) < 5 {
		common.Usage("usage: %s <server_address> <port> <start_value> <rounds> [<sleep>]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	counter := common.StrtoulNoError(os.Args[3])
	rounds := common.StrtoulNoError(os.Args[4])
	var sleep uint64
	if len(os.Args) >= 6 {
		sleep = common.StrtoulNoError(os.Args[5])
	}
	common.ExitMinus1(run(os.Args[1], os.Args[2], counter, rounds, time.Duration(sleep)*time.Microsecond))
}

func run(addr, port string, counter, rounds uint64, sleep time.Duration) (err error) {
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

	cfg := rpma.NewConnCfg()
	cfg.SetRCQSize(rcqSize)
	cfg.SetCompletionChannel(true)
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, cfg, nil)
	if err != nil {
		return err
	}
	err = pingPong(ctx, conn, recv.Buf, send.Buf, recvMR, sendMR, counter, rounds, sleep)
	// Say goodbye, whatever happened, and wait until the server has it
	// (C does not wait: see common.SendDone).
	err = errors.Join(err, common.SendDone(conn, send.Buf, sendMR, func(wc *uverbs.WorkCompletion) error {
		return common.WaitAndValidateCompletion(ctx, conn, uverbs.WCSend, wc)
	}))
	return errors.Join(err, common.DisconnectAndWaitForConnClose(ctx, conn))
}

func pingPong(ctx context.Context, conn *rpma.Conn, recv, send []byte, recvMR, sendMR *rpma.MR, counter, rounds uint64, sleep time.Duration) error {
	recvCtx := common.OpContext(recvMR, 0)
	var wc uverbs.WorkCompletion
	// As C's while (--rounds): rounds-1 rounds.
	for rounds--; rounds != 0; rounds-- {
		// A receive for the server's answer.
		if err := conn.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
			return err
		}
		fmt.Printf("CLIENT: Value sent: %d\n", counter)
		common.PutUint64(send, counter)
		if err := conn.Send(sendMR, 0, common.MsgSize, rpma.CompletionAlways, 0); err != nil {
			return err
		}
		if err := common.WaitForSendAndRecv(ctx, conn, &wc); err != nil {
			return err
		}
		counter = common.Uint64(recv)
		fmt.Printf("CLIENT: Value received: %d\n", counter)
		if sleep > 0 {
			time.Sleep(sleep)
		}
	}
	return nil
}
