// Command server is librpma's 13-messages-ping-pong-with-srq server in
// Go: it accepts up to 10 clients until none has asked for timeout
// seconds, then plays ping-pong with all of them at once, their
// messages arriving through one shared receive queue, until every
// client says it is done.
//
//	server <server_address> <port> [<timeout>]
//
// timeout is in seconds, 5 by default.
//
// One fix against the C original: each reply is sent from the client's
// own slot of the send buffer instead of the slot its message was
// received into (see handle).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/rpma/examples/internal/common"
	"github.com/purerdma/rdma/uverbs"
)

const (
	clientMax      = 10
	defaultTimeout = 5 * time.Second
)

// client is a connected client (struct connect_context).
type client struct {
	conn  *rpma.Conn
	qpNum uint32
}

// server is the state C keeps in globals and main's locals.
type server struct {
	clients    [clientMax]client
	numClients int
	srq        *rpma.SRQ
	recvMR     *rpma.MR
	sendMR     *rpma.MR
	recv, send []byte
}

func main() {
	if len(os.Args) < 3 {
		common.Usage("usage: %s <server_address> <port> [<timeout>]\n", os.Args[0])
	}
	common.SetVerboseLogging()
	timeout := defaultTimeout
	if len(os.Args) > 3 {
		secs := common.Atoi(os.Args[3])
		if secs <= 0 {
			fmt.Fprintf(os.Stderr, "<timeout> should be a positive number of seconds (%s given)\n", os.Args[3])
			os.Exit(255)
		}
		timeout = time.Duration(secs) * time.Second
	}
	common.ExitMinus1(run(os.Args[1], os.Args[2], timeout))
}

func run(addr, port string, timeout time.Duration) (err error) {
	ctx, cancel := common.Context()
	defer cancel()
	const size = clientMax * common.MsgSize
	recv, err := common.DRAM(size)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, recv)
	send, err := common.DRAM(size)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, send)

	peer, err := common.PeerViaAddress(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, peer)
	srq, err := peer.NewSRQ(nil)
	if err != nil {
		return err
	}
	defer common.CloseJoin(&err, srq)
	cfg := rpma.NewConnCfg()
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

	s := &server{srq: srq, recvMR: recvMR, sendMR: sendMR, recv: recv.Buf, send: send.Buf}
	err = s.serve(ctx, ep, cfg, timeout)
	// Disconnect every client left, without waiting, as C does.
	for _, c := range s.clients {
		if c.conn != nil {
			c.conn.Disconnect()
			c.conn.Close()
		}
	}
	return err
}

func (s *server) serve(ctx context.Context, ep *rpma.Ep, cfg *rpma.ConnCfg, timeout time.Duration) error {
	// Accept clients until none asks within the timeout (C waits on
	// the endpoint's fd with epoll_wait and this timeout).
	for {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		req, err := ep.NextConnReq(wctx, cfg)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return err
		}
		if err := s.accept(ctx, req); err != nil {
			return err
		}
		s.numClients++
		fmt.Printf("The client #%d has been connected.\n", s.numClients)
	}
	fmt.Printf("Server ended listening.\n")
	if err := s.pingPong(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "Unable to receive data from all connections\n")
		return err
	}
	return nil
}

// pingPong answers the clients' messages until each said goodbye.
func (s *server) pingPong(ctx context.Context) error {
	rcq := s.srq.RCQ()
	wc := make([]uverbs.WorkCompletion, clientMax)
	for total := 0; total < s.numClients; {
		if err := rcq.Wait(ctx); err != nil {
			return err
		}
		n, err := rcq.GetWC(wc[:s.numClients])
		if errors.Is(err, rpma.ErrNoCompletion) {
			continue
		}
		if err != nil {
			return err
		}
		for i := range wc[:n] {
			done, err := s.handle(&wc[i])
			if err != nil {
				return err
			}
			if done {
				total++
			}
		}
	}
	return nil
}

// accept takes a connection request into the first free slot, with a
// receive for its first message in that slot's buffer
// (handle_incoming_connections).
func (s *server) accept(ctx context.Context, req *rpma.ConnReq) error {
	i := 0
	for i < clientMax && s.clients[i].conn != nil {
		i++
	}
	if i == clientMax {
		req.Close()
		fmt.Fprintf(os.Stderr, "No free slot for a new connection request.\n")
		return common.ErrUnexpected
	}
	off := i * common.MsgSize
	if err := s.srq.Recv(s.recvMR, off, common.MsgSize, common.OpContext(s.recvMR, off)); err != nil {
		req.Close()
		return err
	}
	conn, err := req.Connect(nil)
	if err != nil {
		return err
	}
	ev, err := conn.NextEvent(ctx)
	if err == nil && ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
		err = common.ErrUnexpected
	}
	if err != nil {
		conn.Close()
		return err
	}
	s.clients[i] = client{conn: conn, qpNum: conn.QPNum()}
	return nil
}

// findQP is the index of the client with qpNum (find_qp).
func (s *server) findQP(qpNum uint32) int {
	if s.numClients == 1 {
		return 0
	}
	for i := range s.numClients {
		if s.clients[i].qpNum == qpNum {
			return i
		}
	}
	fmt.Fprintf(os.Stderr, "Unable to find the connection [qp#%d]\n", qpNum)
	return -1
}

// handle answers one received message; done says it was a client's
// goodbye.
func (s *server) handle(wc *uverbs.WorkCompletion) (done bool, err error) {
	if err := rpma.CompletionErr(wc); err != nil {
		fmt.Fprintf(os.Stderr, "rpma_srq_recv() failed: %v\n", wc.Status)
		return false, err
	}
	if wc.Opcode != uverbs.WCRecv {
		fmt.Fprintf(os.Stderr, "received unexpected wc.opcode value (%d != %d)\n", wc.Opcode, uverbs.WCRecv)
		return false, common.ErrUnexpected
	}
	index := s.findQP(wc.QPNum)
	if index < 0 {
		return false, common.ErrUnexpected
	}
	// The op context is the address of the buffer the message filled.
	base := common.OpContext(s.recvMR, 0)
	if wc.WRID < base || wc.WRID-base >= uint64(len(s.recv)) || (wc.WRID-base)%common.MsgSize != 0 {
		fmt.Fprintf(os.Stderr, "received completion of an unknown buffer (0x%X)\n", wc.WRID)
		return false, common.ErrUnexpected
	}
	off := int(wc.WRID - base)
	v := common.Uint64(s.recv[off:])
	if v == common.IMDone {
		return true, nil
	}
	qpNum := s.clients[index].qpNum
	fmt.Printf("[server] value received: %d from the connection [qp#%d]\n", v, qpNum)
	// A receive for the client's next message, in the same buffer.
	if err := s.srq.Recv(s.recvMR, off, common.MsgSize, wc.WRID); err != nil {
		return false, err
	}
	// The reply goes out of the client's own slot of the send buffer,
	// not the slot of the receive buffer the message landed in, as
	// librpma's C does: with a shared receive queue another client's
	// message can land in that slot and overwrite the reply before the
	// unsignaled send has read it (seen on 6.12: a client got another
	// client's value). A client sends again only after this reply
	// arrived, so its own slot is free by then. The wire is unchanged.
	sendOff := index * common.MsgSize
	common.PutUint64(s.send[sendOff:], v+1)
	fmt.Printf("[server] value sent: %d from the connection [qp#%d]\n", v+1, qpNum)
	return false, s.clients[index].conn.Send(s.sendMR, sendOff, common.MsgSize, rpma.CompletionOnError, 0)
}
