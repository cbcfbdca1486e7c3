// Package rdmacm is the RDMA connection manager for Go: librdmacm over
// the kernel's ucma ABI (/dev/infiniband/rdma_cm), with neither
// librdmacm nor cgo. It resolves IP addresses to RDMA devices and
// routes, sets up RC connections and UD endpoints the way TCP and UDP
// sockets are set up (bind, listen, connect, accept), carries private
// data in the handshakes, and joins multicast groups. The QPs, CQs and
// memory are package uverbs objects.
//
// # Two ways to drive an ID
//
// An ID's steps are asynchronous in the kernel: a call starts one, and
// its outcome arrives as an Event on the ID's EventChannel. Programs
// with many IDs share one channel and run an event loop over
// EventChannel.Next:
//
//	ch, _ := rdmacm.NewEventChannel()
//	id, _ := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
//	id.ResolveAddr(netip.AddrPort{}, dst, time.Second)
//	for {
//		ev, err := ch.Next(ctx)
//		...
//		switch ev.Type {
//		case rdmacm.EventAddrResolved:
//			ev.ID.ResolveRoute(time.Second)
//		case rdmacm.EventRouteResolved:
//			ev.ID.CreateQP(pd, cfg)
//			ev.ID.Connect(nil)
//		case rdmacm.EventEstablished:
//			...
//		}
//	}
//
// An ID created with a nil channel gets a private one, and then the
// blocking forms (Resolve, ConnectContext, GetRequest, AcceptContext,
// DisconnectContext, JoinMulticastContext) start a step and wait for its
// event, like librdmacm's synchronous mode. CreateEP with GetAddrInfo
// makes such an ID from a host and port in one call; see the example.
//
// Next copies each event out of the kernel and acknowledges it before
// returning it: there is no rdma_ack_cm_event, an Event stays valid, and
// closing an ID never waits for the application. On the way Next does
// what librdmacm does for the ID: it binds it to its device on
// ADDR_RESOLVED, makes the new ID of a CONNECT_REQUEST, completes the
// active side of a connection on CONNECT_RESPONSE, moves the QP to ERR
// on REJECTED, and attaches it to a group on MULTICAST_JOIN.
//
// # QPs and devices
//
// ID.CreateQP creates the ID's QP on the ID's device and moves it
// through its states with the attributes the kernel computes
// (RDMA_USER_CM_CMD_INIT_QP_ATTR, as rdma_init_qp_attr): to INIT at
// once (a UD QP on to RTS), to RTR and RTS when Accept is called or when
// the peer accepts, to ERR on Disconnect. On iWARP the kernel's CM moves
// the QP to RTS itself, and ESTABLISHED records it without a kernel call
// (uverbs.QP.EstablishedByCM: siw strands data that arrives during a
// QP modify). The ID owns that QP and the
// CQs it makes for it, and the SRQ of CreateSRQ. A caller that creates
// and keeps its QP gives it to the ID with AttachQP: the ID drives it
// the same way (adding access rights the CM does not know, such as
// FLUSH's, at each move to INIT) but never destroys it; the rpma
// package's connections work this way. A caller that drives its QP
// itself instead moves it with InitQPAttr, passes its number in
// ConnParam, and on the active side calls Establish after
// CONNECT_RESPONSE. RegMsgs, PostSend, GetRecvComp and the other short
// forms of librdmacm's rdma_verbs.h work on the ID's QP.
//
// The kernel ties an ID to an RDMA device, not to a uverbs file, so the
// PD passed to CreateQP may come from any uverbs.Context of that device
// (ID.Device names it); such a Context is the caller's. For programs
// that do not want to open one, ID.Context and CreateQP with a nil PD
// use a Context this package shares per device: opened on first use,
// held by each ID that used it, closed with everything on it when the
// last of those IDs is closed. Memory registered there must be closed
// before that; objects that outlive the IDs belong on a Context the
// caller opened.
//
// # Dead peers
//
// A peer whose process dies while its kernel lives on disconnects: the
// survivor gets DISCONNECTED. GetSendComp and GetRecvComp watch for it
// while they wait: with the CQ empty and DISCONNECTED on the ID's
// channel they return an error matching ErrDisconnected at once, so a
// program that only waits for completions sees a peer's close (or
// death) without reading events; the event stays for Next. A crashed
// host or a cut link says nothing, and such a program learns of it from
// a send that is never acknowledged: after the retries of
// ConnParam.RetryCount, each ConnParam.AckTimeout long, the work request
// completes with uverbs.WCRetryExcErr. DefaultConnParam's values report
// a dead peer after about 4 s; librdmacm's retry count 7 never does on
// soft-RoCE. docs/reliability.md has the trade-off and measurements.
//
// On iWARP the kernel stops the QP when the connection ends, and siw
// runs nothing posted afterwards: processing an iWARP ID's DISCONNECTED
// (in Next, or in a completion wait) moves its QP to ERR, so later posts
// fail at once, and WaitCompChannel is the wait on a completion channel
// that ends with ErrDisconnected too (rpma waits with it).
//
// # Private data
//
// Connect, Accept and Reject carry private data to the peer's event.
// The InfiniBand CM messages under them have fixed-size fields, so the
// limits are per step and port space (MaxConnectPrivateData and the
// others: 56 bytes for an RC connect, 196 for an accept, 148 for a
// reject, 180 and 136 for UD); longer data is refused before any kernel
// call. The receiving event's PrivateData has the field's full length,
// zero padded: carry the length in the data when it matters.
//
// # Concurrency
//
// IDs and channels are safe for concurrent use. One goroutine waits in
// Next per channel: a second Next fails at once with ErrBusy. Next
// returns when an event arrives, when its ctx ends, or with ErrClosed
// when the channel is closed; no goroutine runs inside the package.
// GetSendComp, GetRecvComp and WaitCompChannel wait for the CQ's
// channel and the ID's DISCONNECTED at once, on the caller's goroutine
// (one waiter per CQ or channel, a second fails with ErrBusy); they take events off an ID's private
// channel only while no Next or blocking step waits there, and then
// only for as long as reading them takes (a Next that comes meanwhile
// waits for that, not ErrBusy), keeping them for Next.
// Close on an ID waits only for an event of that ID that another
// goroutine's Next is still processing, never for the application.
//
// Errors name the operation, as spelled in Go, and the ID ("rdmacm
// Connect (id 3): rdma_cm CONNECT: ..."; a blocking call's wait:
// "rdmacm ConnectContext: REJECTED ..."), and wrap the kernel's errno,
// so errors.Is works with syscall errnos and with ErrClosed, ErrBusy,
// ErrRejected, ErrNoListener, ErrDisconnected and ErrNotSupported. Bad
// input fails with EINVAL before any kernel call. A connect to a port nothing
// listens on matches ErrNoListener on every transport, whether the
// refusal came as a REJECTED event (InfiniBand, RoCE) or from the
// CONNECT command itself (iWARP, whose CM connects TCP there).
// A blocking resolution that fails names the address, the step and the
// timer that fired, or says that the address has no RDMA device
// ([ID.ResolveAddrContext]).
package rdmacm
