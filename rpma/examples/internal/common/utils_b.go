package common

import (
	"errors"
	"io"

	"github.com/purerdma/rdma/rpma"
)

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
