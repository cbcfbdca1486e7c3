// Command client is librpma's 06scch-multiple-connections client in
// Go, the same as 06-multiple-connections' (the shared completion
// channel is the server's business): it
// picks a name by the seed, as C's rand does, exposes it for the server
// to read and waits for the server to disconnect.
//
//	client <server_address> <port> <seed>
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

// maxNameSize is the room for a name with its terminating zero
// (MAX_NAME_SIZE).
const maxNameSize = 32

var names = []string{"Andy", "Chet", "Derek", "Janek", "Kacper", "Lukasz", "Oksana", "Pawel", "Piotr", "Tomasz",
	"Xiang", "Xiaoran", "Xiaoyan"}

func main() {
	if len(os.Args) < 4 {
		common.Usage("usage: %s <server_address> <port> <seed>\n", os.Args[0])
	}
	common.SetVerboseLogging()
	seed, overflow := common.Strtoul(os.Args[3])
	if overflow {
		fmt.Fprintf(os.Stderr, "strtoul(seed) overflowed\n")
		os.Exit(255)
	}
	common.Exit(run(os.Args[1], os.Args[2], seed))
}

func run(addr, port string, seed uint64) error {
	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer peer.Close()
	mem, err := common.DRAM(maxNameSize)
	if err != nil {
		return err
	}
	defer mem.Close()

	// Pick a name: srand(seed % UINT_MAX), rand() % the number of names.
	r := common.NewCRand(uint32(seed % math.MaxUint32))
	name := names[int(r.Rand())%len(names)]
	copy(mem.Buf[:maxNameSize-1], name)
	fmt.Printf("My names is: %s\n", common.CString(mem.Buf))

	mr, err := peer.RegMR(mem.Buf, rpma.UsageReadSrc)
	if err != nil {
		return err
	}
	defer mr.Close()
	data, err := common.NewData(0, mr, nil)
	if err != nil {
		return err
	}
	conn, err := common.ClientConnect(ctx, peer.Peer, addr, port, nil, data.Encode())
	if err != nil {
		return err
	}
	// The server reads the name, then disconnects.
	return common.WaitForConnCloseAndDisconnect(ctx, conn)
}
