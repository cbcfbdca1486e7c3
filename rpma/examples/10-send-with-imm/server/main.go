// Command server is librpma's 10-send-with-imm server in Go: it takes
// the immediate data to expect from the client's private data, receives
// the client's message with immediate data and checks it.
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
	recv, err := common.DRAM(kilobyte)
	if err != nil {
		return err
	}
	defer recv.Close()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer peer.Close()
	recvMR, err := peer.RegMR(recv.Buf, rpma.UsageRecv)
	if err != nil {
		return err
	}
	defer recvMR.Close()
	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer ep.Close()

	req, err := ep.NextConnReq(ctx, nil)
	if err != nil {
		return err
	}
	// A receive for the message with immediate data.
	if err := req.Recv(recvMR, 0, kilobyte, 0); err != nil {
		req.Close()
		return err
	}
	conn, err := req.Connect(nil)
	if err != nil {
		return err
	}
	err = receive(ctx, conn, recv.Buf)
	// C ignores the failures of closing.
	common.WaitForConnCloseAndDisconnect(ctx, conn)
	return err
}

func receive(ctx context.Context, conn *rpma.Conn, recv []byte) error {
	ev, err := conn.NextEvent(ctx)
	if err != nil {
		return err
	}
	if ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event() returned an unexpected event: %v\n", ev)
		return common.ErrUnexpected
	}
	// The immediate data the client will send, in its private data.
	pdata := conn.PrivateData()
	if len(pdata) < 4 {
		fmt.Fprintf(os.Stderr, "Received connection's private data is too small (%d < %d)\n", len(pdata), 4)
		return common.ErrUnexpected
	}
	expImm := binary.NativeEndian.Uint32(pdata)

	cq := conn.CQ()
	if err := cq.Wait(ctx); err != nil {
		return err
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := cq.GetWC(wc); err != nil {
		return err
	}
	switch {
	case wc[0].Status != uverbs.WCSuccess:
		fmt.Fprintf(os.Stderr, "Received unexpected completion: %v\n", wc[0].Status)
		return rpma.CompletionErr(&wc[0])
	case wc[0].Opcode != uverbs.WCRecv:
		fmt.Fprintf(os.Stderr, "Received unexpected type of operation (%d != %d)\n", wc[0].Opcode, uverbs.WCRecv)
		return common.ErrUnexpected
	case wc[0].Flags&uverbs.WCWithImm == 0:
		fmt.Fprintf(os.Stderr, "Received unexpected completion flag (no IBV_WC_WITH_IMM)\n")
		return common.ErrUnexpected
	case wc[0].Imm != expImm:
		fmt.Fprintf(os.Stderr, "Received unexpected immediate data (%d != %d)\n", wc[0].Imm, expImm)
		return common.ErrUnexpected
	}
	value := ""
	if wc[0].ByteLen > 0 {
		value = common.CString(recv)
	}
	fmt.Printf("Received value '%s' with immediate data '%d'\n", value, wc[0].Imm)
	return nil
}
