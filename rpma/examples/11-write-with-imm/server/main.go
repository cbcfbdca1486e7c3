// Command server is librpma's 11-write-with-imm server in Go: it
// exposes a kilobyte to the client in the private data, takes the
// client's write with immediate data in a receive, and checks that the
// immediate data equals the value written.
//
//	server <server_address> <port>
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const kilobyte = 1024

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
	dst, err := common.DRAM(kilobyte)
	if err != nil {
		return err
	}
	defer dst.Close()
	recv, err := common.DRAM(1)
	if err != nil {
		return err
	}
	defer recv.Close()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer peer.Close()
	dstMR, err := peer.RegMR(dst.Buf, rpma.UsageWriteDst)
	if err != nil {
		return err
	}
	defer dstMR.Close()
	recvMR, err := peer.RegMR(recv.Buf, rpma.UsageRecv)
	if err != nil {
		return err
	}
	defer recvMR.Close()
	data, err := common.NewData(0, dstMR, nil)
	if err != nil {
		return err
	}
	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer ep.Close()

	req, err := ep.NextConnReq(ctx, nil)
	if err != nil {
		return err
	}
	// The receive the write's immediate data will consume.
	if err := req.Recv(recvMR, 0, 1, 0); err != nil {
		req.Close()
		return err
	}
	conn, err := req.Connect(data.Encode())
	if err != nil {
		return err
	}
	err = receive(ctx, conn, dst.Buf)
	// C ignores the failures of closing.
	common.WaitForConnCloseAndDisconnect(ctx, conn)
	return err
}

func receive(ctx context.Context, conn *rpma.Conn, dst []byte) error {
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
		return common.ErrUnexpected
	}
	cq := conn.CQ()
	if err := cq.Wait(ctx); err != nil {
		return err
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := cq.GetWC(wc); err != nil {
		return err
	}
	expImm := binary.NativeEndian.Uint32(dst)
	switch {
	case wc[0].Status != uverbs.WCSuccess:
		fmt.Fprintf(os.Stderr, "Received unexpected completion: %v\n", wc[0].Status)
		return rpma.CompletionErr(&wc[0])
	case wc[0].Opcode != uverbs.WCRecvRDMAWithImm:
		fmt.Fprintf(os.Stderr, "Received unexpected type of operation (%d != %d)\n", wc[0].Opcode, uverbs.WCRecvRDMAWithImm)
		return common.ErrUnexpected
	case wc[0].Flags&uverbs.WCWithImm == 0:
		fmt.Fprintf(os.Stderr, "Received an unexpected completion flag (no IBV_WC_WITH_IMM)\n")
		return common.ErrUnexpected
	case wc[0].Imm != expImm:
		fmt.Fprintf(os.Stderr, "Received unexpected immediate data (%d != %d)\n", wc[0].Imm, expImm)
		return common.ErrUnexpected
	}
	fmt.Printf("The value '%d' was written together with immediate data '%d'\n", expImm, wc[0].Imm)
	return nil
}
