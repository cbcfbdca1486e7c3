// Command server is librpma's 08srq-simple-messages-ping-pong-with-srq
// server in Go: the 08 ping-pong server with its receives posted to a
// shared receive queue.
//
//	server <server_address> <port> [m|r]
//
// Receive completions arrive on the SRQ's own receive CQ by default,
// on the connection's main CQ with m, and on the connection's separate
// receive CQ with r.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const rcqSize = 10

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [m|r]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	rcqFlag := byte('s')
	if len(os.Args) > 3 {
		switch os.Args[3] {
		case "m", "r":
			rcqFlag = os.Args[3][0]
		default:
			fmt.Fprintf(os.Stderr, "The third parameter should be one of m or r (%s given)\n", os.Args[3])
			os.Exit(255)
		}
	}
	common.ExitMinus1(run(os.Args[1], os.Args[2], rcqFlag))
}

func run(addr, port string, rcqFlag byte) (err error) {
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

	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, peer)
	srqCfg := rpma.NewSRQCfg()
	if rcqFlag != 's' {
		// No receive CQ of the SRQ's own.
		srqCfg.SetRCQSize(0)
	}
	srq, err := peer.NewSRQ(srqCfg)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, srq)
	cfg := rpma.NewConnCfg()
	if rcqFlag == 'r' {
		cfg.SetRCQSize(rcqSize)
	}
	cfg.SetSRQ(srq)

	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, ep)
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

	// A receive for the first message of the client's ping-pong.
	recvCtx := common.OpContext(recvMR, 0)
	if err := srq.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
		return err
	}
	conn, err := common.ServerAcceptConnection(ctx, ep, cfg, nil)
	if err != nil {
		return err
	}
	err = pingPong(ctx, conn, srq, rcqFlag, recv.Buf, send.Buf, recvMR, sendMR, recvCtx)
	// Disconnect the client without waiting, as C does.
	conn.Disconnect()
	conn.Close()
	return err
}

func pingPong(ctx context.Context, conn *rpma.Conn, srq *rpma.SRQ, rcqFlag byte, recv, send []byte, recvMR, sendMR *rpma.MR, recvCtx uint64) error {
	qpNum := conn.QPNum()
	var rcq *rpma.CQ
	switch rcqFlag {
	case 's':
		rcq = srq.RCQ() // the SRQ's receive CQ
	case 'm':
		rcq = conn.CQ() // the connection's main CQ
	case 'r':
		rcq = conn.RCQ() // the connection's separate receive CQ
	}
	if rcq == nil {
		return fmt.Errorf("no receive CQ (%c)", rcqFlag)
	}
	wc := make([]uverbs.WorkCompletion, 1)
	for {
		var c common.Completions
		for !c.Recv {
			if err := rcq.Wait(ctx); err != nil {
				return err
			}
			n, err := rcq.GetWC(wc)
			if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
				return err
			}
			if n == 1 {
				if err := c.Validate(&wc[0], recvCtx); err != nil {
					return err
				}
			}
		}
		v := common.Uint64(recv)
		if v == common.IMDone {
			return nil
		}
		if wc[0].QPNum != qpNum {
			fmt.Fprintf(os.Stderr, "Error: number of QP (qp_num) in the received completion (%d) differs from the one of the connection (%d)\n",
				wc[0].QPNum, qpNum)
			return common.ErrUnexpected
		}
		fmt.Printf("Value received: %d\n", v)
		common.PutUint64(send, v+1)
		// A receive for the client's next message.
		if err := srq.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
			return err
		}
		fmt.Printf("Value sent: %d\n", v+1)
		if err := conn.Send(sendMR, 0, common.MsgSize, rpma.CompletionOnError, 0); err != nil {
			return err
		}
	}
}
