package uverbs

// SRQ is a shared receive queue (ibv_srq). (Being written.)
type SRQ struct {
	resource
	q srqQueue
}
