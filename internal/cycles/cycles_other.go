//go:build !amd64 && !arm64

package cycles

import "time"

var base = time.Now()

// Read returns monotonic nanoseconds on architectures without a counter
// this package reads.
func Read() uint64 { return uint64(time.Since(base)) }
