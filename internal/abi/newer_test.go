//go:build amd64 || arm64

package abi

import (
	"reflect"
	"testing"

	"github.com/purerdma/rdma/internal/cmd/genabi/cdwarf"
)

// newerConstants are the constants of newer.go.
var newerConstants = []cConstant{
	{"IB_UVERBS_WR_FLUSH", IB_UVERBS_WR_FLUSH, false},
	{"IB_UVERBS_WR_ATOMIC_WRITE", IB_UVERBS_WR_ATOMIC_WRITE, false},
	{"IB_UVERBS_WC_FLUSH", IB_UVERBS_WC_FLUSH, false},
	{"IB_UVERBS_WC_ATOMIC_WRITE", IB_UVERBS_WC_ATOMIC_WRITE, false},
	{"IB_UVERBS_DEVICE_FLUSH_GLOBAL", IB_UVERBS_DEVICE_FLUSH_GLOBAL, false},
	{"IB_UVERBS_DEVICE_FLUSH_PERSISTENT", IB_UVERBS_DEVICE_FLUSH_PERSISTENT, false},
	{"IB_UVERBS_DEVICE_ATOMIC_WRITE", IB_UVERBS_DEVICE_ATOMIC_WRITE, false},
	{"IB_UVERBS_ACCESS_FLUSH_GLOBAL", IB_UVERBS_ACCESS_FLUSH_GLOBAL, false},
	{"IB_UVERBS_ACCESS_FLUSH_PERSISTENT", IB_UVERBS_ACCESS_FLUSH_PERSISTENT, false},
	{"IB_FLUSH_GLOBAL", IB_FLUSH_GLOBAL, false},
	{"IB_FLUSH_PERSISTENT", IB_FLUSH_PERSISTENT, false},
	{"IB_FLUSH_RANGE", IB_FLUSH_RANGE, false},
	{"IB_FLUSH_MR", IB_FLUSH_MR, false},
}

// TestNewerConstants checks newer.go against the headers of this machine
// for every name they define; a name they lack (older headers) is fine.
func TestNewerConstants(t *testing.T) {
	_, vals, rejected := probe(t)
	for _, c := range newerConstants {
		if rejected[c.Name] {
			t.Logf("%s: not in the headers of this machine", c.Name)
			continue
		}
		want := vals[c.Name]
		if got := (cdwarf.Value{Abs: c.Value, Neg: c.Neg}); got != want {
			t.Errorf("%s = %v in newer.go, %v in the headers", c.Name, got, want)
		}
	}
}

// TestNewerLayout checks the hand-written rxe FLUSH and ATOMIC WRITE
// layout against the headers when they have it, and that the union it
// goes in is large enough either way.
func TestNewerLayout(t *testing.T) {
	prog, _, _ := probe(t)
	if reflect.TypeFor[RXESendWRWRFlush]().Size() > reflect.TypeFor[RXESendWRWR]().Size() {
		t.Errorf("RXESendWRWRFlush does not fit in RXESendWRWR")
	}
	var u RXESendWRWR
	if f := u.Flush(); reflect.ValueOf(f).Pointer() != reflect.ValueOf(&u).Pointer() {
		t.Errorf("Flush does not point at the union")
	}
	if _, _, err := prog.Lookup("struct rxe_send_wr.wr.flush"); err != nil {
		t.Logf("the headers of this machine have no rxe flush: %v", err)
	} else {
		checkType(t, cType{
			C: "struct rxe_send_wr.wr.flush", Go: reflect.TypeFor[RXESendWRWRFlush](), Kind: cStruct,
			Fields: []cField{{"RemoteAddr", "remote_addr"}, {"Length", "length"}, {"RKey", "rkey"}, {"Type", "type"}, {"Level", "level"}},
		}, prog, nil)
	}
	info, _, err := prog.Lookup("struct rxe_dma_info")
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := findMember(info, "atomic_wr", 0); ok {
		if off != OffsetofRXEDMAInfoAtomicWR {
			t.Errorf("OffsetofRXEDMAInfoAtomicWR = %d, C offset %d", OffsetofRXEDMAInfoAtomicWR, off)
		}
	} else {
		t.Logf("the headers of this machine have no rxe atomic_wr")
	}
}

// findMember looks for a member by name in t and its anonymous members,
// and returns its offset from t plus base.
func findMember(t *cdwarf.Type, name string, base int64) (int64, bool) {
	for _, m := range elemType(t).Members {
		if m.Name == name {
			return base + m.Offset, true
		}
		if m.Name == "" {
			if off, ok := findMember(m.Type, name, base+m.Offset); ok {
				return off, true
			}
		}
	}
	return 0, false
}
