package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// A client: resolve the server, create the endpoint and its QP in one
// call, connect with private data, send one message. In the test VM the
// server of ExampleEventChannel_Next listens on 198.18.0.1:7471.
//
//purerdma:race
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ais, err := rdmacm.GetAddrInfo(ctx, "198.18.0.1", "7471", nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := rdmacm.CreateEP(ctx, &ais[0], &rdmacm.QPOptions{Config: uverbs.QPConfig{
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer id.Close()

	buf := make([]byte, 64)
	mr, err := id.RegMsgs(buf) // on the PD of the ID's QP
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close() // before id.Close: deferred calls run last first

	p := rdmacm.DefaultConnParam()
	p.PrivateData = []byte("hello")
	ev, err := id.ConnectContext(ctx, p)
	if err != nil {
		log.Fatal(err) // a reject is an *rdmacm.EventError matching rdmacm.ErrRejected
	}
	dev, _ := id.Device()
	fmt.Printf("connected through %s, the server said %q\n", dev.Name, ev.PrivateData)

	n := copy(buf, "ping")
	if err := id.PostSend(1, mr, 0, n, uverbs.SendSignaled); err != nil {
		log.Fatal(err)
	}
	if _, err := id.GetSendComp(ctx); err != nil {
		log.Fatal(err)
	}
	if err := id.DisconnectContext(ctx); err != nil {
		log.Fatal(err)
	}
}

// A server on a shared channel: every event of the listener and of the
// connections it accepts arrives at one Next loop.
func ExampleEventChannel_Next() {
	ctx := context.Background()
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close() // closes the IDs still on it

	l, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Bind(netip.MustParseAddrPort("198.18.0.1:7471")); err != nil {
		log.Fatal(err)
	}
	if err := l.Listen(0); err != nil {
		log.Fatal(err)
	}
	cfg := uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
	for {
		ev, err := ch.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case rdmacm.EventConnectRequest:
			fmt.Printf("request from ID %d: %q\n", ev.ID.Handle(), ev.PrivateData)
			if _, err := ev.ID.CreateQP(nil, cfg); err != nil {
				ev.ID.Reject([]byte("no QP"))
				ev.ID.Close()
				continue
			}
			// Post receives on ev.ID.QP() here, then:
			if err := ev.ID.Accept(nil); err != nil {
				ev.ID.Close()
			}
		case rdmacm.EventEstablished:
			fmt.Printf("ID %d connected\n", ev.ID.Handle())
		case rdmacm.EventDisconnected:
			ev.ID.Close() // answers the peer's disconnect
		}
	}
}

// Joining a multicast group from a UD endpoint and sending to it.
func ExampleID_JoinMulticastContext() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceUDP)
	if err != nil {
		log.Fatal(err)
	}
	defer id.Close()
	if err := id.Bind(netip.MustParseAddrPort("198.18.0.1:0")); err != nil {
		log.Fatal(err)
	}
	if _, err := id.CreateQP(nil, uverbs.QPConfig{Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		log.Fatal(err)
	}
	group, err := id.JoinMulticastContext(ctx, netip.MustParseAddr("239.1.2.3"), false)
	if err != nil {
		log.Fatal(err)
	}
	ah, err := group.CreateAH(id.PD())
	if err != nil {
		log.Fatal(err)
	}
	defer ah.Close()
	buf := []byte("to everyone")
	mr, err := id.RegMsgs(buf)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	if err := id.PostUDSend(1, mr, 0, len(buf), uverbs.SendSignaled, rdmacm.UDDest{AH: ah, QPNum: group.QPNum}); err != nil {
		log.Fatal(err)
	}
	if _, err := id.GetSendComp(ctx); err != nil {
		log.Fatal(err)
	}
}
