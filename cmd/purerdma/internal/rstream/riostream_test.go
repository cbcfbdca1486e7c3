package rstream

import (
	"strings"
	"testing"
)

// TestRiostreamArgs: riostream takes rstream's command line without -k
// and without rstream's -T s, r and f, and says which tool refused.
func TestRiostreamArgs(t *testing.T) {
	o, err := parseStreamArgs("riostream", []string{"-s", "198.18.0.1", "-S", "4096", "-C", "10", "-T", "v", "-T", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.io || !o.custom || o.size != 4096 || o.count != 10 || !o.verify || !o.block || o.tool != "riostream" {
		t.Errorf("options %+v", o)
	}
	for _, bad := range [][]string{{"-k", "5"}, {"-T", "s"}, {"-T", "socket"}, {"-T", "r"}, {"-T", "f"}} {
		_, err := parseStreamArgs("riostream", bad)
		if err == nil || !strings.Contains(err.Error(), "riostream: ") {
			t.Errorf("riostream %v: %v; want an error naming riostream", bad, err)
		}
	}
	if _, err := parseStreamArgs("rstream", []string{"-k", "5", "-T", "s"}); err != nil {
		t.Errorf("rstream -k 5 -T s: %v", err)
	}
}
