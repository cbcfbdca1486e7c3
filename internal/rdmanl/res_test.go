package rdmanl

import (
	"bytes"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/netlink"
)

func TestResRequestBytes(t *testing.T) {
	littleEndian(t)
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"RES_GET", resGetRequest(5, 2), []byte{
			// len 24, type 5<<10|9 = 0x1409, flags REQUEST|ACK, seq 5
			24, 0, 0, 0, 0x09, 0x14, 0x05, 0x00, 5, 0, 0, 0, 0, 0, 0, 0,
			8, 0, 1, 0, 2, 0, 0, 0, // DEV_INDEX 2
		}},
		{"RES_QP_GET dump", resDumpRequest(6, cmdResQPGet, 1), []byte{
			// type 0x140a, flags REQUEST|ROOT|MATCH
			24, 0, 0, 0, 0x0a, 0x14, 0x01, 0x03, 6, 0, 0, 0, 0, 0, 0, 0,
			8, 0, 1, 0, 1, 0, 0, 0,
		}},
		{"STAT_GET", statGetRequest(7, 1, 1), []byte{
			// len 32, type 0x1411, flags REQUEST|ACK
			32, 0, 0, 0, 0x11, 0x14, 0x05, 0x00, 7, 0, 0, 0, 0, 0, 0, 0,
			8, 0, 1, 0, 1, 0, 0, 0, // DEV_INDEX 1
			8, 0, 3, 0, 1, 0, 0, 0, // PORT_INDEX 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("request bytes (-want +got):\n%s", diff)
			}
		})
	}
}

// rpingQPs is a RES_QP_GET reply laid out as 6.12 sends rxe0's table
// while rping runs (values from "rdma -j res show qp" in the test VM):
// a user RC QP and the kernel's GSI QP, written attribute by attribute
// with the kernel's nesting, not with EncodeRes.
func rpingQPs() []byte {
	rc := new(attrList).u32(attrPortIndex, 1).u32(uint16(AttrLQPN), 17).u32(uint16(AttrRQPN), 17).
		u32(uint16(AttrRQPSN), 4124860).u32(uint16(AttrSQPSN), 8379976).u8(uint16(AttrPathMigState), 0).
		u8(uint16(AttrType), 2).u8(uint16(AttrState), 3).u32(uint16(AttrPID), 251).u32(uint16(AttrPDN), 2).bytes()
	gsi := new(attrList).u32(attrPortIndex, 1).u32(uint16(AttrLQPN), 1).u32(uint16(AttrSQPSN), 1).
		u8(uint16(AttrType), 1).u8(uint16(AttrState), 3).str(uint16(AttrKernName), "ib_core").
		raw(uint16(52) /* DRIVER */, nil).bytes()
	table := new(attrList).raw(uint16(attrResQPEntry)|0x8000, rc).raw(uint16(attrResQPEntry)|0x8000, gsi).bytes()
	return new(attrList).u32(attrDevIndex, 0).str(attrDevName, "rxe0").raw(uint16(attrResQP)|0x8000, table).bytes()
}

func TestParseRes(t *testing.T) {
	littleEndian(t)
	r, err := parseRes(rpingQPs(), ResQP)
	if err != nil {
		t.Fatal(err)
	}
	rc := ResAttrs{Port: 1, LQPN: 17, RQPN: 17, RQPSN: 4124860, SQPSN: 8379976, Type: 2, State: 3, PID: 251, PDN: 2}
	rc.SetAttr(AttrPortIndex, AttrLQPN, AttrRQPN, AttrRQPSN, AttrSQPSN, AttrPathMigState, AttrType, AttrState, AttrPID, AttrPDN)
	gsi := ResAttrs{Port: 1, LQPN: 1, SQPSN: 1, Type: 1, State: 3, KernName: "ib_core"}
	gsi.SetAttr(AttrPortIndex, AttrLQPN, AttrSQPSN, AttrType, AttrState, AttrKernName)
	want := Res{DevIndex: 0, DevName: "rxe0", Entries: []ResAttrs{rc, gsi}}
	if diff := cmp.Diff(want, r, cmp.Comparer(func(a, b ResAttrs) bool { return a == b })); diff != "" {
		t.Errorf("parseRes (-want +got):\n%s", diff)
	}
	if r.Entries[1].Has(AttrPID) || !r.Entries[0].Has(AttrPathMigState) {
		t.Errorf("Has: PID on the kernel's QP %v, path-mig-state on the user's %v", r.Entries[1].Has(AttrPID), r.Entries[0].Has(AttrPathMigState))
	}
	// The table of another kind is not this one.
	if other, err := parseRes(rpingQPs(), ResCQ); err != nil || len(other.Entries) != 0 {
		t.Errorf("a QP table read as CQs: %+v, %v", other, err)
	}
}

