// Package mlx5 is the provider of mlx5 devices (NVIDIA/Mellanox
// ConnectX) in pure Go, libmlx5's counterpart.
//
// Provider (provider.go, mem.go) is its half of uverbs' provider
// interface: GET_CONTEXT's driver data, dynamic UARs, queue buffers and
// doorbell records allocated before the create commands that name them,
// the create commands' driver data, and the fast-path queues that turn
// uverbs' work requests into WQEs and CQEs into completions.
//
// The rest of the package is the device formats: queue sizing as libmlx5
// computes it, the send and receive work queue entries, the doorbell
// records and UAR / BlueFlame doorbells, and the 64-byte completion queue
// entries. They make no system calls and allocate nothing on the post
// and poll paths; Provider does the kernel commands and owns the memory.
//
// # What each type needs from the provider
//
// Sizing comes first, before any create command, from the caps asked for
// and the GET_CONTEXT response (Limits: max_sq_desc_sz, max_rq_desc_sz,
// max_send_wqebb, max_recv_wr, max_srq_recv_wr):
//
//   - SQSize, RQSize, QPBuffer: the QP buffer (RQ at 0, SQ after it,
//     rounded to the page) whose address is buf_addr of CREATE_QP, with
//     sq_wqe_count = SQSizing.WQECnt, rq_wqe_count = RQSizing.WQECnt,
//     rq_wqe_shift = RQSizing.WQEShift; report SQSizing.MaxPost,
//     MaxInline and RQSizing.MaxPost, MaxGS as the QP's caps.
//   - SRQSize: the SRQ buffer; CREATE_SRQ passes max_wr = SRQSizing.MaxWR
//     and max_sge = SRQSizing.MaxGS.
//   - CQSize: the CQ buffer (InitCQBuffer it) and cqe = CQSizing.KernCQE,
//     cqe_size = CQSizing.CQESize.
//
// CreateQPData, CreateCQData and CreateSRQData fill the commands' driver
// data (internal/abi's MLX5CreateQP, MLX5CreateCQ, MLX5CreateSRQ) from
// the sizings, the buffer and record addresses, the user index and the UAR
// page id.
//
// Buffers must be page-aligned, zeroed memory outside the Go heap (mmap'd,
// pinned by the kernel), as must the doorbell records: 8 bytes per QP or
// CQ, 4 per SRQ, each in its own 64-byte line of a doorbell page whose
// address is db_addr. The UAR page is the mapping of the context's UAR
// (mmap of the uverbs fd); a QP's BlueFlame register is bf_reg_size bytes
// at 0x800 + k*bf_reg_size of it (NewBlueFlame), a CQ arms through the
// page's offset 0x20.
//
//   - SQ (NewSQ): the SQ slice of the QP buffer, SQSizing, the QPN from
//     CREATE_QP, the QP type, the QP's doorbell record, its BlueFlame.
//   - RQ (NewRQ): the RQ slice, RQSizing, the same doorbell record.
//   - SRQ (NewSRQ): its buffer, SRQSizing, its doorbell record.
//   - CQ (NewCQ): its buffer, CQSizing, the CQN, its doorbell record, the
//     UAR page for Arm.
//   - Writer: Device{} (the mmio package's stores and barriers); tests
//     substitute one that records the order of the stores.
//
// # How post and poll map to it
//
// post_send: for each work request SQ.Begin(opcode, fence/signaled/
// solicited bits, imm) (ErrBusy at once when the SQ is full), then
// RemoteAddr (RDMA and atomics), Atomic, Datagram (UD, with the AH's AV
// from RoCEAV or IBAV), Data per gather entry or Inline, then Finish(wr_id);
// after the list, SQ.Ring. A failing segment call leaves the work request
// unfinished: Abort it (or Begin again); nothing reaches the device until
// Ring. The common requests are also built whole in one call (PutPlain,
// PutAtomic, PutInline, then Ring), and a single plain, atomic or
// inline one with nothing pending is built and rung at once when
// SQ.RingNow says so (PutPlainRing, PutAtomicRing, PutInlineRing:
// Ring's order, without Ring). post_recv:
// RQ.Begin / Data / Finish(wr_id) per request, then
// RQ.Ring; the same on an SRQ.
//
// poll_cq: CQ.Poll(&cqe) until it reports no CQE, then CQ.UpdateCI. For
// each CQE look up the QP by cqe.QPN (or the user index in SRQNUIdx with
// CQE version 1); a requester CQE (cqe.Requester()) gives its wr_id with
// SQ.Complete(cqe.WQECounter), which also retires the unsignaled work
// requests before it; a receive CQE with RQ.Complete, or SRQ.Complete when
// the QP is on an SRQ (SRQNUIdx is the SRQ number with CQE version 0).
// Status is the ibv_wc_status number, WCOpcode the ibv_wc_opcode.
// req_notify_cq: CQ.Arm(solicitedOnly); on each completion event read from
// the channel, CQ.Event. QP to RESET or destroyed: CQ.Clean on its
// receive CQ (with its SRQ) and send CQ drops its unpolled CQEs, then
// SQ.Reset and RQ.Reset.
//
// Every type is single-threaded: the provider holds the queue's lock, as
// libmlx5 does.
//
// The facts come from rdma-core's providers/mlx5 (verbs.c, qp.c, cq.c,
// srq.c; function names are cited where each rule is applied) and
// Debian's infiniband/mlx5dv.h.
package mlx5
