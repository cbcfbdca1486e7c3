// Command server is librpma's 06-multiple-connections server in Go: it
// takes connections from many clients, up to ten at a time, reads each
// client's name from its memory into the client's slot of one local
// region, prints it and disconnects the client. It ends when nothing
// happened for 15 seconds.
//
//	server <server_address> <port>
//
// C waits for the endpoint's, every connection's and every CQ's events
// in one epoll loop. Here the main goroutine takes incoming requests
// and gives each a free slot (or rejects it), and each connection has a
// goroutine of its own, which owns it (an rpma.Conn belongs to one
// goroutine at a time) and waits for its events and its completion in
// turn. Every event restarts the 15 s, as every epoll_wait does in C.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const (
	clientMax   = 10               // CLIENT_MAX
	maxNameSize = 32               // MAX_NAME_SIZE
	idleTimeout = 15 * time.Second // TIMEOUT_15S
)

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port>\n", os.Args[0])
	}
	common.SetVerboseLogging()
	common.Exit(run(os.Args[1], os.Args[2]))
}

// server is what the connections share: the region the names are read
// into, a slot of maxNameSize bytes per client.
type server struct {
	dst      *common.Mem
	dstMR    *rpma.MR
	activity chan struct{} // a connection had an event
	done     chan int      // a connection's slot is free again
	out      sync.Mutex    // one line at a time on standard output
}

func run(addr, port string) error {
	ctx, cancel := common.Context()
	defer cancel()
	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	s := &server{activity: make(chan struct{}), done: make(chan int)}
	if s.dst, err = common.DRAM(maxNameSize * clientMax); err != nil {
		return errors.Join(err, peer.Close())
	}
	if s.dstMR, err = peer.RegMR(s.dst.Buf, rpma.UsageReadDst); err != nil {
		return errors.Join(err, s.dst.Close(), peer.Close())
	}
	ep, err := peer.Listen(ctx, addr, port)
	if err == nil {
		fmt.Printf("Today I have got in touch with:\n")
		s.serve(ctx, ep)
		err = ep.Close()
	}
	// As C: the first failure of the teardown is the status.
	for _, cerr := range []error{s.dstMR.Close(), s.dst.Close(), peer.Close()} {
		if err == nil {
			err = cerr
		}
	}
	return err
}

// serve takes connections until nothing happened for idleTimeout, then
// disconnects and deletes the connections that are left.
func (s *server) serve(ctx context.Context, ep *rpma.Ep) {
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	reqs := make(chan *rpma.ConnReq)
	wg.Go(func() { s.accept(ctx, ep, reqs) })
	var used [clientMax]bool
	timer := time.NewTimer(idleTimeout)
	defer timer.Stop()
	for timedOut := false; !timedOut; {
		select {
		case req := <-reqs:
			s.incoming(ctx, &wg, req, &used)
		case id := <-s.done:
			used[id] = false
		case <-s.activity:
		case <-timer.C:
			timedOut = true
		}
		timer.Reset(idleTimeout)
	}
	// Every connection's goroutine disconnects and deletes it.
	stop()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "Server timed out.\n")
}

// accept hands the incoming requests to serve.
func (s *server) accept(ctx context.Context, ep *rpma.Ep, reqs chan<- *rpma.ConnReq) {
	for {
		req, err := ep.NextConnReq(ctx, nil)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, uverbs.ErrClosed) {
				return
			}
			// A request that could not be prepared was rejected.
			fmt.Fprintf(os.Stderr, "%v\n", err)
			s.notify(ctx)
			continue
		}
		select {
		case reqs <- req:
		case <-ctx.Done():
			req.Close()
			return
		}
	}
}

// incoming accepts a request into the first free slot, or rejects it
// when there is none.
func (s *server) incoming(ctx context.Context, wg *sync.WaitGroup, req *rpma.ConnReq, used *[clientMax]bool) {
	id := -1
	for i, u := range used {
		if !u {
			id = i
			break
		}
	}
	if id < 0 {
		req.Close()
		return
	}
	conn, err := req.Connect(nil)
	if err != nil {
		// The slot stays free for the next client.
		return
	}
	used[id] = true
	wg.Go(func() { s.client(ctx, id, conn) })
}

// notify restarts the idle timeout.
func (s *server) notify(ctx context.Context) {
	select {
	case s.activity <- struct{}{}:
	case <-ctx.Done():
	}
}

// client handles one connection's events until it is closed: when it is
// established, the client's name is read and printed, and the client
// disconnected.
func (s *server) client(ctx context.Context, id int, conn *rpma.Conn) {
	defer func() {
		conn.Close()
		select {
		case s.done <- id:
		case <-ctx.Done():
		}
	}()
	for {
		ev, err := conn.NextEvent(ctx)
		if ctx.Err() != nil {
			// The server timed out.
			conn.Disconnect()
			return
		}
		s.notify(ctx)
		switch {
		case err != nil:
			conn.Disconnect()
			if !errors.Is(err, rpma.ErrUnknown) {
				// The event channel failed: no close will come.
				return
			}
		case ev == rpma.ConnEstablished:
			s.fetchName(ctx, id, conn)
			conn.Disconnect()
		default:
			// Closed, or lost: delete the connection.
			return
		}
	}
}

// fetchName reads the client's name, which the descriptor in its
// private data describes, into its slot and prints it.
func (s *server) fetchName(ctx context.Context, id int, conn *rpma.Conn) {
	pd := conn.PrivateData()
	if len(pd) < common.DataSize {
		fmt.Fprintf(os.Stderr, "[%d] received connection's private data is too small (%d < %d)\n", id, len(pd), common.DataSize)
		return
	}
	data, err := common.DecodeData(pd)
	if err != nil {
		return
	}
	src, err := data.RemoteMR()
	if err != nil {
		return
	}
	offset := id * maxNameSize
	if err := conn.Read(s.dstMR, offset, src, 0, maxNameSize, rpma.CompletionAlways, 0); err != nil {
		return
	}
	var wc uverbs.WorkCompletion
	if err := common.WaitForWC(ctx, conn.CQ(), &wc); err != nil {
		return
	}
	s.notify(ctx)
	if wc.Status != uverbs.WCSuccess {
		fmt.Fprintf(os.Stderr, "[%d] rpma_read() failed: %v\n", id, wc.Status)
		return
	}
	if wc.Opcode != uverbs.WCRDMARead {
		fmt.Fprintf(os.Stderr, "[%d] received unexpected wc.opcode value (%d != %d)\n", id, wc.Opcode, uverbs.WCRDMARead)
		return
	}
	s.out.Lock()
	fmt.Printf("- %s\n", common.CString(s.dst.Buf[offset:offset+maxNameSize]))
	s.out.Unlock()
}
