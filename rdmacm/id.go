package rdmacm

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/internal/ucma"
	"github.com/purerdma/rdma/uverbs"
)

// PortSpace is an ID's port space (enum rdma_ucm_port_space): which
// transport its connections use and which ports its addresses name.
type PortSpace uint16

const (
	// PortSpaceTCP: reliable connected (RC) QPs, connections set up
	// with the InfiniBand CM's REQ/REP/RTU exchange.
	PortSpaceTCP PortSpace = 0x0106 // RDMA_PS_TCP
	// PortSpaceUDP: unreliable datagram (UD) QPs; Connect and Accept
	// exchange QP numbers and QKeys (a SIDR exchange), and multicast
	// groups can be joined.
	PortSpaceUDP PortSpace = 0x0111 // RDMA_PS_UDP
)

// String returns "TCP" or "UDP".
func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	}
	return "PortSpace(" + strconv.Itoa(int(ps)) + ")"
}

// QPType is the transport of the port space's QPs: RC for TCP, UD for
// UDP.
func (ps PortSpace) QPType() uverbs.QPType {
	if ps == PortSpaceUDP {
		return uverbs.QPTypeUD
	}
	return uverbs.QPTypeRC
}

// Private data limits: what the InfiniBand CM message of each step
// carries for the user after the rdma_cm's own header (the kernel's
// IB_CM_*_PRIVATE_DATA_SIZE less sizeof(struct cma_hdr) where the
// rdma_cm adds one). Longer private data is refused before any kernel
// call.
const (
	MaxConnectPrivateData   = 56  // Connect, PortSpaceTCP (REQ: 92 - 36)
	MaxAcceptPrivateData    = 196 // Accept, PortSpaceTCP (REP)
	MaxRejectPrivateData    = 148 // Reject, PortSpaceTCP (REJ)
	MaxUDConnectPrivateData = 180 // Connect, PortSpaceUDP (SIDR REQ: 216 - 36)
	MaxUDAcceptPrivateData  = 136 // Accept and Reject, PortSpaceUDP (SIDR REP)
)

// ID is an rdma_cm identifier (rdma_cm_id): the endpoint of one
// connection, a listener, or a UD endpoint. Its events arrive on its
// EventChannel.
//
// An ID created with a nil channel has a private one: only then do the
// blocking methods (ResolveAddrContext, ConnectContext, ...) work, as
// they wait for their event on it. With a shared channel, call the
// asynchronous methods and read the events with EventChannel.Next.
//
// The methods are safe for concurrent use; the connection steps
// themselves (resolve, connect, accept, disconnect) are a sequence the
// caller runs in order.
type ID struct {
	handle uint32
	uid    uint64
	ps     PortSpace
	qpType uverbs.QPType

	ch  atomic.Pointer[EventChannel] // where its events arrive
	own *EventChannel                // its private channel, or nil; guarded by mu after creation

	closed        atomic.Bool
	connectFailed atomic.Bool // CONNECT_RESPONSE processing failed: drop REJECTED and DISCONNECTED
	disconnected  atomic.Bool // DISCONNECTED arrived: GetSendComp and GetRecvComp end with ErrDisconnected
	ackTimeoutSet atomic.Bool // SetAckTimeout succeeded: ConnParam.AckTimeout does not replace it

	mu     sync.Mutex
	dev    *uverbs.Device // the device the kernel bound it to; nil until then
	port   int
	parent *ID // the listener of a connection-request ID

	// The QP the ID drives through the connection's states: CreateQP's
	// or AttachQP's.
	qp       *uverbs.QP
	qpPD     *uverbs.PD
	qpSRQ    bool
	qpAccess uverbs.Access // AttachQP's access rights added to the CM's at INIT

	initDep  uint8 // initiator depth and responder resources: the
	respRes  uint8 // peer's (from its request) or ours (from Connect)
	mcasts   map[netip.Addr]*membership
	reported uint32 // DESTROY_ID's count

	events eventCount

	// What the ID owns besides (librdmacm's endpoint: CreateQP's CQs,
	// CreateSRQ's SRQ, the short forms' state; endpoint.go) and the
	// references it holds on the package's shared Contexts
	// (contexts.go). Both are guarded by mu, but for what their types
	// guard themselves.
	ep   endpoint
	refs contextRefs
}

