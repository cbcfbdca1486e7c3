// Command grpc runs gRPC-Go over RDMA: a gRPC server that serves on an
// rsocket.Listener and a client that dials through an rsocket.Dialer.
// It shows that a gRPC program moves onto RDMA by changing one line on
// each side:
//
//	lis, err := rsocket.Listen(ctx, "tcp", addr) // was net.Listen("tcp", addr)
//	grpcServer.Serve(lis)
//
// and, on the client, a context dialer:
//
//	d := &rsocket.Dialer{LocalAddr: &net.TCPAddr{IP: bindIP}}
//	grpc.NewClient("passthrough:///"+addr,
//		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
//			return d.DialContext(ctx, "tcp", a)
//		}),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// Everything above the net.Conn (HTTP/2, flow control, streams,
// deadlines, cancellation) is gRPC's own and unchanged.
//
// The service is written by hand, so that no protoc is needed: a
// grpc.ServiceDesc with one unary method, Echo, and one bidirectional
// streaming method, Chat, both on Msg, a plain Go type that a small
// codec ("raw", registered with google.golang.org/grpc/encoding) puts on
// the wire as its bytes.
//
// Usage, in the soft-RoCE VM (rxe0 on 198.18.0.1, rxe1 on 198.18.0.2):
//
//	grpc -server 198.18.0.1:7471 &
//	grpc -client 198.18.0.1:7471 -bind 198.18.0.2
//
// The client makes 100 unary calls of 1 B to 1 MiB and one stream of
// 1000 messages each way, checks every echo, and exits 0 when all came
// back intact.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"

	"github.com/purerdma/rdma/rsocket"
)

// Msg is the one message type of the service: its payload is its wire
// format.
type Msg struct {
	Payload []byte
}

// rawCodec encodes a *Msg as its payload's bytes.
type rawCodec struct{}

// codecName is the codec's name and the calls' content subtype
// (application/grpc+raw).
const codecName = "raw"

func (rawCodec) Name() string { return codecName }

func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*Msg)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
	}
	return m.Payload, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*Msg)
	if !ok {
		return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
	}
	// gRPC reuses data once Unmarshal returns.
	m.Payload = bytes.Clone(data)
	return nil
}

func init() {
	encoding.RegisterCodec(rawCodec{})
}

// EchoServer is the service: Echo returns its request, Chat sends back
// every message it receives, in order, and ends when the client closes
// its side.
type EchoServer interface {
	Echo(context.Context, *Msg) (*Msg, error)
	Chat(grpc.BidiStreamingServer[Msg, Msg]) error
}

const (
	serviceName = "purerdma.examples.Echo"
	echoMethod  = "/" + serviceName + "/Echo"
	chatMethod  = "/" + serviceName + "/Chat"
)

// serviceDesc is what protoc-gen-go-grpc would generate for
//
//	service Echo {
//	  rpc Echo(Msg) returns (Msg);
//	  rpc Chat(stream Msg) returns (stream Msg);
//	}
var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*EchoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler:    echoHandler,
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		Handler:       chatHandler,
		ServerStreams: true,
		ClientStreams: true,
	}},
	Metadata: "main.go",
}

func echoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(Msg)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(EchoServer).Echo(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(EchoServer).Echo(ctx, req.(*Msg))
	})
}

func chatHandler(srv any, stream grpc.ServerStream) error {
	return srv.(EchoServer).Chat(&grpc.GenericServerStream[Msg, Msg]{ServerStream: stream})
}

// echoService implements EchoServer.
type echoService struct{}

func (echoService) Echo(_ context.Context, in *Msg) (*Msg, error) {
	return &Msg{Payload: in.Payload}, nil
}

func (echoService) Chat(stream grpc.BidiStreamingServer[Msg, Msg]) error {
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil // the client's CloseSend: end the stream with OK
		}
		if err != nil {
			return err
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}

// NewServer returns a gRPC server with the echo service registered.
func NewServer() *grpc.Server {
	s := grpc.NewServer()
	s.RegisterService(&serviceDesc, echoService{})
	return s
}

// Client calls the echo service.
type Client struct {
	cc grpc.ClientConnInterface
}

// NewEchoClient returns a Client over cc.
func NewEchoClient(cc grpc.ClientConnInterface) *Client {
	return &Client{cc: cc}
}

// Echo calls Echo.
func (c *Client) Echo(ctx context.Context, in *Msg, opts ...grpc.CallOption) (*Msg, error) {
	out := new(Msg)
	if err := c.cc.Invoke(ctx, echoMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}

// Chat opens a Chat stream.
func (c *Client) Chat(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[Msg, Msg], error) {
	s, err := c.cc.NewStream(ctx, &serviceDesc.Streams[0], chatMethod, opts...)
	if err != nil {
		return nil, err
	}
	return &grpc.GenericClientStream[Msg, Msg]{ClientStream: s}, nil
}

// DialFunc is the shape of net.Dialer.DialContext and
// rsocket.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// NewClientConn returns a gRPC client connection to addr whose
// transport connections come from dial, with the raw codec as every
// call's content subtype, and opts. It connects on the first call.
func NewClientConn(addr string, dial DialFunc, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dial(ctx, "tcp", a)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName)),
	}, opts...)
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

