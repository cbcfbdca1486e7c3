package cycles

import "time"

// Clock converts Read readings to time. Its rate is measured against
// the monotonic clock over the run itself, from StartClock to Rate, so it
// needs neither /proc/cpuinfo nor a separate calibration loop (perftest's
// sampling loop fails under emulation with "Correlation coefficient r^2
// < 0.9"). The counter must tick at a constant rate, as the invariant TSC
// of every x86-64 processor of the last decade does.
type Clock struct {
	c0 float64
	t0 time.Time
}

// minClockWindow is the shortest interval a rate is measured over; Rate
// sleeps out the rest.
const minClockWindow = 100 * time.Millisecond

// pair reads the monotonic clock between two cycle counter reads and
// returns it with the counter's midpoint. Of a few tries it keeps the
// tightest bracket: under emulation, or on a busy machine, the thread
// may lose its CPU between the reads, and one such gap would skew the
// rate of a short window by percents.
func pair() (float64, time.Time) {
	var best uint64
	var c float64
	var t time.Time
	for i := 0; i < 8; i++ {
		a := Read()
		now := time.Now()
		b := Read()
		if b < a {
			continue
		}
		if i == 0 || b-a < best {
			best, c, t = b-a, float64(a)+float64(b-a)/2, now
		}
	}
	return c, t
}

// StartClock starts measuring the cycle rate.
func StartClock() Clock {
	c, t := pair()
	return Clock{c0: c, t0: t}
}

// Estimate returns cycles per microsecond since StartClock without
// waiting: good to a few percent after milliseconds, for schedules, not
// for results.
func (c Clock) Estimate() float64 {
	c1, t1 := pair()
	d := t1.Sub(c.t0)
	if d <= 0 || c1 <= c.c0 {
		return 0
	}
	return (c1 - c.c0) / (float64(d) / float64(time.Microsecond))
}

// Rate returns cycles per microsecond since StartClock, waiting until
// the window is at least 100 ms long. It is 0 if the counter did not
// advance.
func (c Clock) Rate() float64 {
	if d := time.Since(c.t0); d < minClockWindow {
		time.Sleep(minClockWindow - d)
	}
	c1, t1 := pair()
	d := t1.Sub(c.t0)
	if d <= 0 || c1 <= c.c0 {
		return 0
	}
	return (c1 - c.c0) / (float64(d) / float64(time.Microsecond))
}