// CreateID creates an ID in port space ps on ch (rdma_create_id). With
// ch nil the ID gets a private event channel of its own, closed with it.
func CreateID(ch *EventChannel, ps PortSpace) (*ID, error) {
	if ps != PortSpaceTCP && ps != PortSpaceUDP {
		return nil, fmt.Errorf("rdmacm CreateID: port space %v: %w (TCP and UDP are)", ps, ErrNotSupported)
	}
	var own *EventChannel
	if ch == nil {
		var err error
		if own, err = NewEventChannel(); err != nil {
			return nil, err
		}
		ch = own
	} else if ch.closed.Load() {
		return nil, fmt.Errorf("rdmacm CreateID: event channel: %w", ErrClosed)
	}
	id := newID(ps, own)
	idByUID.Store(id.uid, id)
	h, err := ch.f.CreateID(id.uid, uint16(ps), uint8(ps.QPType()))
	if err != nil {
		idByUID.Delete(id.uid)
		if own != nil {
			own.f.Close()
		}
		return nil, fmt.Errorf("rdmacm CreateID: %w", err)
	}
	id.handle = h
	id.setChannel(ch)
	return id, nil
}

func newID(ps PortSpace, own *EventChannel) *ID {
	id := &ID{uid: newUID(), ps: ps, qpType: ps.QPType(), own: own}
	if own != nil {
		own.owner.Store(id)
	}
	return id
}

func (id *ID) setChannel(ch *EventChannel) {
	if old := id.ch.Swap(ch); old != nil {
		old.remove(id)
	}
	ch.add(id)
}

// eventCount counts the events Next finished with (delivered or
// dropped) for an ID or a membership, so that destroying one can wait
// until none of the events the kernel reported for it is still on its
// way: none is delivered after Close or, on the old channel, after
// Migrate.
type eventCount struct {
	mu        sync.Mutex
	cond      *sync.Cond
	completed uint32
}

