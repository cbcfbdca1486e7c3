package uverbs

import (
	"fmt"

	"github.com/purerdma/rdma/uverbs/internal/rxe"
	"github.com/purerdma/rdma/uverbs/internal/siw"
)

// BreakDoorbell makes the doorbell of qp's send queue fail with EINVAL
// (it names a QP handle that does not exist) until restore is called, so
// tests can see what a failed doorbell leaves behind: rxe's and siw's
// doorbells, an empty POST_SEND. For the package's external tests.
func BreakDoorbell(qp *QP) (restore func()) {
	var err error
	switch q := qp.q.(type) {
	case *rxe.QP:
		restore, err = q.BreakDoorbell()
	case *siw.QP:
		restore, err = q.BreakDoorbell()
	default:
		err = fmt.Errorf("BreakDoorbell: no test hook for %T", q)
	}
	if err != nil {
		panic(err)
	}
	return restore
}

// InlineCovers says whether c's table of registered memory (the one
// providers copy inline data from without a fault net) covers the n
// bytes at addr under lkey.
func InlineCovers(c *Context, lkey uint32, addr uint64, n uint32) bool {
	return c.pc.Spans().Covers(lkey, addr, n)
}
