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
//     [Context.QueryPKey];
//   - [PD] protection domains, [MR] memory regions on Go memory or on
//     [Buffer]s that never move, [MW] memory windows, [AH] address
//     handles (also from a received completion: [PD.CreateAHFromWC]);
//   - [CQ] completion queues and [CompChannel] completion channels whose
//     [CompChannel.Wait] blocks through the runtime poller;
//   - [QP] queue pairs (RC, UC, UD) with the full state machine
//     ([QP.Modify] checks transitions against the IB spec first), [SRQ]
//     shared receive queues, multicast attach and detach;
//   - [Context.AsyncEvent] for port, QP, CQ and SRQ events;
//   - [TD] thread domains, which turn off internal locking for objects a
//     single goroutine owns.
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
// errors.Is(err, unix.EINVAL) and errors.Is(err, ErrNotSupported) work.
// Every object is closed exactly once; Close refuses (EBUSY) while other
// objects depend on it, and [Context.Close] destroys whatever is left,
// dependents first. See docs/threading.md for what is safe to share.
package uverbs