func (c *eventCount) done() {
	c.mu.Lock()
	c.completed++
	if c.cond != nil {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

// wait waits until n events are done.
func (c *eventCount) wait(n uint32) {
	c.mu.Lock()
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	for c.completed < n {
		c.cond.Wait()
	}
	c.mu.Unlock()
}

func (id *ID) done()               { id.events.done() }
func (id *ID) waitEvents(n uint32) { id.events.wait(n) }

// file is the rdma_cm fd the ID's commands go to.
func (id *ID) file() *ucma.File { return id.ch.Load().f }

func (id *ID) alive(op string) error {
	if id.closed.Load() {
		return opError(op, id.handle, ErrClosed)
	}
	return nil
}

// Channel is the channel the ID's events arrive on: its private one, or
// the one it was created on or migrated to.
func (id *ID) Channel() *EventChannel { return id.ch.Load() }

// PortSpace is the ID's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// QPType is the type of the ID's QPs: RC for PortSpaceTCP, UD for
// PortSpaceUDP.
func (id *ID) QPType() uverbs.QPType { return id.qpType }

// Handle is the kernel's number for the ID, as errors and events print
// it.
func (id *ID) Handle() uint32 { return id.handle }

// Device is the RDMA device the kernel bound the ID to, as described
// when this package first met it, and ok false while the ID is bound to
// none: before address resolution, or after a bind to a wildcard
// address.
func (id *ID) Device() (dev uverbs.Device, ok bool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.dev == nil {
		return uverbs.Device{}, false
	}
	return *id.dev, true
}

// Port is the device port the ID is bound to (1-based), 0 while it is
// bound to none.
func (id *ID) Port() int {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.port
}

func (id *ID) device(op string) (uverbs.Device, error) {
	if d, ok := id.Device(); ok {
		return d, nil
	}
	return uverbs.Device{}, opError(op, id.handle, fmt.Errorf(
		"the ID is bound to no device yet (resolve an address, bind to a device's address, or take the ID from a connect request): %w", errInvalid))
}

// queryAddr learns the ID's device from the kernel.
func (id *ID) queryAddr() error {
	r, err := id.file().QueryAddr(id.handle)
	if err != nil {
		return err
	}
	return id.bindDevice(&r)
}

// LocalAddr is the ID's source address (rdma_get_local_addr and
// rdma_get_src_port, from QUERY_ADDR). It is the zero AddrPort before
// the ID has one.
func (id *ID) LocalAddr() (netip.AddrPort, error) {
	src, _, err := id.addrs("LocalAddr")
	return src, err
}

// RemoteAddr is the peer's address (rdma_get_peer_addr and
// rdma_get_dst_port); the zero AddrPort before the ID has a peer.
func (id *ID) RemoteAddr() (netip.AddrPort, error) {
	_, dst, err := id.addrs("RemoteAddr")
	return dst, err
}

func (id *ID) addrs(op string) (src, dst netip.AddrPort, err error) {
	if err := id.alive(op); err != nil {
		return src, dst, err
	}
	r, err := id.file().QueryAddr(id.handle)
	if err != nil {
		return src, dst, opError(op, id.handle, err)
	}
	src = decodeSockaddr(r.SrcAddr.Raw[:min(int(r.SrcSize), len(r.SrcAddr.Raw))])
	dst = decodeSockaddr(r.DstAddr.Raw[:min(int(r.DstSize), len(r.DstAddr.Raw))])
	return src, dst, nil
}

// Bind binds the ID to a local address and port (rdma_bind_addr). Port
// 0 picks a free one; the unspecified address (0.0.0.0 or ::) binds to
// no device, so that a listener takes requests on every device. A bind
// to a device's address binds the ID to that device.
func (id *ID) Bind(addr netip.AddrPort) error {
	const op = "Bind"
	if err := id.alive(op); err != nil {
		return err
	}
	sa, err := encodeSockaddr(addr)
	if err != nil {
		return opError(op, id.handle, err)
	}
	if err := id.file().Bind(id.handle, sa); err != nil {
		return opError(op, id.handle, err)
	}
	return opError(op, id.handle, id.queryAddr())
}

// kernelTimeout converts a resolution timeout to the kernel's
// milliseconds.
func kernelTimeout(op string, d time.Duration) (uint32, error) {
	if d <= 0 {
		return 0, fmt.Errorf("rdmacm %s: timeout %v: %w", op, d, errInvalid)
	}
	return uint32(min(max(d.Milliseconds(), 1), math.MaxInt32)), nil
}

// ResolveAddr starts resolving dst to an RDMA address and binding the ID
// to the local device that reaches it (rdma_resolve_addr). src, if
// valid, is the source address (or, with an unspecified address, just
// the source port); without one the ID is bound by routing. The result
// arrives on the channel as ADDR_RESOLVED or, within timeout, as
// ADDR_ERROR.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	const op = "ResolveAddr"
	if err := id.alive(op); err != nil {
		return err
	}
	ms, err := kernelTimeout(op, timeout)
	if err != nil {
		return err
	}
	dsa, err := encodeSockaddr(dst)
	if err != nil {
		return opError(op, id.handle, fmt.Errorf("destination: %w", err))
	}
	var ssa []byte
	if src.IsValid() {
		if ssa, err = encodeSockaddr(src); err != nil {
			return opError(op, id.handle, fmt.Errorf("source: %w", err))
		}
	}
	return opError(op, id.handle, id.file().ResolveAddr(id.handle, ssa, dsa, ms))
}

// ResolveRoute starts resolving the route to the destination of a
// resolved address (rdma_resolve_route). The result arrives on the
// channel as ROUTE_RESOLVED or, within timeout, as ROUTE_ERROR.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	const op = "ResolveRoute"
	if err := id.alive(op); err != nil {
		return err
	}
	ms, err := kernelTimeout(op, timeout)
	if err != nil {
		return err
	}
	return opError(op, id.handle, id.file().ResolveRoute(id.handle, ms))
}

// Listen makes a bound ID listen for connection requests (rdma_listen);
// each arrives as a CONNECT_REQUEST event carrying a new ID. backlog
// bounds the requests not yet taken with Next; 0 means the kernel's
// maximum (net.rdma_ucm.max_backlog).
func (id *ID) Listen(backlog int) error {
	const op = "Listen"
	if err := id.alive(op); err != nil {
		return err
	}
	if backlog < 0 || backlog > math.MaxInt32 {
		return opError(op, id.handle, fmt.Errorf("backlog %d: %w", backlog, errInvalid))
	}
	if err := id.file().Listen(id.handle, backlog); err != nil {
		return opError(op, id.handle, err)
	}
	return opError(op, id.handle, id.queryAddr())
}

