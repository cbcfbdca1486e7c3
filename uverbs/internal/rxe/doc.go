// Package rxe is the provider of soft-RoCE devices (the kernel's rdma_rxe
// driver; rdma-core's providers/rxe) in pure Go, behind uverbs' provider
// interface (uverbs/internal/provider).
//
// The kernel allocates every queue and maps it into the process (struct
// rxe_queue_buf: producer and consumer indices, then the slots). The
// provider maps each ring from the mmap offset in the create command's
// driver response and checks its header against the mapping; a send WQE
// is the kernel's struct rxe_send_wqe, written in place; the send
// queue's doorbell is a POST_SEND write with no work requests, which
// makes the kernel's requester read the ring; completions are struct
// ib_uverbs_wc in the CQ's ring. Posting and polling make no system
// call but the doorbell and allocate nothing.
//
// uverbs calls QP.PostSend directly, and runs CQ.Poll's loop itself for
// a CQ with a thread domain (from CQ.Hdr, CQ.WCs, CopyWC and SawErrors):
// a call and a dispatch less on the fast path (docs/performance.md).
package rxe
