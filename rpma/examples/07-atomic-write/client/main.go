// Command client is librpma's 07-atomic-write client in Go: it appends
// words to the server's remote log. It reads where the log ends, and
// for each word writes it there and flushes it, then moves the end
// with an atomic write and flushes that, waiting for the last flush
// before the next word. It takes unilaterally that the server writes to
// PMem directly.
//
//	client <server_address> <port> <word1> [<word2>] [..]
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

const (
	flushID       = 0xF01D              // the last flush's op context (FLUSH_ID)
	maxWordLength = common.Kilobyte - 1 // MAX_WORD_LENGTH
)

func main() {
	if len(os.Args) < 4 {
		common.Usage("usage: %s <server_address> <port> <word1> [<word2>] [..]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	// C's main returns -2 for any failure.
	common.ExitStatus(run(os.Args[1], os.Args[2], os.Args[3:]), -2)
}

func run(addr, port string, words []string) error {
	mem, err := common.DRAM(common.Kilobyte)
	if err != nil {
		return err
	}
	defer mem.Close()

	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, nil)
	if err != nil {
		return err
	}
	err = appendWords(ctx, peer.Peer, conn, mem, words)
	// As in C, how the close goes does not change the exit status.
	_ = common.DisconnectAndWaitForConnClose(ctx, conn)
	return err
}

func appendWords(ctx context.Context, peer *rpma.Peer, conn *rpma.Conn, mem *common.Mem, words []string) error {
	// Persistent flush support, assumed unilaterally.
	pcfg := rpma.NewPeerCfg()
	pcfg.SetDirectWriteToPMem(true)
	if err := conn.ApplyRemotePeerCfg(pcfg); err != nil {
		return err
	}
	local, err := peer.RegMR(mem.Buf, rpma.UsageWriteSrc|rpma.UsageReadDst)
	if err != nil {
		return err
	}
	defer local.Close()
	data, err := common.DecodeData(conn.PrivateData())
	if err != nil {
		return err
	}
	usedOffset := int(data.DataOffset)
	remote, err := data.RemoteMR()
	if err != nil {
		return err
	}

	// Where the log ends.
	if err := conn.Read(local, 0, remote, usedOffset, 8, rpma.CompletionAlways, 0); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	if err := common.WaitForWC(ctx, conn.CQ(), &wc); err != nil {
		return err
	}
	if wc.Status != uverbs.WCSuccess {
		fmt.Fprintf(os.Stderr, "rpma_read() failed: %v\n", wc.Status)
		return rpma.CompletionErr(&wc)
	}
	used := binary.LittleEndian.Uint64(mem.Buf)
	fmt.Printf("used value: %d\n", used)
	if remote.Size() <= used {
		fmt.Fprintf(os.Stderr, "Log size exhausted.\n")
		return common.ErrUnexpected
	}

	flushType := rpma.FlushVisibility
	if remote.FlushType()&rpma.UsageFlushPersistent != 0 {
		flushType = rpma.FlushPersistent
	}
	for _, w := range words {
		// The word, cut to fit, and its terminating zero.
		n := copy(mem.Buf[:maxWordLength], w)
		clear(mem.Buf[n:])
		size := n + 1
		if err := conn.Write(remote, int(used), local, 0, size, rpma.CompletionOnError, 0); err != nil {
			return err
		}
		if err := conn.Flush(remote, int(used), size, flushType, rpma.CompletionOnError, 0); err != nil {
			return err
		}
		used += uint64(size)
		var u [8]byte
		binary.LittleEndian.PutUint64(u[:], used)
		if err := conn.AtomicWrite(remote, usedOffset, u, rpma.CompletionOnError, 0); err != nil {
			return err
		}
		if err := conn.Flush(remote, usedOffset, 8, flushType, rpma.CompletionAlways, flushID); err != nil {
			return err
		}
		if err := common.WaitForWC(ctx, conn.CQ(), &wc); err != nil {
			return err
		}
		if wc.WRID != flushID {
			fmt.Fprintf(os.Stderr, "unexpected wc.wr_id value (0x%X != 0x%X)\n", wc.WRID, flushID)
			return common.ErrUnexpected
		}
		if wc.Status != uverbs.WCSuccess {
			fmt.Fprintf(os.Stderr, "rpma_flush() failed: %v\n", wc.Status)
			return rpma.CompletionErr(&wc)
		}
	}
	return nil
}
