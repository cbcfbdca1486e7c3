package uverbs

import (
	"reflect"
	"testing"

	"github.com/purerdma/rdma/uverbs/internal/mlx5"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// TestProviderViews: the providers read work requests and write
// completions through views of uverbs' public types (provider.As),
// generated from uverbs' declarations (internal/cmd/genviews, whose
// TestGenerated keeps them current): each pair must agree field by
// field, in name, offset, size and kind, and what their pointers and
// slices lead to must be a pair too. An AH, MW or MR is seen through its
// first field.
func TestProviderViews(t *testing.T) {
	pairs := map[reflect.Type]reflect.Type{}
	pair := func(pub, view any) { pairs[reflect.TypeOf(pub)] = reflect.TypeOf(view) }
	pair(SGE{}, provider.SGE{})
	pair(SendWR{}, provider.SendWR{})
	pair(MWBind{}, provider.MWBind{})
	pair(RecvWR{}, provider.RecvWR{})
	pair(WorkCompletion{}, provider.WC{})
	pair(QPCap{}, provider.QPCap{})
	// Seen through their first field.
	firsts := map[reflect.Type]reflect.Type{
		reflect.TypeOf(AH{}): reflect.TypeOf(provider.AH{}),
		reflect.TypeOf(MW{}): reflect.TypeOf(provider.MW{}),
		reflect.TypeOf(MR{}): reflect.TypeOf(provider.MR{}),
	}
	for pub, view := range firsts {
		if f := pub.Field(0); f.Type != view || f.Offset != 0 {
			t.Errorf("%v's first field is %s %v, want a %v", pub, f.Name, f.Type, view)
		}
	}
	// leads checks that a field of type a (public) may be viewed as b.
	var leads func(a, b reflect.Type) bool
	leads = func(a, b reflect.Type) bool {
		if a.Kind() != b.Kind() || a.Size() != b.Size() {
			return false
		}
		switch a.Kind() {
		case reflect.Pointer:
			if v, ok := firsts[a.Elem()]; ok {
				return v == b.Elem()
			}
			return pairs[a.Elem()] == b.Elem()
		case reflect.Slice:
			return pairs[a.Elem()] == b.Elem()
		case reflect.Array:
			return a.Len() == b.Len() && leads(a.Elem(), b.Elem())
		case reflect.Struct, reflect.Interface, reflect.Map, reflect.Func, reflect.Chan:
			return false // not in a view
		}
		return true
	}
	for pub, view := range pairs {
		if pub.Size() != view.Size() || pub.Align() != view.Align() || pub.NumField() != view.NumField() {
			t.Errorf("%v (%d bytes, %d fields) against %v (%d bytes, %d fields)",
				pub, pub.Size(), pub.NumField(), view, view.Size(), view.NumField())
			continue
		}
		for i := range pub.NumField() {
			a, b := pub.Field(i), view.Field(i)
			if a.Name != b.Name || a.Offset != b.Offset || !leads(a.Type, b.Type) {
				t.Errorf("%v.%s (%v at %d) against %v.%s (%v at %d)", pub, a.Name, a.Type, a.Offset, view, b.Name, b.Type, b.Offset)
			}
		}
	}
}

// TestProviderConstants: the numbers providers hold by hand are uverbs':
// StateErr and the mlx5 CQE decoder's statuses and opcodes (zviews.go's
// constants are generated from uverbs').
func TestProviderConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		pub, view uint64
	}{
		{"QPStateErr", uint64(QPStateErr), provider.StateErr},
		// The mlx5 CQE decoder's statuses and opcodes (ibv_wc_*), which
		// its provider copies into completions as they are.
		{"mlx5 WCSuccess", uint64(WCSuccess), mlx5.WCSuccess},
		{"mlx5 WCLocLenErr", uint64(WCLocLenErr), mlx5.WCLocLenErr},
		{"mlx5 WCLocQPOpErr", uint64(WCLocQPOpErr), mlx5.WCLocQPOpErr},
		{"mlx5 WCLocEECOpErr", uint64(WCLocEECOpErr), mlx5.WCLocEECOpErr},
		{"mlx5 WCLocProtErr", uint64(WCLocProtErr), mlx5.WCLocProtErr},
		{"mlx5 WCWRFlushErr", uint64(WCWRFlushErr), mlx5.WCWRFlushErr},
		{"mlx5 WCMWBindErr", uint64(WCMWBindErr), mlx5.WCMWBindErr},
		{"mlx5 WCBadRespErr", uint64(WCBadRespErr), mlx5.WCBadRespErr},
		{"mlx5 WCLocAccessErr", uint64(WCLocAccessErr), mlx5.WCLocAccessErr},
		{"mlx5 WCRemInvReqErr", uint64(WCRemInvReqErr), mlx5.WCRemInvReqErr},
		{"mlx5 WCRemAccessErr", uint64(WCRemAccessErr), mlx5.WCRemAccessErr},
		{"mlx5 WCRemOpErr", uint64(WCRemOpErr), mlx5.WCRemOpErr},
		{"mlx5 WCRetryExcErr", uint64(WCRetryExcErr), mlx5.WCRetryExcErr},
		{"mlx5 WCRNRRetryExcErr", uint64(WCRNRRetryExcErr), mlx5.WCRNRRetryExcErr},
		{"mlx5 WCRemAbortErr", uint64(WCRemAbortErr), mlx5.WCRemAbortErr},
		{"mlx5 WCGeneralErr", uint64(WCGeneralErr), mlx5.WCGeneralErr},
		{"mlx5 WCSend", uint64(WCSend), mlx5.WCOpSend},
		{"mlx5 WCRDMAWrite", uint64(WCRDMAWrite), mlx5.WCOpRDMAWrite},
		{"mlx5 WCRDMARead", uint64(WCRDMARead), mlx5.WCOpRDMARead},
		{"mlx5 WCCompSwap", uint64(WCCompSwap), mlx5.WCOpCompSwap},
		{"mlx5 WCFetchAdd", uint64(WCFetchAdd), mlx5.WCOpFetchAdd},
		{"mlx5 WCRecv", uint64(WCRecv), mlx5.WCOpRecv},
		{"mlx5 WCRecvRDMAWithImm", uint64(WCRecvRDMAWithImm), mlx5.WCOpRecvRDMAWImm},
	} {
		if c.pub != c.view {
			t.Errorf("%s: uverbs %d, provider %d", c.name, c.pub, c.view)
		}
	}
}