// DialRDMA returns a gRPC client connection to addr over rsockets, from
// the local address bind (nil lets the route choose), with opts.
func DialRDMA(addr string, bind net.IP, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	d := &rsocket.Dialer{}
	if bind != nil {
		d.LocalAddr = &net.TCPAddr{IP: bind}
	}
	return NewClientConn(addr, d.DialContext, opts...)
}

// UnarySizes returns n payload sizes spread evenly on a log scale from
// 1 B to 1 MiB (n >= 2).
func UnarySizes(n int) []int {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = int(math.Round(math.Pow(2, 20*float64(i)/float64(n-1))))
	}
	return sizes
}

// payload returns size bytes of a pattern that depends on seed, so that
// a message echoed in the wrong place does not compare equal.
func payload(seed, size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(seed*131 + i*7 + i>>8)
	}
	return p
}

// CheckUnary calls Echo once per size and compares every answer with
// its request.
func CheckUnary(ctx context.Context, c *Client, sizes []int) error {
	for i, size := range sizes {
		want := payload(i, size)
		got, err := c.Echo(ctx, &Msg{Payload: want})
		if err != nil {
			return fmt.Errorf("Echo #%d (%d B): %w", i, size, err)
		}
		if !bytes.Equal(got.Payload, want) {
			return fmt.Errorf("Echo #%d (%d B): got %d B back, not the request", i, size, len(got.Payload))
		}
	}
	return nil
}

// streamMsg is message i of a stream: its index, then a pattern of up
// to 300 bytes.
func streamMsg(i int) []byte {
	p := binary.BigEndian.AppendUint64(nil, uint64(i))
	return append(p, payload(i, i%301)...)
}

// CheckStream opens a Chat stream, sends n messages while it reads the
// n echoes and checks they come back in order, then closes its side and
// expects io.EOF: the server's handler saw the client's end of stream
// and returned OK.
func CheckStream(ctx context.Context, c *Client, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Chat(ctx)
	if err != nil {
		return fmt.Errorf("Chat: %w", err)
	}
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := stream.Send(&Msg{Payload: streamMsg(i)}); err != nil {
				sent <- fmt.Errorf("Send #%d: %w", i, err)
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	recvErr := func() error {
		for i := range n {
			m, err := stream.Recv()
			if err != nil {
				return fmt.Errorf("Recv #%d: %w", i, err)
			}
			if want := streamMsg(i); !bytes.Equal(m.Payload, want) {
				var got uint64
				if len(m.Payload) >= 8 {
					got = binary.BigEndian.Uint64(m.Payload)
				}
				return fmt.Errorf("Recv #%d: got %d B (index %d), want %d B", i, len(m.Payload), got, len(want))
			}
		}
		if m, err := stream.Recv(); err != io.EOF {
			if err == nil {
				return fmt.Errorf("Recv after %d echoes: got a message of %d B, want io.EOF", n, len(m.Payload))
			}
			return fmt.Errorf("Recv after %d echoes: %w, want io.EOF", n, err)
		}
		return nil
	}()
	if recvErr != nil {
		cancel() // ends a Send blocked on flow control
	}
	return errors.Join(recvErr, <-sent)
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("grpc: ")
	server := flag.String("server", "", "serve on `ADDR` (host:port) over rsockets")
	client := flag.String("client", "", "call the server at `ADDR` (host:port) over rsockets")
	bind := flag.String("bind", "", "the client's local `IP` (the RDMA device's address)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: grpc -server ADDR\n       grpc -client ADDR [-bind IP]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if (*server == "") == (*client == "") || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *server != "" {
		err = serve(ctx, *server)
	} else {
		var ip net.IP
		if *bind != "" {
			if ip = net.ParseIP(*bind); ip == nil {
				log.Printf("-bind %q: not an IP address", *bind)
				os.Exit(2)
			}
		}
		err = runClient(ctx, *client, ip)
	}
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// serve serves the echo service on addr until ctx ends.
func serve(ctx context.Context, addr string) error {
	lis, err := rsocket.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	s := NewServer()
	stop := context.AfterFunc(ctx, s.GracefulStop)
	defer stop()
	log.Printf("serving on %v over rsockets", lis.Addr())
	if err := s.Serve(lis); err != nil {
		return err
	}
	return nil
}

// runClient runs the unary and streaming checks against addr. Its calls
// wait for the server to come up (within the minute it gives itself),
// so that the two may be started together.
func runClient(ctx context.Context, addr string, bind net.IP) error {
	cc, err := DialRDMA(addr, bind, grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		return err
	}
	defer cc.Close()
	c := NewEchoClient(cc)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sizes := UnarySizes(100)
	if err := CheckUnary(ctx, c, sizes); err != nil {
		return err
	}
	log.Printf("%d unary calls of %d B to %d B echoed", len(sizes), sizes[0], sizes[len(sizes)-1])
	const n = 1000
	if err := CheckStream(ctx, c, n); err != nil {
		return err
	}
	log.Printf("stream: %d messages each way in order, then io.EOF", n)
	return nil
}