// MaxResources in ConnParam.ResponderResources or InitiatorDepth asks
// for the device's limit (librdmacm's RDMA_MAX_RESP_RES and
// RDMA_MAX_INIT_DEPTH); on Accept, for the lower of that and what the
// request asked for.
const MaxResources = 0xff

// ConnParam are the parameters of Connect and Accept (rdma_conn_param).
// A nil *ConnParam means DefaultConnParam().
type ConnParam struct {
	// PrivateData goes to the peer's CONNECT_REQUEST (Connect) or
	// ESTABLISHED/CONNECT_RESPONSE (Accept) event; see the Max*PrivateData
	// limits.
	PrivateData []byte
	// ResponderResources is how many RDMA reads and atomics the peer
	// may have outstanding at this side; InitiatorDepth how many this
	// side may have outstanding at the peer. RC only. MaxResources
	// means the device's limit.
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	// RetryCount (0-7) is how often a packet the peer does not
	// acknowledge within the ACK timeout is sent again before its work
	// request completes with uverbs.WCRetryExcErr: it is what reports a
	// dead peer to a program that waits only for completions. The
	// connecting side's RetryCount governs both QPs: the accepting
	// side's QP gets it from the connect request, and Accept's is
	// ignored. 7 is the largest value, and soft-RoCE (rxe) treats it as
	// "retry for ever", a meaning the InfiniBand specification gives
	// only to RNRRetryCount: there a completion never reports a dead
	// peer.
	// RNRRetryCount (0-7, 7 for ever) is how often a send is retried
	// when the peer answers that it has no receive posted, which a live
	// peer does. RC only.
	RetryCount    uint8
	RNRRetryCount uint8
	// AckTimeout (0-31) is the local ACK timeout of this side's QP as
	// an exponent: a packet is sent again after 4.096 µs * 2^AckTimeout
	// without an acknowledgement. A non-zero value is set on the ID as
	// SetAckTimeout does before the connect or accept, unless
	// SetAckTimeout was called on the ID, which takes precedence; 0
	// leaves the ID's value: SetAckTimeout's, or else the one the kernel
	// computes from the route (19 on Linux 6.1's rxe, 17 on 6.12's).
	// RC only; ignored for PortSpaceUDP.
	AckTimeout uint8
	// QPNum and SRQ describe the QP when the ID has none from CreateQP;
	// with one, they are taken from it.
	QPNum uint32
	SRQ   bool
}

// DefaultAckTimeout is DefaultConnParam's AckTimeout: 4.096 µs * 2^17,
// about 0.54 s before a packet is sent again.
const DefaultAckTimeout = 17

// DefaultRetryCount is DefaultConnParam's RetryCount: the largest count
// that every device takes as a count (rxe retries for ever with 7).
const DefaultRetryCount = 6

// DefaultConnParam is the ConnParam of a nil *ConnParam: the device's
// limits for reads and atomics, RNR retries for ever (a peer that
// answers "no receive posted" is alive), DefaultRetryCount retries
// after DefaultAckTimeout each. A dead peer (a crashed host, a cut
// link, a killed process) is then reported to a program that waits
// only for completions after about (6+1) * 0.54 s ≈ 3.8 s without an
// acknowledgement: the work request in flight completes with
// uverbs.WCRetryExcErr and the QP goes to the error state.
//
// It differs from librdmacm's defaults (retry count 7, the kernel's
// ACK timeout) because soft-RoCE retries for ever with 7, so a dead
// peer is never reported, and because the kernel's ACK timeout depends
// on its version: with it, retry count 6 reports a dead peer on
// soft-RoCE after about 16 s on Linux 6.1 (timeout 19) and 3.8 s on
// 6.12 (17).
//
// The trade-off: the peer counts as dead after (RetryCount+1) ACK
// timeouts without progress, so shorter timeouts or fewer retries
// report a dead peer sooner but also fail a connection whose peer or
// network merely stalls that long (a congested link, a host whose
// soft-RoCE work waits for a CPU). Raise AckTimeout on networks with
// long round trips, or set it to 0 to use the value the kernel derives
// from the path. docs/reliability.md has the measurements.
func DefaultConnParam() *ConnParam {
	return &ConnParam{ResponderResources: MaxResources, InitiatorDepth: MaxResources,
		RetryCount: DefaultRetryCount, RNRRetryCount: 7, AckTimeout: DefaultAckTimeout}
}

