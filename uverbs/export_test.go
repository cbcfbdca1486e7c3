package uverbs

import "github.com/purerdma/rdma/uverbs/internal/rxe"

// BreakDoorbell makes the doorbell of qp's send queue fail with EINVAL
// (it names a QP handle that does not exist) until restore is called, so
// tests can see what a failed doorbell leaves behind. For the package's
// external tests.
func BreakDoorbell(qp *QP) (restore func()) {
	restore, err := qp.q.(*rxe.QP).BreakDoorbell()
	if err != nil {
		panic(err)
	}
	return restore
}
