package common

import (
	"context"
	"errors"
	"io"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// WaitForWC waits on cq's own channel for the next completion and
// takes it, whatever its status and opcode (rpma_cq_wait and
// rpma_cq_get_wc, for examples that check the completion themselves).
func WaitForWC(ctx context.Context, cq *rpma.CQ, wc *uverbs.WorkCompletion) error {
	for {
		one := sliceOf(wc)
		n, err := cq.GetWC(one)
		if n == 1 {
			*wc = one[0]
			return nil
		}
		if !errors.Is(err, rpma.ErrNoCompletion) {
			return err
		}
		if err := cq.Wait(ctx); err != nil {
			return err
		}
	}
}

// ExitMinus1 ends an example whose C main returns ret ? -1 : 0: 0 on
// success, 255 on any failure (the librpma code is not kept), with the
// error on stderr.
func ExitMinus1(err error) { ExitStatus(err, -1) }

// CloseJoin closes c and joins its error into *errp, for a deferred
// cleanup whose failure C's examples fold into their result
// (ret |= rpma_mr_dereg(...)).
func CloseJoin(errp *error, c io.Closer) {
	*errp = errors.Join(*errp, c.Close())
}

// Atoi is C's atoi: Strtoul's parsing, as a signed int (0 when there
// are no digits).
func Atoi(s string) int {
	v, _ := Strtoul(s)
	return int(int32(v))
}

// OpContext is the op context C's examples give an operation on mr at
// offset: the address of the buffer (a pointer cast to a void *), so a
// completion's WRID tells which buffer it filled.
func OpContext(mr *rpma.MR, offset int) uint64 {
	return mr.Verbs().Addr() + uint64(offset)
}