// privateDataLimit is the longest private data of an operation in the
// ID's port space.
func (id *ID) privateDataLimit(op string) int {
	switch {
	case id.ps == PortSpaceUDP && op == "Connect":
		return MaxUDConnectPrivateData
	case id.ps == PortSpaceUDP:
		return MaxUDAcceptPrivateData
	case op == "Connect":
		return MaxConnectPrivateData
	case op == "Accept":
		return MaxAcceptPrivateData
	}
	return MaxRejectPrivateData
}

func (id *ID) checkPrivateData(op string, pd []byte) error {
	if n := id.privateDataLimit(op); len(pd) > n {
		return opError(op, id.handle, fmt.Errorf("%d bytes of private data, %s in port space %v carries at most %d: %w",
			len(pd), op, id.ps, n, errInvalid))
	}
	return nil
}

// connParam builds the kernel's conn_param, with the ID's QP.
func (id *ID) connParam(op string, p *ConnParam, initDepth, respRes uint8) (*abi.UCMConnParam, error) {
	k := &abi.UCMConnParam{Valid: 1, InitiatorDepth: initDepth, ResponderResources: respRes,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, FlowControl: boolByte(p.FlowControl),
		QPNum: p.QPNum, SRQ: boolByte(p.SRQ)}
	if p.RetryCount > 7 || p.RNRRetryCount > 7 {
		return nil, opError(op, id.handle, fmt.Errorf("retry count %d, RNR retry count %d: at most 7: %w", p.RetryCount, p.RNRRetryCount, errInvalid))
	}
	if p.AckTimeout > maxAckTimeout {
		return nil, opError(op, id.handle, fmt.Errorf("ACK timeout %d: at most %d: %w", p.AckTimeout, maxAckTimeout, errInvalid))
	}
	id.mu.Lock()
	if id.qp != nil {
		k.QPNum, k.SRQ = id.qp.Num(), boolByte(id.qpSRQ)
	}
	id.mu.Unlock()
	if k.QPNum > 0xffffff {
		return nil, opError(op, id.handle, fmt.Errorf("QP number %#x: %w", k.QPNum, errInvalid))
	}
	k.PrivateDataLen = uint8(copy(k.PrivateData[:], p.PrivateData))
	return k, nil
}

