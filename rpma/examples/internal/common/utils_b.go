package common

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/purerdma/rdma/rpma"
)

// ExitMinus1 ends an example whose C main returns ret ? -1 : 0: 0 on
// success, 255 on any failure (the librpma code is not kept), with the
// error on stderr.
func ExitMinus1(err error) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%v\n", err)
	os.Exit(255)
}

// CloseJoin closes c and joins its error into *errp, for a deferred
// cleanup whose failure C's examples fold into their result
// (ret |= rpma_mr_dereg(...)).
func CloseJoin(errp *error, c io.Closer) {
	*errp = errors.Join(*errp, c.Close())
}

// Strtoul is C's strtoul(s, NULL, 10): leading white space, an
// optional sign, then decimal digits up to the first other byte (none
// reads as 0); a minus negates modulo 2^64. ok is false on overflow,
// where C returns ULONG_MAX with ERANGE.
func Strtoul(s string) (v uint64, ok bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return math.MaxUint64, false
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// StrtoulNoError is strtoul_noerror: Strtoul, exiting as C's exit(-1)
// on overflow.
func StrtoulNoError(s string) uint64 {
	v, ok := Strtoul(s)
	if !ok {
		fmt.Fprintf(os.Stderr, "strtoul(%s) overflowed\n", s)
		os.Exit(255)
	}
	return v
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
