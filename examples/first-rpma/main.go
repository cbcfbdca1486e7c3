// Command first-rpma is a first rpma program (docs/getting-started.md),
// librpma's API in Go: a server offers a piece of its memory, a client
// writes into it, flushes (the data is then visible, or persistent on
// persistent memory) and reads it back, all with one-sided RDMA: the
// server's CPU takes no part. Both run in this process. In the test VM:
//
//	go build -o bin/ ./examples/first-rpma && bin/rxevm -- bin/first-rpma
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	addr := flag.String("server", "198.18.0.1", "the server's address (an address of an RDMA device)")
	port := flag.String("port", "7474", "the port")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, *addr, *port); err != nil {
		fmt.Fprintln(os.Stderr, "first-rpma:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, addr, port string) error {
	ready := make(chan error, 1)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, out, addr, port, ready) }()
	if err := <-ready; err != nil {
		return err
	}
	return errors.Join(client(ctx, out, addr, port), <-served)
}

// serve is the server: a peer on the device of addr, a region the client
// may write, read and flush, its descriptor sent as the connection's
// private data; it waits until the client disconnects.
func serve(ctx context.Context, out io.Writer, addr, port string, ready chan<- error) (err error) {
	defer func() {
		if err != nil {
			ready <- err // not sent yet if this failed before Listen
		}
	}()
	dev, err := rpma.DeviceContext(ctx, addr, rpma.Local)
	if err != nil {
		return err
	}
	defer dev.Close()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		return err
	}
	defer peer.Close()
	mem := make([]byte, 4096)
	mr, err := peer.RegMR(mem, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	if err != nil {
		return err
	}
	defer mr.Close()
	pcfg := rpma.NewPeerCfg()
	pcfg.SetNativeFlush(mr.NativeFlush()) // a purerdma client flushes natively where the kernel can

	ep, err := peer.Listen(ctx, addr, port)
	if err != nil {
		return err
	}
	defer ep.Close()
	ready <- nil
	req, err := ep.NextConnReq(ctx, nil)
	if err != nil {
		return err
	}
	conn, err := req.Connect(append(mr.Descriptor(), pcfg.Descriptor()...))
	if err != nil {
		return err
	}
	defer conn.Close()
	for { // connection events, until the client closes
		ev, err := conn.NextEvent(ctx)
		if err != nil {
			return err
		}
		if ev == rpma.ConnClosed {
			break
		}
	}
	if err := conn.Disconnect(); err != nil {
		return err
	}
	fmt.Fprintf(out, "server: my memory holds %q\n", mem[:11])
	return nil
}

// client connects, learns the server's region from the private data,
// writes, flushes and reads back.
func client(ctx context.Context, out io.Writer, addr, port string) error {
	dev, err := rpma.DeviceContext(ctx, addr, rpma.Remote)
	if err != nil {
		return err
	}
	defer dev.Close()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		return err
	}
	defer peer.Close()
	local := make([]byte, 64)
	copy(local, "hello, rpma")
	lmr, err := peer.RegMR(local, rpma.UsageWriteSrc|rpma.UsageReadDst)
	if err != nil {
		return err
	}
	defer lmr.Close()

	req, err := peer.NewConnReq(ctx, addr, port, nil)
	if err != nil {
		return err
	}
	defer req.Close() // does nothing once Connect used it
	conn, err := req.Connect(nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	if ev, err := conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		return fmt.Errorf("connect: %v, %v", ev, err)
	}
	pd := conn.PrivateData()
	dst, err := rpma.RemoteMRFromDescriptor(pd)
	if err != nil {
		return err
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(pd[rpma.MRDescriptorSize:])
	if err != nil {
		return err
	}
	conn.ApplyRemotePeerCfg(pcfg)

	// Write 11 bytes at the region's start, flush them, then read them
	// back into local[32:]. Completions are asked for where they are
	// waited for; a failed operation completes anyway (CompletionOnError).
	wc := make([]uverbs.WorkCompletion, 1)
	wait := func() error {
		if _, err := conn.CQ().WaitWC(ctx, wc); err != nil {
			return err
		}
		return rpma.CompletionErr(&wc[0]) // names the status; errors.Is matches it
	}
	if err := conn.Write(dst, 0, lmr, 0, 11, rpma.CompletionOnError, 1); err != nil {
		return err
	}
	if err := conn.Flush(dst, 0, 11, rpma.FlushVisibility, rpma.CompletionAlways, 2); err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	if err := conn.Read(lmr, 32, dst, 0, 11, rpma.CompletionAlways, 3); err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	fmt.Fprintf(out, "client: wrote, flushed and read back %q\n", local[32:43])
	if err := conn.Disconnect(); err != nil {
		return err
	}
	_, err = conn.NextEvent(ctx) // ConnClosed
	return err
}