// applyAckTimeout sets the ACK timeout of p on the ID before a connect
// or accept, unless p has none, the ID is not RC, or SetAckTimeout set
// one.
func (id *ID) applyAckTimeout(op string, p *ConnParam) error {
	if p.AckTimeout == 0 || id.qpType != uverbs.QPTypeRC || id.ackTimeoutSet.Load() {
		return nil
	}
	return opError(op, id.handle, id.file().SetOption(id.handle, abi.RDMA_OPTION_ID, abi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{p.AckTimeout}))
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// resources resolves MaxResources against the device and checks the
// rest against it (librdmacm's ucma_valid_param).
func (id *ID) resources(op string, p *ConnParam, reqInit, reqResp uint8) (initDepth, respRes uint8, err error) {
	if id.ps == PortSpaceUDP {
		return 0, 0, nil // no reads or atomics on UD
	}
	dev, err := id.device(op)
	if err != nil {
		return 0, 0, err
	}
	l, err := contexts.deviceLimits(dev)
	if err != nil {
		return 0, 0, opError(op, id.handle, err)
	}
	initDepth, respRes = min(reqInit, l.maxInitiatorDepth), min(reqResp, l.maxResponderResources)
	if p.InitiatorDepth != MaxResources {
		initDepth = p.InitiatorDepth
	}
	if p.ResponderResources != MaxResources {
		respRes = p.ResponderResources
	}
	if initDepth > l.maxInitiatorDepth || respRes > l.maxResponderResources {
		return 0, 0, opError(op, id.handle, fmt.Errorf("initiator depth %d, responder resources %d: %s allows %d and %d: %w",
			initDepth, respRes, dev.Name, l.maxInitiatorDepth, l.maxResponderResources, errInvalid))
	}
	return initDepth, respRes, nil
}

// Connect starts connecting to the peer of a resolved route
// (rdma_connect). For PortSpaceTCP the result arrives as ESTABLISHED
// (when the ID has a QP from CreateQP: Next moves it to RTS first) or
// CONNECT_RESPONSE (without one: move your QP, then call Establish), or
// as REJECTED, UNREACHABLE or CONNECT_ERROR. For PortSpaceUDP it
// arrives as ESTABLISHED with the peer's UDParam, or REJECTED or
// UNREACHABLE. Private data longer than MaxConnectPrivateData
// (MaxUDConnectPrivateData) is refused before any kernel call.
func (id *ID) Connect(p *ConnParam) error {
	const op = "Connect"
	if err := id.alive(op); err != nil {
		return err
	}
	if p == nil {
		if id.ps == PortSpaceTCP && !id.hasQP() {
			return opError(op, id.handle, fmt.Errorf("an ID without a QP from CreateQP needs a ConnParam with the QP number: %w", errInvalid))
		}
		p = DefaultConnParam()
	}
	if err := id.checkPrivateData(op, p.PrivateData); err != nil {
		return err
	}
	initDepth, respRes, err := id.resources(op, p, MaxResources, MaxResources)
	if err != nil {
		return err
	}
	k, err := id.connParam(op, p, initDepth, respRes)
	if err != nil {
		return err
	}
	if err := id.applyAckTimeout(op, p); err != nil {
		return err
	}
	id.mu.Lock()
	id.initDep, id.respRes = initDepth, respRes
	id.mu.Unlock()
	id.connectFailed.Store(false)
	err = id.file().Connect(id.handle, k)
	if errors.Is(err, sys.ErrConnRefused) {
		// iWARP connects its TCP stream inside the command: a port
		// nobody listens on refuses it here, where InfiniBand and
		// RoCE report a REJECTED event later.
		dst := "the address"
		if a, aerr := id.RemoteAddr(); aerr == nil && a.IsValid() {
			dst = a.String()
		}
		err = &noListenerError{dst: dst, err: err}
	}
	return opError(op, id.handle, err)
}

// Accept accepts the connection request that created the ID
// (rdma_accept). For PortSpaceTCP, an ID with a QP from CreateQP has it
// moved to RTR and RTS first, with the responder resources and
// initiator depth agreed (MaxResources: the lower of the request's and
// the device's); ESTABLISHED follows on the channel when the peer
// completes. For PortSpaceUDP the peer learns the QP number and QKey.
// Private data longer than MaxAcceptPrivateData (MaxUDAcceptPrivateData)
// is refused before any kernel call.
func (id *ID) Accept(p *ConnParam) error {
	const op = "Accept"
	if err := id.alive(op); err != nil {
		return err
	}
	if p == nil {
		if !id.hasQP() {
			return opError(op, id.handle, fmt.Errorf("an ID without a QP from CreateQP needs a ConnParam with the QP number: %w", errInvalid))
		}
		p = DefaultConnParam()
	}
	if err := id.checkPrivateData(op, p.PrivateData); err != nil {
		return err
	}
	id.mu.Lock()
	reqInit, reqResp := id.initDep, id.respRes
	id.mu.Unlock()
	initDepth, respRes, err := id.resources(op, p, reqInit, reqResp)
	if err != nil {
		return err
	}
	k, err := id.connParam(op, p, initDepth, respRes)
	if err != nil {
		return err
	}
	if err := id.applyAckTimeout(op, p); err != nil {
		return err
	}
	if id.qpType != uverbs.QPTypeUD && id.hasQP() {
		if err := id.modifyQPRTR(respRes); err != nil {
			return opError(op, id.handle, err)
		}
		if err := id.modifyQPRTS(initDepth); err != nil {
			return opError(op, id.handle, err)
		}
	}
	if err := id.file().Accept(id.handle, id.uid, k); err != nil {
		id.qpToError()
		return opError(op, id.handle, err)
	}
	return nil
}

// Establish completes the connection of an ID without a QP from
// CreateQP after its CONNECT_RESPONSE, once the caller moved its QP to
// RTS (rdma_establish): the peer then gets ESTABLISHED.
func (id *ID) Establish() error {
	const op = "Establish"
	if err := id.alive(op); err != nil {
		return err
	}
	if id.hasQP() {
		return opError(op, id.handle, fmt.Errorf("the ID has a QP from CreateQP: Next establishes it: %w", errInvalid))
	}
	return opError(op, id.handle, id.file().Accept(id.handle, 0, nil))
}

// Reject refuses the connection request that created the ID
// (rdma_reject): the peer gets REJECTED with reason RejectConsumerDefined
// (for PortSpaceUDP, UNREACHABLE with the SIDR status of a reject; see
// Event.Refused) and the private data, at most MaxRejectPrivateData
// bytes (MaxUDAcceptPrivateData for PortSpaceUDP; longer is refused
// before any kernel call). Close the ID afterwards.
func (id *ID) Reject(privateData []byte) error {
	const op = "Reject"
	if err := id.alive(op); err != nil {
		return err
	}
	if err := id.checkPrivateData(op, privateData); err != nil {
		return err
	}
	return opError(op, id.handle, id.file().Reject(id.handle, 0, privateData))
}

// Disconnect tears the connection down (rdma_disconnect): a QP from
// CreateQP goes to ERR (its outstanding work requests complete with
// flush errors), the peer gets DISCONNECTED, and this side gets it when
// the peer answers, with its own Disconnect or Close, or when the
// InfiniBand CM gives up waiting for that (Status -ETIMEDOUT). An ID
// that got DISCONNECTED first calls Disconnect (or Close) to answer.
func (id *ID) Disconnect() error {
	const op = "Disconnect"
	if err := id.alive(op); err != nil {
		return err
	}
	if err := id.qpShutdown(); err != nil {
		return opError(op, id.handle, err)
	}
	return opError(op, id.handle, id.file().Disconnect(id.handle))
}

// Notify tells the rdma_cm about an asynchronous event of the ID's QP
// (rdma_notify), such as uverbs.EventCommEst when a receive completes on
// the passive side before ESTABLISHED.
func (id *ID) Notify(event uverbs.AsyncEventType) error {
	const op = "Notify"
	if err := id.alive(op); err != nil {
		return err
	}
	return opError(op, id.handle, id.file().Notify(id.handle, uint32(event)))
}

// Migrate moves the ID to another channel (rdma_migrate_id): its pending
// events and all later ones arrive there. Events another goroutine
// already took from the old channel are delivered there before Migrate
// returns. The ID loses its private channel, if it had one.
func (id *ID) Migrate(to *EventChannel) error {
	const op = "Migrate"
	if err := id.alive(op); err != nil {
		return err
	}
	if to == nil || to.owner.Load() != nil {
		return opError(op, id.handle, fmt.Errorf("the target must be a channel from NewEventChannel: %w", errInvalid))
	}
	if to.closed.Load() {
		return opError(op, id.handle, fmt.Errorf("target channel: %w", ErrClosed))
	}
	from := id.ch.Load()
	if from == to {
		return nil
	}
	reported, err := to.f.MigrateID(id.handle, from.f)
	if err != nil {
		return opError(op, id.handle, err)
	}
	id.setChannel(to)
	id.waitEvents(reported)
	to.adoptPending(from.takePending(id))
	id.mu.Lock()
	own := id.own
	if from == own {
		id.own = nil
	}
	id.mu.Unlock()
	if from == own {
		from.owner.Store(nil)
		from.closed.Store(true)
		from.f.Close()
	}
	return nil
}

// Options of SetOption, RDMA_OPTION_ID level.

// SetTOS sets the type of service of the ID's traffic: the IP TOS byte
// on RoCE (RDMA_OPTION_ID_TOS). Set it before resolving the route.
func (id *ID) SetTOS(tos uint8) error {
	return id.setOption("SetTOS", abi.RDMA_OPTION_ID_TOS, []byte{tos})
}

// SetReuseAddr lets the ID bind to an address and port in use
// (RDMA_OPTION_ID_REUSEADDR), like SO_REUSEADDR. Set it before Bind.
func (id *ID) SetReuseAddr(on bool) error {
	return id.setOption("SetReuseAddr", abi.RDMA_OPTION_ID_REUSEADDR, intOption(on))
}

// SetAFOnly makes an ID bound to an IPv6 address take IPv6 only
// (RDMA_OPTION_ID_AFONLY), like IPV6_V6ONLY. Set it before Bind.
func (id *ID) SetAFOnly(on bool) error {
	return id.setOption("SetAFOnly", abi.RDMA_OPTION_ID_AFONLY, intOption(on))
}

// SetAckTimeout sets the QP's local ACK timeout exponent
// (RDMA_OPTION_ID_ACK_TIMEOUT): a packet is sent again after 4.096 µs *
// 2^timeout without an acknowledgement; 0 waits for ever. Set it before
// Connect or Accept. It takes precedence over ConnParam.AckTimeout
// (DefaultConnParam has one); see DefaultConnParam for the trade-off.
func (id *ID) SetAckTimeout(timeout uint8) error {
	const op = "SetAckTimeout"
	if timeout > maxAckTimeout {
		return opError(op, id.handle, fmt.Errorf("timeout %d: at most %d: %w", timeout, maxAckTimeout, errInvalid))
	}
	if err := id.setOption(op, abi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{timeout}); err != nil {
		return err
	}
	id.ackTimeoutSet.Store(true)
	return nil
}

// maxAckTimeout is the largest ACK timeout exponent (5 bits).
const maxAckTimeout = 31

func intOption(on bool) []byte {
	b := make([]byte, 4) // an int: only zero and non-zero matter
	b[0] = boolByte(on)
	return b
}

func (id *ID) setOption(op string, name uint32, val []byte) error {
	if err := id.alive(op); err != nil {
		return err
	}
	return opError(op, id.handle, id.file().SetOption(id.handle, abi.RDMA_OPTION_ID, name, val))
}

// EventsReported is how many events the kernel reported for the ID, as
// DESTROY_ID counted them: 0 before Close.
func (id *ID) EventsReported() int {
	id.mu.Lock()
	defer id.mu.Unlock()
	return int(id.reported)
}

// Close destroys the ID (rdma_destroy_id; rdma_destroy_ep with a QP from
// CreateQP): the kernel drops its pending events, and Close waits until
// any event of the ID another goroutine's Next already took is finished
// with, so that none is delivered afterwards. It then destroys the QP
// and the CQs CreateQP made, releases the shared Context, and closes the
// private channel. Close runs once; later calls return ErrClosed.
func (id *ID) Close() error {
	if !id.closed.CompareAndSwap(false, true) {
		return opError("ID.Close", id.handle, ErrClosed)
	}
	var errs []error
	if err := id.closeCompWaits(); err != nil { // wakes a GetSendComp or GetRecvComp with ErrClosed
		errs = append(errs, opError("ID.Close", id.handle, err))
	}
	ch := id.ch.Load()
	reported, err := ch.f.DestroyID(id.handle)
	if err != nil && !errors.Is(err, ErrClosed) {
		errs = append(errs, opError("ID.Close", id.handle, err))
	}
	if err == nil {
		id.waitEvents(reported)
	}
	idByUID.Delete(id.uid)
	ch.remove(id)
	id.mu.Lock()
	id.reported = reported
	id.mu.Unlock()
	if err := id.destroyQP(); err != nil { // detaches it from the groups first
		errs = append(errs, err)
	}
	if err := id.destroySRQ(); err != nil {
		errs = append(errs, err)
	}
	id.mu.Lock()
	for _, m := range id.mcasts {
		mcByUID.Delete(m.uid)
	}
	id.mcasts = nil
	refs, dev, own := id.refs.take(), id.dev, id.own
	id.mu.Unlock()
	if err := refs.release(dev); err != nil {
		errs = append(errs, err)
	}
	if own != nil {
		own.closed.Store(true)
		if err := own.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newChild creates the ID of an incoming connection (the kernel's
// handle h), on the listener's channel, or on a private channel of its
// own when the listener has one. On failure the new ID is destroyed:
// the peer sees its request time out.
func (l *ID) newChild(ch *EventChannel, h uint32, ev *Event) (*ID, error) {
	child := newID(l.ps, nil)
	child.handle = h
	child.parent = l
	child.initDep, child.respRes = ev.Conn.InitiatorDepth, ev.Conn.ResponderResources
	idByUID.Store(child.uid, child)
	child.setChannel(ch)
	err := func() error {
		if l.own != nil {
			own, err := NewEventChannel()
			if err != nil {
				return err
			}
			if _, err := own.f.MigrateID(h, ch.f); err != nil {
				own.f.Close()
				return err
			}
			own.owner.Store(child)
			child.mu.Lock()
			child.own = own
			child.mu.Unlock()
			child.setChannel(own)
		}
		if err := child.queryAddr(); err != nil {
			return err
		}
		l.mu.Lock()
		tmpl := l.ep.template
		l.mu.Unlock()
		if tmpl != nil {
			if _, err := child.CreateQP(tmpl.PD, tmpl.Config); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		child.Close()
		return nil, err
	}
	return child, nil
}

// errnoStatus turns an error into an event status: -errno.
func errnoStatus(err error) int { return -ucma.ErrnoOf(err) }
