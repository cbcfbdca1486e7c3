// Command server is librpma's 07-atomic-write server in Go: it keeps a
// log in persistent memory (or DRAM), a signature, the offset of its
// end and its entries, exposes it for the client to append to, and
// prints the entries, one a line, after the client disconnected.
//
//	server <server_address> <port> [<pmem-path>]
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
)

// struct log: a signature, the offset of the log's end (aligned for
// atomic writes; host byte order, little-endian on the platforms Go
// runs rpma on) and the entries.
const (
	logHdrSignature  = "LOG"
	logSignatureSize = 8
	logUsedOffset    = logSignatureSize  // offsetof(struct log, used)
	logDataOffset    = logUsedOffset + 8 // offsetof(struct log, data)
	logDataSize      = 1024              // LOG_DATA_SIZE
	logSize          = logDataOffset + logDataSize
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<pmem-path>]\n"+common.PMemUsage, os.Args[0])
	}
	common.SetVerboseLogging()
	// C's main returns -2 for any failure.
	common.ExitStatus(run(os.Args[1], os.Args[2], os.Args[3:]), -2)
}

// logMem maps the log from PMem, initializing it if its signature is
// missing, or makes an empty one in DRAM.
func logMem(pmem []string) (*common.Mem, error) {
	if len(pmem) == 0 {
		fmt.Fprint(os.Stderr, common.NoPMemMsg)
		mem, err := common.DRAM(logSize)
		if err != nil {
			return nil, err
		}
		binary.LittleEndian.PutUint64(mem.Buf[logUsedOffset:], logDataOffset)
		return mem, nil
	}
	mem, err := common.MapPMemFile(pmem[0], logSize)
	if err != nil {
		return nil, err
	}
	// strncmp(signature, "LOG", 8): the signature up to its zero.
	if common.CString(mem.Buf[:logSignatureSize]) != logHdrSignature {
		used := mem.Buf[logUsedOffset:logDataOffset]
		binary.LittleEndian.PutUint64(used, logDataOffset)
		mem.Persist(used)
		sig := mem.Buf[:logSignatureSize]
		clear(sig[copy(sig, logHdrSignature):])
		mem.Persist(sig)
	}
	return mem, nil
}

func run(addr, port string, pmem []string) error {
	mem, err := logMem(pmem)
	if err != nil {
		return err
	}
	defer mem.Close()

	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer peer.Close()
	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer ep.Close()
	usage := rpma.UsageWriteDst | rpma.UsageReadSrc | rpma.UsageFlushVisibility
	if mem.IsPMem {
		usage = rpma.UsageWriteDst | rpma.UsageReadSrc | rpma.UsageFlushPersistent
	}
	mr, err := peer.RegMR(mem.Buf, usage)
	if err != nil {
		return err
	}
	defer mr.Close()
	if len(pmem) > 0 {
		if err := common.AdviseFsDAX(mem, pmem[0], mr); err != nil {
			return err
		}
	}

	// The client learns where the log's end is kept.
	data, err := common.NewData(logUsedOffset, mr, nil)
	if err != nil {
		return err
	}
	conn, err := common.ServerAcceptConnection(ctx, ep, nil, data.Encode())
	if err != nil {
		return err
	}
	// The client appends between the connection's establishment and
	// its close.
	if err := common.WaitForConnCloseAndDisconnect(ctx, conn); err != nil {
		return err
	}

	// The entries, each ending in a zero, one a line.
	used := binary.LittleEndian.Uint64(mem.Buf[logUsedOffset:])
	tail := min(used, uint64(len(mem.Buf)))
	out := make([]byte, 0, logDataSize)
	for _, c := range mem.Buf[logDataOffset:max(tail, logDataOffset)] {
		if c == 0 {
			c = '\n'
		}
		out = append(out, c)
	}
	os.Stdout.Write(out)
	return nil
}
