// Package uverbs is the verbs API of RDMA over the kernel's raw uverbs
// ABI on /dev/infiniband/uverbsN: the Go equivalent of libibverbs and its
// providers, with no C library underneath.
//
// # Objects
//
// [Devices] lists the devices (sysfs); [Device.Open] returns a [Context],
// the expensive thing to share between goroutines. On it:
//
//   - queries: [Context.QueryDevice] (with flush and atomic-write
//     capability detection), [Context.QueryPort], [Context.GIDTable],
//     [Context.QueryPKey]; the GID to send from: [Context.RoCEv2GIDIndex]
//     of an address, [Context.RoCEv2GID] of a port or network device;
//   - [PD] protection domains, [MR] memory regions on Go memory or on
//     [Buffer]s that never move, [MW] memory windows, [AH] address
//     handles (also from a received completion: [PD.CreateAHFromWC]);
//   - [CQ] completion queues and [CompChannel] completion channels whose
//     [CompChannel.Wait] blocks through the runtime poller;
//     [CQ.PollContext] polls and, with nothing there, arms the CQ and
//     waits on its channel, with a context;
//   - [QP] queue pairs (RC, UC, UD) with the full state machine
//     ([QP.Modify] checks transitions against the IB spec first; for RC,
//     [QP.ConnectRC] makes the three moves to a peer's {QP number, PSN,
//     GID or LID} with defaults), [SRQ] shared receive queues,
//     multicast attach and detach;
//   - [Context.AsyncEvent] for port, QP, CQ and SRQ events;
//   - [TD] thread domains, which turn off internal locking for objects a
//     single goroutine owns.
//
// # GIDs
//
// A global address (AHAttr.IsGlobal, GlobalRoute) names the local GID
// to send from by its index in the port's GID table, SGIDIndex, and
// the peer by its GID, DGID. On RoCE every address is global, and a
// GID is an IP address of the port's network device: one entry per
// address and RoCE version, so the same address may sit at two indexes
// (RoCE v1 and v2; rxe has v2 only). Choose a RoCE v2 entry (UDP/IP,
// routable, what rdma_cm uses) of the address family the peer uses: its
// IPv4 address as ::ffff:a.b.c.d for an IPv4 peer, an IPv6 one for an
// IPv6 peer, link-local only for a peer on the same link. Index 0 is
// rarely it: there the port's IPv6 link-local GID sits, and on devices
// with RoCE v1 that one's v1 entry. [Context.RoCEv2GIDIndex] gives the
// index of an address, [Context.RoCEv2GID] the entry a program that
// was given a device (and perhaps a network device) rather than an
// address would pick (its IPv4 address first), and [Context.GIDTable]
// lists them all with their types and network devices. Tell the peer
// the entry's GID (with the QP number and PSN); [QP.ConnectRC] picks
// the matching local entry itself unless told an index. The table
// changes with the network device's addresses (the async event
// EventGIDChange says so), so look an index up when connecting rather
// than once at start-up. InfiniBand ports address peers by LID, and a GID
// (index 0 is the port GUID's) only to route between subnets.
//
// # Fast path
//
// For soft-RoCE (rxe) the queues are rings mapped from the kernel:
// [CQ.Poll] makes no system call, [QP.PostRecv] and [SRQ.PostRecv] none,
// [QP.PostSend] one (the doorbell), and none of them allocates. A full
// queue returns an error matching [ErrBusy] at once. Devices of other
// drivers keep the control path; their queues report [ErrNotSupported].
//
// # Errors and lifetimes
//
// Errors wrap the kernel's errno and name the operation, so both
// errors.Is(err, syscall.EINVAL) and errors.Is(err, ErrNotSupported) work.
// The text starts with "uverbs" and the method called, as spelled in Go
// (Type.Method where the bare name is ambiguous), then the cause, with
// the kernel command that failed, if one did: "uverbs CreateQP:
// QP_CREATE: invalid argument", "uverbs QueryPort rxe0/1: ...",
// "uverbs PostSend: QP in INIT, sends are taken from RTS on: invalid
// argument". A call made inside another is named in the cause
// ("uverbs ConnectRC: QueryPort rxe0/2: ...").
// Where the errno alone would leave one guessing, the message says why: a
// registration refused for the locked-memory limit names RLIMIT_MEMLOCK,
// the limit, the bytes asked and how to raise the limit ([PD.RegMR]); an
// address without the GRH a RoCE port requires is refused before the
// kernel call, naming the fields to set ([QP.Modify], [PD.CreateAH]).
// Every object is closed exactly once; Close refuses (EBUSY) while other
// objects depend on it, and [Context.Close] destroys whatever is left,
// dependents first. See docs/threading.md for what is safe to share.
package uverbs
