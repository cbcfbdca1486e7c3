package rpma_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// newExamplePeer is a peer on the device of the test VM's rxe0
// address, for a side (rpma.Local: the side that listens there), and
// the function that closes it and then its device.
func newExamplePeer(ctx context.Context, side rpma.Side) (*rpma.Peer, func()) {
	dev, err := rpma.DeviceContext(ctx, "198.18.0.1", side)
	if err != nil {
		log.Fatal(err)
	}
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		log.Fatal(err)
	}
	return peer, func() {
		if err := peer.Close(); err != nil {
			log.Fatal(err)
		}
		dev.Close()
	}
}

// receiver accepts one connection on ep with a receive posted per
// message and waits for the messages with WaitWC.
func receiver(ctx context.Context, peer *rpma.Peer, ep *rpma.Ep, msgs int) {
	mr, err := peer.RegMR(make([]byte, 64*msgs), rpma.UsageRecv)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	req, err := ep.NextConnReq(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range msgs { // before Connect, so that no message finds no receive
		if err := req.Recv(mr, 64*i, 64, uint64(i)); err != nil {
			log.Fatal(err)
		}
	}
	conn, err := req.Connect(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	wc := make([]uverbs.WorkCompletion, msgs)
	for got := 0; got < msgs; {
		n, err := conn.CQ().WaitWC(ctx, wc) // 1 to msgs completions, waiting while there are none
		if err != nil {
			log.Fatal(err) // with ctx ended: matches rpma.ErrNoCompletion and ctx.Err()
		}
		for _, c := range wc[:n] {
			if err := rpma.CompletionErr(&c); err != nil {
				log.Fatal(err)
			}
			off := 64 * int(c.WRID)
			fmt.Printf("received %q\n", mr.Bytes()[off:off+int(c.ByteLen)])
		}
		got += n
	}
	for { // ESTABLISHED came first
		ev, err := conn.NextEvent(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if ev == rpma.ConnClosed {
			break
		}
	}
	conn.Disconnect()
}

// Waiting for completions without writing the loop of Wait and GetWC:
// WaitWC takes what the CQ has, or waits for its completion event and
// takes them then. Both ends are in this program, on the test VM's
// rxe0 address.
func ExampleCQ_WaitWC() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const msgs = 3
	server, closeServer := newExamplePeer(ctx, rpma.Local)
	defer closeServer()
	client, closeClient := newExamplePeer(ctx, rpma.Remote)
	defer closeClient()
	ep, err := server.Listen(ctx, "198.18.0.1", "7476")
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		receiver(ctx, server, ep, msgs)
	}()

	src, err := client.RegMR([]byte("hello"), rpma.UsageSend)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	req, err := client.NewConnReq(ctx, "198.18.0.1", "7476", nil)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if ev, err := conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		log.Fatal(ev, err)
	}
	wc := make([]uverbs.WorkCompletion, 1)
	for i := range msgs {
		if err := conn.Send(src, 0, 1+i, rpma.CompletionAlways, uint64(i)); err != nil {
			log.Fatal(err)
		}
		if _, err := conn.CQ().WaitWC(ctx, wc); err != nil {
			log.Fatal(err)
		}
	}
	conn.Disconnect()
	<-done
}
