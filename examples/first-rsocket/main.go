// Command first-rsocket is a first rsocket program (docs/getting-started.md):
// a net.Listener and a net.Conn over RDMA, wire-compatible with
// librdmacm's rsockets. The server echoes what it reads; the client
// writes a line, reads it back and closes. Both run in this process,
// and nothing in them but the two rsocket calls knows about RDMA. In
// the test VM:
//
//	go build -o bin/ ./examples/first-rsocket && bin/rxevm -- bin/first-rsocket
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/purerdma/rdma/rsocket"
)

func main() {
	server := flag.String("server", "198.18.0.1:7471", "the server's address (of an RDMA device) and port")
	client := flag.String("client", "198.18.0.2", "the client's source address")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, *server, *client); err != nil {
		fmt.Fprintln(os.Stderr, "first-rsocket:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, server, client string) error {
	ln, err := rsocket.Listen(ctx, "tcp", server) // was net.Listen("tcp", server)
	if err != nil {
		return err
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- echo(ln) }()

	d := rsocket.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}} // was net.Dialer
	c, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // deadlines work as on any net.Conn
	if _, err := io.WriteString(c, "hello over RDMA\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s -> %s echoed %q\n", c.LocalAddr(), c.RemoteAddr(), line)
	if err := c.Close(); err != nil {
		return err
	}
	return <-served
}

// echo serves one connection: it copies what it reads back until the
// client closes (io.EOF).
func echo(ln net.Listener) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.Copy(c, c); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
