//go:build !amd64

package bench

import "time"

var cyclesBase = time.Now()

// Cycles is a monotonic nanosecond count on architectures without a
// cycle counter this package reads.
func Cycles() uint64 { return uint64(time.Since(cyclesBase)) }
