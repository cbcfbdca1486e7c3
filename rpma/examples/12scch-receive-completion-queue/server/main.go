// Command server is librpma's 12scch-receive-completion-queue server
// in Go: the 08 ping-pong server with its receives completing on a
// separate receive CQ and its sends on the main CQ, both reporting on
// one completion channel (Conn.Wait).
//
//	server <server_address> <port>
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
		common.Usage("usage: %s <server_address> <port>\n", os.Args[0])
	}
	common.SetVerboseLogging()
	common.ExitMinus1(run(os.Args[1], os.Args[2]))
}

func run(addr, port string) (err error) {
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

	cfg := rpma.NewConnCfg()
	cfg.SetRCQSize(rcqSize)
	cfg.SetCompletionChannel(true)
	req, err := ep.NextConnReq(ctx, cfg)
	if err != nil {
		return err
	}
	// A receive for the first message of the client's ping-pong.
	recvCtx := common.OpContext(recvMR, 0)
	if err := req.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
		req.Close()
		return err
	}
	conn, err := req.Connect(nil)
	if err != nil {
		return err
	}
	err = pingPong(ctx, conn, recv.Buf, send.Buf, recvMR, sendMR, recvCtx)
	return errors.Join(err, common.DisconnectAndWaitForConnClose(ctx, conn))
}

func pingPong(ctx context.Context, conn *rpma.Conn, recv, send []byte, recvMR, sendMR *rpma.MR, recvCtx uint64) error {
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
		return common.ErrUnexpected
	}
	var wc uverbs.WorkCompletion
	if err := common.WaitAndValidateCompletion(ctx, conn, uverbs.WCRecv, &wc); err != nil {
		return err
	}
	for {
		v := common.Uint64(recv)
		if v == common.IMDone {
			return nil
		}
		fmt.Printf("SERVER: Value received: %d\n", v)
		common.PutUint64(send, v+1)
		// A receive for the client's next message.
		if err := conn.Recv(recvMR, 0, common.MsgSize, recvCtx); err != nil {
			return err
		}
		fmt.Printf("SERVER: Value sent: %d\n", v+1)
		if err := conn.Send(sendMR, 0, common.MsgSize, rpma.CompletionAlways, 0); err != nil {
			return err
		}
		// This send's completion and the client's next message (at
		// least its goodbye), in either order.
		if err := common.WaitForSendAndRecv(ctx, conn, &wc); err != nil {
			return err
		}
	}
}
