package rdmacm

import (
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs"
)

// FuzzConvertQPAttr: the QP attributes the kernel's INIT_QP_ATTR
// returns convert without panicking into what QP.Modify takes: the mask
// keeps exactly the kernel's bits that Modify knows (never the RoCE
// bits 21-24 or the rate limit), flags are true exactly when the kernel
// set them, and the fields librdmacm's state changes use (state, PSNs,
// QP number, access, MTU and both address vectors) are the kernel's.
func FuzzConvertQPAttr(f *testing.F) {
	r := abi.QPAttr{QPAttrMask: 0xffffffff, QPState: 3, PathMTU: 3, DestQPNum: 0x11, RQPSN: 0x22, SQPSN: 0x33,
		QPAccessFlags: 7, MaxDestRDAtomic: 4, MinRNRTimer: 12, PortNum: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		AHAttr: abi.AHAttr{GRH: abi.GlobalRoute{SGIDIndex: 3, HopLimit: 64, FlowLabel: 0xfffff}, IsGlobal: 1, PortNum: 1}}
	f.Add(append([]byte(nil), abi.Bytes(&r)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r abi.QPAttr
		copy(abi.Bytes(&r), b)
		a, mask := convertQPAttr(&r)
		if want := uverbs.QPAttrMask(r.QPAttrMask) & (1<<21 - 1); mask != want {
			t.Fatalf("mask %#x from the kernel's %#x, want %#x", uint32(mask), r.QPAttrMask, uint32(want))
		}
		if a.State != uverbs.QPState(r.QPState) || a.RQPSN != r.RQPSN || a.SQPSN != r.SQPSN ||
			a.DestQPNum != r.DestQPNum || a.AccessFlags != uverbs.Access(r.QPAccessFlags) || a.PathMTU != uverbs.MTU(r.PathMTU) {
			t.Fatalf("converted %+v from %+v", a, r)
		}
		if a.EnSQDAsyncNotify != (r.EnSQDAsyncNotify != 0) || a.SQDraining != (r.SQDraining != 0) {
			t.Fatalf("flags %v %v from %d %d", a.EnSQDAsyncNotify, a.SQDraining, r.EnSQDAsyncNotify, r.SQDraining)
		}
		for _, p := range []struct {
			got  uverbs.AHAttr
			from abi.AHAttr
		}{{a.AHAttr, r.AHAttr}, {a.AltAHAttr, r.AltAHAttr}} {
			g, k := p.got, p.from
			if g.GRH.DGID != uverbs.GID(k.GRH.DGID) || g.GRH.FlowLabel != k.GRH.FlowLabel || g.GRH.SGIDIndex != int(k.GRH.SGIDIndex) ||
				g.GRH.HopLimit != k.GRH.HopLimit || g.GRH.TrafficClass != k.GRH.TrafficClass || g.DLID != k.DLID ||
				g.SL != k.SL || g.SrcPathBits != k.SrcPathBits || g.StaticRate != k.StaticRate ||
				g.IsGlobal != (k.IsGlobal != 0) || g.PortNum != int(k.PortNum) {
				t.Fatalf("address vector %+v from %+v", g, k)
			}
		}
	})
}
