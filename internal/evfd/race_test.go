//go:build race

package evfd

// The race detector's instrumentation allocates: allocation counts are
// checked without it.
const raceEnabled = true
