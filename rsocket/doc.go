// Package rsocket is Go's net.Conn and net.Listener over RDMA, speaking
// librdmacm's rsockets protocol: a Go server serves C rsocket clients
// (rstream, programs under librspreload.so) and a Go client reaches C
// rsocket servers, with no cgo and no librdmacm. rsockets' iomap
// (riomap, riowrite: writes straight into memory the peer offered) is
// Conn.IOMap and Conn.IOWrite.
//
// A program that takes a net.Listener or a dial function moves onto
// RDMA by changing one line:
//
//	ln, err := rsocket.Listen(ctx, "tcp", ":7471") // was net.Listen("tcp", ":7471")
//	http.Serve(ln, handler)
//
// and a client dials with rsocket.Dial, or with a Dialer's DialContext
// wherever a func(ctx, network, address) (net.Conn, error) is taken
// (http.Transport.DialContext, grpc.WithContextDialer, ...).
//
// # The protocol
//
// Each connection is one RC queue pair set up by rdma_cm in the TCP
// port space, with rsockets' 40-byte connect data (version 1). Data
// travels as RDMA WRITE WITH IMMEDIATE into a receive buffer the peer
// hands out in halves; the immediate names the message (data length,
// credit update, control); on iWARP devices, which have no immediate
// data, a message is a 4-byte SEND after a plain RDMA WRITE of its
// data, as librdmacm speaks it there. Flow control is rsockets':
// credits are an absolute 16-bit sequence limit, buffer halves are
// granted by writing their address into the peer's target list. docs/rsocket.md has the
// wire format, the defaults and what this package checks of a peer.
//
// # iWARP
//
// On iWARP the connecting side speaks first (MPA wants it so) and the
// accepting side says nothing until it has read that first message.
// siw (Linux 6.1 and 6.12) can leave a message that arrives just after
// its accept unread until more data comes; so a dialed Conn that has
// heard nothing from its peer sends its credit limit again, 50 ms and
// then 1 s after the connection is up (an idempotent 4-byte message,
// at most twice), and when it first hears from its peer it writes
// nothing to it once (a zero-length RDMA WRITE, which the peer's
// program never sees): siw reads what it left behind when that frame
// arrives. A C rsocket that dials a Listener can still lose the race:
// docs/rsocket.md says why the accepting side cannot mend it.
//
// # Semantics
//
// Conn has net.Conn's semantics: Read and Write poll the completion
// queue briefly (Config.PollTime, or until they can go on with
// Config.BusyPoll), then block in the Go runtime's poller on the
// connection's completion channel (no thread is held and no goroutine
// spins); deadlines end them with
// os.ErrDeadlineExceeded, and a new deadline or Close wakes them at
// once; Close ends them with net.ErrClosed. CloseWrite is rsockets'
// SHUTDOWN: the peer reads io.EOF. A peer that disconnects without
// closing, or a connection that fails, gives errors matching
// syscall.ECONNRESET; a refused dial matches syscall.ECONNREFUSED. A
// peer that breaks the protocol (lengths past what was granted,
// credits that move back, unknown messages) has its connection reset
// with an error matching ErrProtocol; nothing is read or written outside
// this side's own buffers.
//
// # Goroutines
//
// One goroutine may Read while another Writes; concurrent Reads (or
// Writes) take turns. Listener.Accept may be called concurrently.
// Each Conn has one goroutine of its own, parked in the poller on the
// connection's rdma_cm channel: a peer that dies is reported there and
// nowhere else (rsockets asks for infinite retries, so the queue pair
// never times out). It ends with Close.
package rsocket
