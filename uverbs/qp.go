package uverbs

// QP is a queue pair (ibv_qp). (Being written.)
type QP struct {
	resource
	q qpQueues
}