func TestParseCMIDAddrs(t *testing.T) {
	littleEndian(t)
	src := netip.MustParseAddrPort("198.18.0.1:7174")
	dst := netip.MustParseAddrPort("[fd00:198:18::2]:55373")
	line := new(attrList).u8(uint16(AttrState), 8).u32(uint16(AttrPS), 0x106).
		raw(uint16(AttrSrcAddr), appendSockaddr(nil, src)).raw(uint16(AttrDstAddr), appendSockaddr(nil, dst)).bytes()
	attrs, err := netlink.ParseAttrs(line)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseResLine(attrs)
	if err != nil {
		t.Fatal(err)
	}
	if r.SrcAddr != src || r.DstAddr != dst || !r.Has(AttrSrcAddr) || !r.Has(AttrDstAddr) {
		t.Errorf("addresses %v %v, want %v %v", r.SrcAddr, r.DstAddr, src, dst)
	}
	// An AF_IB address (27) is no address rdma prints: absent.
	ib := make([]byte, 128)
	ib[0] = 27
	attrs, _ = netlink.ParseAttrs(new(attrList).raw(uint16(AttrSrcAddr), ib).bytes())
	if r, err := parseResLine(attrs); err != nil || r.Has(AttrSrcAddr) {
		t.Errorf("AF_IB source: %+v, %v", r, err)
	}
}

func TestParseSummaryAndStat(t *testing.T) {
	littleEndian(t)
	entry := func(name string, n uint64) []byte {
		return new(attrList).str(uint16(attrResSummaryName), name).u64(uint16(attrResSummaryCurr), n).bytes()
	}
	table := new(attrList).raw(uint16(attrResSummaryEntry), entry("pd", 3)).raw(uint16(attrResSummaryEntry), entry("qp", 2)).bytes()
	b := new(attrList).u32(attrDevIndex, 1).str(attrDevName, "rxe1").raw(uint16(attrResSummary), table).bytes()
	s, err := parseSummary(b)
	want := Summary{DevIndex: 1, DevName: "rxe1", Entries: []SummaryEntry{{"pd", 3}, {"qp", 2}}}
	if err != nil || !cmp.Equal(want, s) {
		t.Errorf("parseSummary = %+v, %v; want %+v", s, err, want)
	}

	ctr := func(name string, v uint64) []byte {
		return new(attrList).str(uint16(attrStatHWCounterName), name).u64(uint16(attrStatHWCounterValue), v).bytes()
	}
	hw := new(attrList).raw(uint16(attrStatHWCounterEntry), ctr("sent_pkts", 5283)).
		raw(uint16(attrStatHWCounterEntry), ctr("rdma_recvs", 1763)).bytes()
	b = new(attrList).u32(attrDevIndex, 0).str(attrDevName, "rxe0").u32(attrPortIndex, 1).
		u32(74 /* STAT_MODE */, 0).raw(uint16(attrStatHWCounters), hw).bytes()
	st, err := parseStat(b)
	wantSt := PortStats{DevName: "rxe0", Port: 1, Counters: []Counter{{"sent_pkts", 5283}, {"rdma_recvs", 1763}}}
	if err != nil || !cmp.Equal(wantSt, st) {
		t.Errorf("parseStat = %+v, %v; want %+v", st, err, wantSt)
	}
	// A counter value of the wrong size is an error, not a zero.
	bad := new(attrList).raw(uint16(attrStatHWCounterEntry),
		new(attrList).str(uint16(attrStatHWCounterName), "x").u32(uint16(attrStatHWCounterValue), 1).bytes()).bytes()
	if _, err := parseStat(new(attrList).raw(uint16(attrStatHWCounters), bad).bytes()); err == nil {
		t.Error("parseStat took a 4-byte counter")
	}
}

