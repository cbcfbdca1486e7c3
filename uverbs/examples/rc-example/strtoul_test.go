package main

import (
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// TestStrtoul: the values glibc's strtoul(s, NULL, 0) gives on x86-64.
func TestStrtoul(t *testing.T) {
	for s, want := range map[string]uint64{
		"19875": 19875, "0x10": 16, "010": 8, "0": 0, "": 0, "abc": 0, "12ab": 12, " +7": 7,
		"-1": ^uint64(0), "0x": 0, "99999999999999999999": ^uint64(0), "0X1f": 31,
	} {
		if got := strtoul(s); got != want {
			t.Errorf("strtoul(%q) = %d, want %d", s, got, want)
		}
	}
}
