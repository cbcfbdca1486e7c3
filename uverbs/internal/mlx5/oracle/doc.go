// Package oracle is the mlx5 differential harness: its tests run
// rdma-core's libibverbs and libmlx5 (Debian's, unmodified) and uverbs
// with its mlx5 provider against the same scripted mlx5_ib device, with
// the same scenarios, and compare everything each says to the device:
// the create commands' driver data, the WQEs written to the queue
// buffers, doorbell records, UAR and BlueFlame writes, and the
// completions each returns for the same CQEs (docs/testing.md, "The
// mlx5 oracle"; docs/providers.md, "Against libmlx5: the oracle").
//
// A scenario is lines of words, run by testdata/driver.c through
// libibverbs and by goside_test.go through uverbs; both print what the
// verbs return in one format:
//
//	open                          open the device
//	pd                            allocate the PD
//	mr LEN                        register LEN bytes (region i, filled with a pattern)
//	cq N                          create a CQ of at least N entries
//	srq MAXWR MAXSGE              create an SRQ
//	qp TYPE SCQ RCQ SRQ|- SWR RWR SSGE RSGE INLINE SIGALL
//	                              create an RC, UC or UD QP
//	rts QP TYPE                   move the QP through INIT and RTR to RTS
//	reset QP                      move the QP to RESET
//	ah DLID SL                    create an address handle on port 1
//	wr OP WRID FLAGS SGES [K=V]   add a send request to the list: OP send,
//	                              send_imm, send_inv, write, write_imm, read,
//	                              cas or faa; FLAGS signaled, fence, solicited,
//	                              inline (comma-separated) or -; SGES
//	                              MR:OFF:LEN,... or -; K raddr=MR:OFF, imm,
//	                              inv, cmp, add, swap, ah, rqpn, qkey
//	postsend QP                   post the list
//	rwr WRID SGES                 add a receive request to the list
//	postrecv QP, postsrq SRQ      post it
//	dev cqe cq=N qp=N op=OP ...   the device writes a CQE (device_test.go)
//	poll CQ N                     poll up to N completions
//	resize CQ N                   resize the CQ
//	arm CQ SOLICITED              request a notification
//	bench QP CQ N KIND            scripts/bench-mlx5's loop
//
// After every post, poll, resize and arm the device records what the
// provider wrote. The package has no code outside its tests.
package oracle
