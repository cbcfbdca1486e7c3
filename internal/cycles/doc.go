// Package cycles reads the processor's free-running counter: the
// time-stamp counter (RDTSC) on x86-64, the virtual counter (CNTVCT_EL0)
// on arm64, and the monotonic clock in nanoseconds elsewhere.
//
// A read costs a few nanoseconds natively and tens under emulation,
// where the kernel's clock source may make time.Now a system call
// costing microseconds. Its rate is not known in advance: a Clock
// measures it against the monotonic clock (for the benchmarks' results,
// and for spin's Waiter).
package cycles
