package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// exampleQP is the QP of both ends: 4 messages each way at most.
var exampleQP = &rdmacm.QPOptions{Config: uverbs.QPConfig{
	Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1},
}}

// serveThenClose accepts one connection on l, sends msgs and
// disconnects.
func serveThenClose(ctx context.Context, l *rdmacm.ID, msgs []string) {
	req, err := l.GetRequest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s := req.ID // with its QP: l is an endpoint with QPOptions
	defer s.Close()
	buf := make([]byte, 64)
	mr, err := s.RegMsgs(buf)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	if _, err := s.AcceptContext(ctx, nil); err != nil {
		log.Fatal(err)
	}
	for i, m := range msgs {
		n := copy(buf, m)
		if err := s.PostSend(uint64(i), mr, 0, n, uverbs.SendSignaled); err != nil {
			log.Fatal(err)
		}
		if _, err := s.GetSendComp(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.DisconnectContext(ctx); err != nil { // returns when the client answers
		log.Fatal(err)
	}
}

// A client that only waits for completions and still sees its server
// close the connection: once the messages that arrived are taken,
// GetRecvComp ends with an error matching ErrDisconnected, at once,
// instead of waiting for a message that will not come (or, for a
// send, for the retries to run out seconds later). In the test VM the
// server runs in this program, on rxe0's address.
func ExampleID_GetRecvComp() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pai, err := rdmacm.GetAddrInfo(ctx, "198.18.0.1", "7475", &rdmacm.AddrInfoHints{Flags: rdmacm.Passive})
	if err != nil {
		log.Fatal(err)
	}
	l, err := rdmacm.CreateEP(ctx, &pai[0], exampleQP)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	if err := l.Listen(0); err != nil {
		log.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveThenClose(ctx, l, []string{"one", "two", "three"})
	}()

	ais, err := rdmacm.GetAddrInfo(ctx, "198.18.0.1", "7475", &rdmacm.AddrInfoHints{Src: netip.MustParseAddrPort("198.18.0.2:0")})
	if err != nil {
		log.Fatal(err)
	}
	id, err := rdmacm.CreateEP(ctx, &ais[0], exampleQP)
	if err != nil {
		log.Fatal(err)
	}
	defer id.Close()
	buf := make([]byte, 4*16)
	mr, err := id.RegMsgs(buf)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	for i := range 4 { // one receive more than the server sends
		if err := id.PostRecv(uint64(i), mr, 16*i, 16); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := id.ConnectContext(ctx, nil); err != nil {
		log.Fatal(err)
	}
	for {
		wc, err := id.GetRecvComp(ctx)
		if errors.Is(err, rdmacm.ErrDisconnected) {
			fmt.Println("the server closed the connection")
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		off := 16 * int(wc.WRID)
		fmt.Printf("%s\n", buf[off:off+int(wc.ByteLen)])
	}
	if err := id.Disconnect(); err != nil { // answer the server's disconnect
		log.Fatal(err)
	}
	<-served
}
