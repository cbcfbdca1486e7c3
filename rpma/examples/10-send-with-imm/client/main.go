// Command client is librpma's 10-send-with-imm client in Go: it tells
// the server the immediate data in its private data, then sends it
// with a message holding word, or with an empty message without one.
//
//	client <server_address> <port> <imm> [word]
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const kilobyte = 1024

func main() {
	if len(os.Args) < 4 {
		common.Usage("usage: %s <server_address> <port> <imm> [word]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	imm, overflow := common.Strtoul(os.Args[3])
	if overflow {
		fmt.Fprintf(os.Stderr, "strtoul() overflow\n")
		os.Exit(255)
	}
	if imm > math.MaxUint32 {
		fmt.Fprintf(os.Stderr, "The provided immediate data is too big (%d > %d)\n", imm, uint32(math.MaxUint32))
		os.Exit(255)
	}
	var word *string
	if len(os.Args) >= 5 {
		word = &os.Args[4]
	}
	common.Exit(run(os.Args[1], os.Args[2], uint32(imm), word))
}

func run(addr, port string, imm uint32, word *string) error {
	ctx, cancel := common.Context()
	defer cancel()
	var send *common.Mem
	if word != nil {
		var err error
		if send, err = common.DRAM(kilobyte); err != nil {
			return err
		}
		defer send.Close()
	}
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	var sendMR *rpma.MR
	length := 0
	if word != nil {
		if sendMR, err = peer.RegMR(send.Buf, rpma.UsageSend); err != nil {
			return err
		}
		defer sendMR.Close()
		length = kilobyte
	}

	// The immediate data, for the server to check, as private data.
	pdata := binary.NativeEndian.AppendUint32(nil, imm)
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, pdata)
	if err != nil {
		return err
	}
	err = sendWithImm(ctx, conn, send, sendMR, length, imm, word)
	// C ignores the failures of closing.
	common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

func sendWithImm(ctx context.Context, conn *rpma.Conn, send *common.Mem, sendMR *rpma.MR, length int, imm uint32, word *string) error {
	if word != nil {
		fmt.Printf("Sending value '%s' with immediate data '%d'\n", *word, imm)
		copy(send.Buf[:kilobyte-1], *word)
	} else {
		fmt.Printf("Sending immediate data '%d'\n", imm)
	}
	if err := conn.SendWithImm(sendMR, 0, length, rpma.CompletionAlways, imm, 0); err != nil {
		return err
	}
	cq := conn.CQ()
	if err := cq.Wait(ctx); err != nil {
		return err
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := cq.GetWC(wc); err != nil {
		return err
	}
	if wc[0].Status != uverbs.WCSuccess {
		fmt.Fprintf(os.Stderr, "Received unexpected completion: %v\n", wc[0].Status)
		return rpma.CompletionErr(&wc[0])
	}
	if wc[0].Opcode != uverbs.WCSend {
		fmt.Fprintf(os.Stderr, "Received unexpected type of operation (%d != %d)\n", wc[0].Opcode, uverbs.WCSend)
		return common.ErrUnexpected
	}
	return nil
}
