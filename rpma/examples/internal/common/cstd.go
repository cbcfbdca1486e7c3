package common

import (
	"fmt"
	"os"
)

// Strtoul reads a decimal number as C's strtoul does: leading spaces,
// an optional sign (a minus negates modulo 2^64), the digits up to the
// first other character; none is 0. overflow is C's ERANGE.
func Strtoul(s string) (v uint64, overflow bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (^uint64(0)-d)/10 {
			return ^uint64(0), true
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, false
}

// StrtoulNoError is Strtoul that exits as strtoul_noerror does on
// overflow.
func StrtoulNoError(s string) uint64 {
	v, overflow := Strtoul(s)
	if overflow {
		fmt.Fprintf(os.Stderr, "strtoul(%s) overflowed\n", s)
		os.Exit(255)
	}
	return v
}

// CRand is glibc's srand and rand (the additive feedback generator
// random(3) describes, with its default 31 words of state), so that an
// example picks what its C original picks for the same seed.
type CRand struct {
	r    [34]int32 // the last 34 values, a ring
	next int       // the index of the next value in r
}

// NewCRand is srand(seed).
func NewCRand(seed uint32) *CRand {
	if seed == 0 {
		seed = 1
	}
	c := &CRand{}
	var r [344]int32
	r[0] = int32(seed)
	for i := 1; i < 31; i++ {
		// 16807 * r[i-1] % (2^31 - 1), by Schrage's method, as glibc.
		w := int64(r[i-1])
		hi, lo := w/127773, w%127773
		w = 16807*lo - 2836*hi
		if w < 0 {
			w += 2147483647
		}
		r[i] = int32(w)
	}
	for i := 31; i < 34; i++ {
		r[i] = r[i-31]
	}
	// glibc throws the first 310 outputs away.
	for i := 34; i < 344; i++ {
		r[i] = int32(uint32(r[i-31]) + uint32(r[i-3]))
	}
	copy(c.r[:], r[344-34:])
	return c
}

// Rand is rand(): 0 to 2^31-1.
func (c *CRand) Rand() int32 {
	n := len(c.r)
	v := int32(uint32(c.r[(c.next+n-31)%n]) + uint32(c.r[(c.next+n-3)%n]))
	c.r[c.next] = v
	c.next = (c.next + 1) % n
	return int32(uint32(v) >> 1)
}

// ExitStatus ends an example whose C main turns every failure into one
// status (return ret ? -1 : 0, or -2): 0 on success, else the error on
// standard error and status, truncated to a byte as the kernel does.
func ExitStatus(err error, status int) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%v\n", err)
	os.Exit(int(uint8(status)))
}
