package bench

// Cycles reads the processor's time-stamp counter (RDTSC), as perftest's
// get_cycles does on x86-64. A read costs tens of nanoseconds even under
// emulation, where the kernel's clock source may make time.Now a system
// call costing microseconds.
//
//go:noescape
func Cycles() uint64
