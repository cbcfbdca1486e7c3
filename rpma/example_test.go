package rpma_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// A server: a peer on the device of its address, a region the client
// may write, read and flush, its descriptor as private data, one
// connection, served until the client disconnects. In the test VM it
// listens on rxe0's address; ExamplePeer_NewConnReq is its client.
func ExamplePeer_Listen() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := rpma.DeviceContext(ctx, "198.18.0.1", rpma.Local)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer peer.Close()

	mem := make([]byte, 4096)
	mr, err := peer.RegMR(mem, rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageFlushVisibility)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	pcfg := rpma.NewPeerCfg()
	pcfg.SetNativeFlush(mr.NativeFlush()) // lets a purerdma client flush natively where it can

	ep, err := peer.Listen(ctx, "198.18.0.1", "7474")
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	req, err := ep.NextConnReq(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := req.Connect(append(mr.Descriptor(), pcfg.Descriptor()...))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for {
		ev, err := conn.NextEvent(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if ev == rpma.ConnClosed {
			break
		}
	}
	conn.Disconnect()
	fmt.Printf("the client wrote %q\n", mem[:5])
}

// A client: connect, decode the server's region from the private data,
// write to it, flush, and wait for the flush's completion.
func ExamplePeer_NewConnReq() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := rpma.DeviceContext(ctx, "198.18.0.1", rpma.Remote)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	peer, err := rpma.NewPeer(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer peer.Close()
	src, err := peer.RegMR([]byte("hello"), rpma.UsageWriteSrc)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()

	req, err := peer.NewConnReq(ctx, "198.18.0.1", "7474", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer req.Close() // does nothing once Connect used it
	conn, err := req.Connect(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if ev, err := conn.NextEvent(ctx); err != nil || ev != rpma.ConnEstablished {
		log.Fatal(ev, err)
	}
	pd := conn.PrivateData()
	dst, err := rpma.RemoteMRFromDescriptor(pd)
	if err != nil {
		log.Fatal(err)
	}
	pcfg, err := rpma.PeerCfgFromDescriptor(pd[rpma.MRDescriptorSize:])
	if err != nil {
		log.Fatal(err)
	}
	conn.ApplyRemotePeerCfg(pcfg)

	if err := conn.Write(dst, 0, src, 0, 5, rpma.CompletionOnError, 1); err != nil {
		log.Fatal(err)
	}
	if err := conn.Flush(dst, 0, 5, rpma.FlushVisibility, rpma.CompletionAlways, 2); err != nil {
		log.Fatal(err)
	}
	wc := make([]uverbs.WorkCompletion, 1)
	if _, err := conn.CQ().WaitWC(ctx, wc); err != nil { // GetWC, and Wait while there is nothing
		log.Fatal(err)
	}
	if err := rpma.CompletionErr(&wc[0]); err != nil {
		log.Fatal(err) // names the status, matches it with errors.Is
	}
	conn.Disconnect()
	conn.NextEvent(ctx) // ConnClosed
	fmt.Println("written and flushed")
}
