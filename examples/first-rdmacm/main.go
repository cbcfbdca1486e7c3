// Command first-rdmacm is a first rdma_cm program (docs/getting-started.md):
// a server and a client, each an rdma_cm endpoint with its own queue
// pair, connected through the connection manager; the client sends a
// message, the server answers, the client disconnects. Both run in
// this process, the server on one address and the client from another.
// In the test VM:
//
//	go build -o bin/ ./examples/first-rdmacm && bin/rxevm -- bin/first-rdmacm
//
// This is librdmacm's rdma_server.c and rdma_client.c (rdma_getaddrinfo,
// rdma_create_ep, rdma_reg_msgs, rdma_post_recv, rdma_connect,
// rdma_get_recv_comp) in Go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	server := flag.String("server", "198.18.0.1", "the server's address (an address of an RDMA device)")
	client := flag.String("client", "198.18.0.2", "the client's source address")
	port := flag.String("port", "7471", "the port")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, *server, *client, *port); err != nil {
		fmt.Fprintln(os.Stderr, "first-rdmacm:", err)
		os.Exit(1)
	}
}

// qpOpts asks each endpoint for an RC queue pair of its own.
var qpOpts = &rdmacm.QPOptions{Config: uverbs.QPConfig{
	Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1},
}}

func run(ctx context.Context, out io.Writer, server, client, port string) error {
	// The server: a passive endpoint, listening.
	pai, err := rdmacm.GetAddrInfo(ctx, server, port, &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		return err
	}
	l, err := rdmacm.CreateEP(ctx, &pai[0], qpOpts)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Listen(0); err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- serve(ctx, out, l) }()

	// The client: an active endpoint from the client's address.
	src, err := netip.ParseAddr(client)
	if err != nil {
		return err
	}
	ai, err := rdmacm.GetAddrInfo(ctx, server, port, &rdmacm.AddrInfoHints{Src: netip.AddrPortFrom(src, 0)})
	if err != nil {
		return err
	}
	id, err := rdmacm.CreateEP(ctx, &ai[0], qpOpts)
	if err != nil {
		return err
	}
	defer id.Close()
	buf := make([]byte, 64)
	mr, err := id.RegMsgs(buf) // registered on the endpoint's protection domain
	if err != nil {
		return err
	}
	defer mr.Close() // before id.Close: deferred calls run last first
	// The answer's receive goes first: a message that finds none posted
	// waits for one.
	if err := id.PostRecv(1, mr, 32, 32); err != nil {
		return err
	}
	if _, err := id.ConnectContext(ctx, nil); err != nil {
		return err // a refused connection matches syscall.ECONNREFUSED
	}
	n := copy(buf, "ping")
	if err := id.PostSend(2, mr, 0, n, uverbs.SendSignaled); err != nil {
		return err
	}
	if _, err := id.GetSendComp(ctx); err != nil {
		return err
	}
	wc, err := id.GetRecvComp(ctx)
	if err != nil {
		return err // ErrDisconnected if the server went away
	}
	fmt.Fprintf(out, "client: the server answered %q\n", buf[32:32+wc.ByteLen])
	if err := id.DisconnectContext(ctx); err != nil {
		return err
	}
	return <-served
}

// serve takes one connection on l: it receives a message and answers it.
func serve(ctx context.Context, out io.Writer, l *rdmacm.ID) error {
	req, err := l.GetRequest(ctx)
	if err != nil {
		return err
	}
	s := req.ID // a new endpoint with its own QP, like l's
	defer s.Close()
	buf := make([]byte, 64)
	mr, err := s.RegMsgs(buf)
	if err != nil {
		return err
	}
	defer mr.Close()
	if err := s.PostRecv(1, mr, 0, 32); err != nil {
		return err
	}
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		return err
	}
	wc, err := s.GetRecvComp(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "server: received %q\n", buf[:wc.ByteLen])
	n := copy(buf[32:], "pong")
	if err := s.PostSend(2, mr, 32, n, uverbs.SendSignaled); err != nil {
		return err
	}
	if _, err := s.GetSendComp(ctx); err != nil {
		return err
	}
	// The client disconnects; this side sees it as the end of the
	// connection.
	if _, err := s.GetRecvComp(ctx); !errors.Is(err, rdmacm.ErrDisconnected) {
		return fmt.Errorf("server: waiting for the client's disconnect: %v", err)
	}
	return s.Disconnect()
}