func TestRefused(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&OpError{Op: "STAT_GET", Err: syscall.EINVAL, Kernel: true}, true},
		{&OpError{Op: "STAT_GET", Err: syscall.EOPNOTSUPP, Kernel: true}, true},
		{&OpError{Op: "STAT_GET", Err: syscall.EINVAL}, false}, // not the kernel's answer
		{&OpError{Op: "STAT_GET", Err: syscall.EPERM, Kernel: true}, false},
		{errors.New("x"), false},
	} {
		if got := Refused(tt.err); got != tt.want {
			t.Errorf("Refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// FuzzParseRes: the resource, summary and statistics decoders take any
// bytes without panicking, under every table kind; what they decode
// encodes (EncodeRes, EncodeSummary, EncodeStat, the kernel's layout)
// to bytes that decode to the same again.
func FuzzParseRes(f *testing.F) {
	f.Add(rpingQPs())
	f.Add(EncodeRes(ResCMID, Res{DevName: "rxe0", Entries: []ResAttrs{func() ResAttrs {
		r := ResAttrs{State: 8, PS: 0x106, SrcAddr: netip.MustParseAddrPort("198.18.0.1:7174")}
		r.SetAttr(AttrState, AttrPS, AttrSrcAddr)
		return r
	}()}}))
	f.Add(EncodeSummary(Summary{DevIndex: 1, DevName: "rxe1", Entries: []SummaryEntry{{"pd", 3}}}))
	f.Add(EncodeStat(PortStats{DevName: "rxe0", Port: 1, Counters: []Counter{{"sent_pkts", 9}}}))
	f.Add([]byte{8, 0, byte(attrResQP), 0, 4, 0, byte(attrResQPEntry), 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		opts := cmp.Comparer(func(a, b ResAttrs) bool { return a == b })
		for k := range resTables {
			r, err := parseRes(b, k)
			if err != nil {
				continue
			}
			again, err := parseRes(EncodeRes(k, r), k)
			if err != nil {
				t.Fatalf("%v: decoding the re-encoded table: %v", k, err)
			}
			if r.Entries == nil {
				r.Entries = again.Entries // no table and an empty one are alike
			}
			if diff := cmp.Diff(r, again, opts); diff != "" {
				t.Fatalf("%v: decode, encode, decode (-first +second):\n%s", k, diff)
			}
		}
		if s, err := parseSummary(b); err == nil {
			again, err := parseSummary(EncodeSummary(s))
			if err != nil || len(again.Entries) != len(s.Entries) || again.DevName != s.DevName || again.DevIndex != s.DevIndex {
				t.Fatalf("summary %+v re-decodes to %+v, %v", s, again, err)
			}
			for i := range s.Entries {
				if s.Entries[i] != again.Entries[i] {
					t.Fatalf("summary entry %d: %+v, then %+v", i, s.Entries[i], again.Entries[i])
				}
			}
		}
		if s, err := parseStat(b); err == nil {
			again, err := parseStat(EncodeStat(s))
			if err != nil || !bytes.Equal(EncodeStat(s), EncodeStat(again)) {
				t.Fatalf("stat %+v re-decodes to %+v, %v", s, again, err)
			}
		}
		parseSockaddr(b)
	})
}
