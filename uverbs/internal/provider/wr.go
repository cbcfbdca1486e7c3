package provider

import "unsafe"

// The providers' views of uverbs' work requests and completions are in
// zviews.go, generated from uverbs' declarations by internal/cmd/genviews:
// the same fields, in the same order, of the same types, where a field of
// a viewed uverbs type has the view (uverbs.WorkCompletion is WC here, a
// uverbs.AH is seen through its first field, an AH of this package) and
// one of another numeric type (uverbs.WCStatus) its underlying type. The
// enumerations are named numbers with uverbs' constants. uverbs converts
// a pointer to its public type into one to the view with As.
// TestGenerated (internal/cmd/genviews) fails while zviews.go is stale,
// and TestProviderViews in uverbs checks each pair's layout.
//go:generate go run ../../../internal/cmd/genviews

// As views p, a uverbs type, as the provider type V of the same layout
// (TestProviderViews checks the pairs uverbs converts). The compiler
// folds the size check away.
func As[V, T any](p *T) *V {
	var v V
	if unsafe.Sizeof(*p) < unsafe.Sizeof(v) {
		panic("provider.As: the view is larger than the value")
	}
	return (*V)(unsafe.Pointer(p))
}

// SliceAs views s as a slice of V, whose elements have the layout of
// T's: s's own header reinterpreted (the same pointer, length and
// capacity; no checks to run on the poll path).
func SliceAs[V, T any](s []T) []V {
	var v V
	var t T
	if unsafe.Sizeof(t) != unsafe.Sizeof(v) {
		panic("provider.SliceAs: elements of different sizes")
	}
	return *(*[]V)(unsafe.Pointer(&s))
}
