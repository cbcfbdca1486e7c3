package rsocket_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/purerdma/rdma/rsocket"
)

// A net/http server moves onto RDMA by listening with rsocket.Listen
// instead of net.Listen; a client by dialing with an rsocket.Dialer.
// (Run in the test VM by TestExamples: rxe0 serves, rxe1 fetches.)
func Example_http() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The server: every net/http feature works on the listener.
	ln, err := rsocket.Listen(ctx, "tcp", "198.18.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over RDMA, %s\n", r.RemoteAddr)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	// The client: the transport dials rsocket connections.
	d := &rsocket.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("198.18.0.2")}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://198.18.0.1:8080/", nil)
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(body))
}

// Dial and Listen are net.Dial and net.Listen for rsockets; a *Conn is a
// net.Conn.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rsocket.Dial(ctx, "tcp", "198.18.0.1:7471") // e.g. C rstream -T v, or rsocket.Listen
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		log.Fatal(err)
	}
	c.CloseWrite() // the peer reads io.EOF after "ping"
}
