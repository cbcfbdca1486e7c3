//go:build !race

package evfd

const raceEnabled = false
