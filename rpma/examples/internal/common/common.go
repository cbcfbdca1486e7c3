// Package common is what the rpma examples share, as librpma's
// examples/common does: the private-data layout both sides exchange,
// connecting and accepting, closing, PMem mapping with its signature,
// and exit statuses as C's.
package common

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/purerdma/rdma/mmio"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// DescriptorsMaxSize is the room for the descriptors in Data
// (DESCRIPTORS_MAX_SIZE).
const DescriptorsMaxSize = 24

// DataSize is the encoded length of Data: sizeof(struct common_data).
const DataSize = 4 + DescriptorsMaxSize

// Data is struct common_data, the private data the examples exchange:
// where the payload starts in the region, and the region's and the
// peer configuration's descriptors back to back. Host byte order, as
// C sends it (little-endian on amd64 and arm64).
type Data struct {
	DataOffset   uint16
	MRDescSize   uint8
	PCfgDescSize uint8
	Descriptors  [DescriptorsMaxSize]byte
}

// NewData packs a region's descriptor and, if pcfg is not nil, a peer
// configuration's.
func NewData(offset int, mr *rpma.MR, pcfg *rpma.PeerCfg) (Data, error) {
	d := Data{DataOffset: uint16(offset)}
	b := mr.AppendDescriptor(d.Descriptors[:0])
	d.MRDescSize = uint8(len(b))
	if pcfg != nil {
		p := pcfg.Descriptor()
		if len(b)+len(p) > DescriptorsMaxSize {
			return d, fmt.Errorf("descriptors of %d bytes do not fit %d", len(b)+len(p), DescriptorsMaxSize)
		}
		d.PCfgDescSize = uint8(copy(d.Descriptors[len(b):], p))
	}
	if offset < 0 || offset > 0xffff {
		return d, fmt.Errorf("data offset %d", offset)
	}
	return d, nil
}

// Encode is the 28 bytes C sends.
func (d *Data) Encode() []byte {
	b := make([]byte, DataSize)
	binary.LittleEndian.PutUint16(b, d.DataOffset)
	b[2], b[3] = d.MRDescSize, d.PCfgDescSize
	copy(b[4:], d.Descriptors[:])
	return b
}

// DecodeData reads struct common_data from private data.
func DecodeData(b []byte) (Data, error) {
	var d Data
	if len(b) < DataSize {
		return d, fmt.Errorf("%d bytes of private data, want at least %d", len(b), DataSize)
	}
	d.DataOffset = binary.LittleEndian.Uint16(b)
	d.MRDescSize, d.PCfgDescSize = b[2], b[3]
	copy(d.Descriptors[:], b[4:DataSize])
	if int(d.MRDescSize)+int(d.PCfgDescSize) > DescriptorsMaxSize {
		return d, fmt.Errorf("descriptor sizes %d + %d exceed %d", d.MRDescSize, d.PCfgDescSize, DescriptorsMaxSize)
	}
	return d, nil
}

// RemoteMR decodes the region's descriptor.
func (d *Data) RemoteMR() (*rpma.RemoteMR, error) {
	return rpma.RemoteMRFromDescriptor(d.Descriptors[:d.MRDescSize])
}

// PeerCfg decodes the peer configuration's descriptor.
func (d *Data) PeerCfg() (*rpma.PeerCfg, error) {
	return rpma.PeerCfgFromDescriptor(d.Descriptors[d.MRDescSize : d.MRDescSize+d.PCfgDescSize])
}

// Context is the examples' context: interrupted by nothing but a
// generous deadline, so a lost peer never hangs an example forever.
func Context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Minute)
}

// Peer opens the device of addr (the local one for a server, the one
// that reaches it for a client) and makes a peer on it
// (common_peer_via_address). Close closes both.
type Peer struct {
	*rpma.Peer
	dev *uverbs.Context
}

// PeerViaAddress is common_peer_via_address.
func PeerViaAddress(ctx context.Context, addr string, side rpma.Side) (*Peer, error) {
	dev, err := rpma.DeviceContext(ctx, addr, side)
	if err != nil {
		return nil, err
	}
	p, err := rpma.NewPeer(dev)
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &Peer{Peer: p, dev: dev}, nil
}

// Close deletes the peer and closes its device.
func (p *Peer) Close() error {
	return errors.Join(p.Peer.Close(), p.dev.Close())
}

// ClientConnect requests a connection, connects with pdata and waits
// for it to be established (client_connect).
func ClientConnect(ctx context.Context, p *rpma.Peer, addr, port string, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := p.NewConnReq(ctx, addr, port, cfg)
	if err != nil {
		return nil, err
	}
	return connectAndWait(ctx, req, pdata, false)
}

