// Command client is librpma's 11-write-with-imm client in Go: it
// writes imm to the server's memory with imm as the immediate data.
//
//	client <server_address> <port> <imm>
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
		common.Usage("usage: %s <server_address> <port> <imm>\n", os.Args[0])
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
	common.Exit(run(os.Args[1], os.Args[2], uint32(imm)))
}

func run(addr, port string, imm uint32) error {
	ctx, cancel := common.Context()
	defer cancel()
	src, err := common.DRAM(kilobyte)
	if err != nil {
		return err
	}
	defer src.Close()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	srcMR, err := peer.RegMR(src.Buf, rpma.UsageWriteSrc)
	if err != nil {
		return err
	}
	defer srcMR.Close()
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, nil)
	if err != nil {
		return err
	}
	err = writeWithImm(ctx, conn, src.Buf, srcMR, imm)
	// C ignores the failures of closing.
	common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

func writeWithImm(ctx context.Context, conn *rpma.Conn, src []byte, srcMR *rpma.MR, imm uint32) error {
	// The server's memory, from the private data.
	pdata := conn.PrivateData()
	if len(pdata) < common.DataSize {
		fmt.Fprintf(os.Stderr, "Received connection's private data is too small (%d < %d)\n", len(pdata), common.DataSize)
		return common.ErrUnexpected
	}
	data, err := common.DecodeData(pdata)
	if err != nil {
		return err
	}
	dst, err := data.RemoteMR()
	if err != nil {
		return err
	}

	binary.NativeEndian.PutUint32(src, imm)
	fmt.Printf("Writing value '%d' with immediate data '%d'\n", binary.NativeEndian.Uint32(src), imm)
	if err := conn.WriteWithImm(dst, int(data.DataOffset), srcMR, 0, kilobyte, rpma.CompletionAlways, imm, 0); err != nil {
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
	if wc[0].Opcode != uverbs.WCRDMAWrite {
		fmt.Fprintf(os.Stderr, "Received unexpected type of operation (%d != %d)\n", wc[0].Opcode, uverbs.WCRDMAWrite)
		return common.ErrUnexpected
	}
	return nil
}
