// Package rpma is librpma in Go: remote persistent memory access over
// RDMA, on purerdma's uverbs and rdmacm, wire-compatible with C librpma
// (its memory-region and peer-configuration descriptors, its private
// data, its flush).
//
// A server makes a Peer on a device, registers memory with RegMR,
// listens with Listen and accepts requests from Ep.NextConnReq with
// ConnReq.Connect, handing the region's Descriptor to the client as
// private data. A client makes a Peer, a request with NewConnReq,
// connects, waits for ConnEstablished with Conn.NextEvent, decodes the
// descriptor with RemoteMRFromDescriptor and then reads, writes,
// flushes, atomically writes and sends messages, collecting
// completions with CQ.Wait and CQ.GetWC, or both in one call with
// CQ.WaitWC.
//
// # Goroutines
//
// As in librpma, share the Peer (and a PeerCfg, ConnCfg, SRQ) between
// goroutines and give each goroutine its own connection: a Conn, its
// ConnReq and its CQs belong to one goroutine at a time and take no
// lock, so posting and polling cost what the device costs and allocate
// nothing. Peer, Ep, MR, SRQ, PeerCfg, ConnCfg and SRQCfg are safe for
// concurrent use. A full queue is an error matching ErrAgain (and
// uverbs.ErrBusy) at once, never a wait. docs/threading.md has the
// table.
//
// # Blocking
//
// Calls that wait (Ep.NextConnReq, Conn.NextEvent, CQ.Wait, CQ.WaitWC,
// Conn.Wait, NewConnReq's resolution) take a context.Context and wait
// in the Go poller. The file descriptors of librpma's *_get_fd calls (Ep.Fd,
// Conn.EventFd, CQ.Fd, Conn.CompletionFd) are there for programs that
// multiplex many connections in an epoll loop.
//
// # Errors
//
// Every error matches one of the librpma error classes (ErrInvalid,
// ErrProvider, ErrNotSupported, ...) with errors.Is, and what lies
// under it: an errno, uverbs.ErrBusy, uverbs.ErrClosed. A failed
// completion is described by CompletionErr. CodeOf gives the C error
// code. A resolution that the package's own timeout ends
// (ConnCfg.SetTimeout, DefaultTimeout) names the step and the address
// and matches ETIMEDOUT; context.DeadlineExceeded means ctx's deadline
// passed.
//
// docs/rpma.md maps every librpma function to its Go name and says what
// happens with each kind of peer.
package rpma