// ServerAcceptConnection takes the next request, accepts it with pdata
// and waits for it to be established (server_accept_connection).
func ServerAcceptConnection(ctx context.Context, ep *rpma.Ep, cfg *rpma.ConnCfg, pdata []byte) (*rpma.Conn, error) {
	req, err := ep.NextConnReq(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return connectAndWait(ctx, req, pdata, true)
}

// closedEarly holds the accepted connections whose client's disconnect
// arrived before the connection's ESTABLISHED: on Linux 6.1's rxe a
// client that disconnects as soon as it is connected can have its
// disconnect request handled before its ready-to-use message, and the
// server's side then reports CLOSED and never ESTABLISHED although the
// connection worked (docs/reliability.md, "A connection closed before
// it was established"). A client disconnects only once connected, so
// the server goes on as if it had seen both events, and its wait for
// the close returns at once. Upstream's C servers report an unexpected
// event instead (docs/rpma.md lists the difference).
var closedEarly sync.Map // *rpma.Conn -> struct{}

// connectAndWait connects or accepts (passive) req with pdata and waits
// for the connection to be established.
func connectAndWait(ctx context.Context, req *rpma.ConnReq, pdata []byte, passive bool) (*rpma.Conn, error) {
	conn, err := req.Connect(pdata)
	if err != nil {
		return nil, err
	}
	ev, err := conn.NextEvent(ctx)
	if err == nil && passive && ev == rpma.ConnClosed {
		closedEarly.Store(conn, struct{}{})
		return conn, nil
	}
	if err == nil && ev != rpma.ConnEstablished {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
		err = ErrUnexpected
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// ErrUnexpected is an example's own failure (C's ret = -1).
var ErrUnexpected = errors.New("unexpected result")

func waitClosed(ctx context.Context, c *rpma.Conn) error {
	if _, ok := closedEarly.LoadAndDelete(c); ok {
		return nil
	}
	ev, err := c.NextEvent(ctx)
	if err == nil && ev != rpma.ConnClosed {
		fmt.Fprintf(os.Stderr, "rpma_conn_next_event returned an unexpected event: %v\n", ev)
	}
	return err
}

// WaitForConnCloseAndDisconnect waits for the other side's disconnect,
// answers it and deletes the connection
// (common_wait_for_conn_close_and_disconnect).
func WaitForConnCloseAndDisconnect(ctx context.Context, c *rpma.Conn) error {
	return errors.Join(waitClosed(ctx, c), c.Disconnect(), c.Close())
}

// DisconnectAndWaitForConnClose disconnects, waits for the close and
// deletes the connection (common_disconnect_and_wait_for_conn_close).
func DisconnectAndWaitForConnClose(ctx context.Context, c *rpma.Conn) error {
	err := c.Disconnect()
	if err == nil {
		err = waitClosed(ctx, c)
	}
	return errors.Join(err, c.Close())
}

// WaitAndValidateCompletion waits on the connection's shared channel
// for one completion and checks it succeeded with the expected opcode
// (wait_and_validate_completion).
func WaitAndValidateCompletion(ctx context.Context, c *rpma.Conn, want uverbs.WCOpcode, wc *uverbs.WorkCompletion) error {
	cq, _, err := c.Wait(ctx)
	if err != nil {
		return err
	}
	return getOne(cq, want, wc)
}

// WaitForSendAndRecv waits on the connection's shared channel until
// both a send and a receive completed, in either order, and checks
// them; recv gets the receive's completion. C's scch examples wait for
// the send, then the receive (wait_and_validate_completion twice), but
// the two arrive on different CQs from different rxe tasks: the other
// side's answer can complete the receive before its acknowledgement
// completes the send (seen with 09scch on 6.1).
func WaitForSendAndRecv(ctx context.Context, c *rpma.Conn, recv *uverbs.WorkCompletion) error {
	var sent, received bool
	for !sent || !received {
		cq, _, err := c.Wait(ctx)
		if err != nil {
			return err
		}
		one := make([]uverbs.WorkCompletion, 1)
		if _, err := cq.GetWC(one); err != nil {
			return err
		}
		wc := one[0]
		if err := check(wc.Opcode, &wc); err != nil { // its status
			return err
		}
		switch {
		case wc.Opcode == uverbs.WCSend && !sent:
			sent = true
		case wc.Opcode == uverbs.WCRecv && !received:
			received, *recv = true, wc
		default:
			fmt.Fprintf(os.Stderr, "unexpected wc.opcode value (%v)\n", wc.Opcode)
			return ErrUnexpected
		}
	}
	return nil
}

// WaitForCompletion waits on cq's own channel for one completion and
// checks it.
func WaitForCompletion(ctx context.Context, cq *rpma.CQ, want uverbs.WCOpcode, wc *uverbs.WorkCompletion) error {
	if err := WaitForWC(ctx, cq, wc); err != nil {
		return err
	}
	return check(want, wc)
}

func sliceOf(wc *uverbs.WorkCompletion) []uverbs.WorkCompletion {
	one := []uverbs.WorkCompletion{*wc}
	return one
}

func getOne(cq *rpma.CQ, want uverbs.WCOpcode, wc *uverbs.WorkCompletion) error {
	one := sliceOf(wc)
	if _, err := cq.GetWC(one); err != nil {
		return err
	}
	*wc = one[0]
	return check(want, wc)
}

func check(want uverbs.WCOpcode, wc *uverbs.WorkCompletion) error {
	if err := rpma.CompletionErr(wc); err != nil {
		fmt.Fprintf(os.Stderr, "%v failed: %v\n", want, wc.Status)
		return err
	}
	if wc.Opcode != want {
		fmt.Fprintf(os.Stderr, "unexpected wc.opcode value (%v != %v)\n", wc.Opcode, want)
		return ErrUnexpected
	}
	return nil
}

// Exit ends an example as C's main returns: 0 on success; a librpma
// error code, or -1 for the example's own failures, truncated to a
// byte as the kernel truncates C's exit status.
func Exit(err error) {
	if err == nil {
		os.Exit(0)
	}
	code := int(rpma.CodeOf(err))
	if code == int(rpma.CodeUnknown) {
		code = -1
	}
	ExitStatus(err, code)
}

// Usage prints the usage line and exits as C's exit(-1).
func Usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format, args...)
	os.Exit(255)
}

// SetVerboseLogging sets both thresholds to INFO, as the examples do.
func SetVerboseLogging() {
	rpma.SetLogThreshold(rpma.LogThresholdPrimary, rpma.LogInfo)
	rpma.SetLogThreshold(rpma.LogThresholdAux, rpma.LogInfo)
}

// Signature marks persistent contents as valid (SIGNATURE_STR with its
// terminating zero).
const Signature = "RPMA_EXAMPLE_SIG\x00"

// NoPMemMsg is what an example says when it uses DRAM.
const NoPMemMsg = "No <pmem-path> provided. Using DRAM instead.\n"

// PMemUsage is the usage text's PMem part.
const PMemUsage = "where <pmem-path> can be:\n  - a Device DAX (/dev/dax0.0 for example) or\n  - a file on File System DAX (/mnt/pmem/file for example)\n"

// Mem is an example's memory: persistent, from a file or device DAX, or
// DRAM; Data is where the payload starts (after the signature in PMem).
type Mem struct {
	Buf        []byte
	DataOffset int
	IsPMem     bool
	buffer     *uverbs.Buffer
}

// Persist makes b durable when the memory is persistent.
func (m *Mem) Persist(b []byte) {
	if m.IsPMem {
		mmio.Persist(b)
	}
}

// Close unmaps persistent memory.
func (m *Mem) Close() error {
	if m.buffer != nil {
		return m.buffer.Close()
	}
	return nil
}

// MapPMem maps path with room for size bytes after the signature
// (common_pmem_map_file_with_signature_check): if the signature is
// missing, the payload area is initialized by init (or to an empty
// string) and persisted, then the signature is written and persisted.
func MapPMem(path string, size int, init func(b []byte) int) (*Mem, error) {
	return MapPMemAt(path, 0, size, init)
}

// DRAM is page-aligned ordinary memory of size bytes
// (malloc_aligned).
func DRAM(size int) (*Mem, error) {
	buf, err := uverbs.AllocBuffer(size)
	if err != nil {
		return nil, err
	}
	return &Mem{Buf: buf.Bytes()[:size], buffer: buf}, nil
}

// MemFor is PMem at path when one is given (args beyond the first
// needed), else DRAM with the NO_PMEM message on stderr.
func MemFor(args []string, i, size int, init func(b []byte) int) (*Mem, error) {
	if len(args) > i {
		return MapPMem(args[i], size, init)
	}
	fmt.Fprint(os.Stderr, NoPMemMsg)
	m, err := DRAM(size)
	if err == nil && init != nil {
		init(m.Buf)
	}
	return m, err
}

// CString is the bytes of b up to its first zero.
func CString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// CloseAll closes in order, joining errors.
func CloseAll(cs ...io.Closer) error {
	var errs []error
	for _, c := range cs {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
