package uverbs

import (
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// BreakDoorbell makes the doorbell of qp's send queue fail with EINVAL
// (it names a QP handle that does not exist) until restore is called, so
// tests can see what a failed doorbell leaves behind. For the package's
// external tests.
func BreakDoorbell(qp *QP) (restore func()) {
	q := qp.q.(*rxeQP)
	good, goodBell := q.db, q.bell
	req := abi.PostSend{QPHandle: ^uint32(0), WQESize: uint32(abi.SizeofSendWR), Response: uint64(sys.PointerTo(q.dbOut))}
	q.db = qp.ctx.fd.CommandBuffer(abi.IB_USER_VERBS_CMD_POST_SEND, abi.Bytes(&req), len(q.dbOut))
	bell, err := qp.ctx.fd.Doorbell(q.db)
	if err != nil {
		panic(err)
	}
	q.bell = bell
	return func() { q.db, q.bell = good, goodBell }
}
