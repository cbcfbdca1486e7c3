package uverbs

import (
	"errors"
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// TestFlushNeedsEachType: FLUSH of a type needs that type's capability
// bit; a device reporting only one refuses the other before posting.
func TestFlushNeedsEachType(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags uint64
		typ   FlushType
		ok    bool
	}{
		{"global on global", abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL, FlushGlobal, true},
		{"persistent on global", abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL, FlushPersistent, false},
		{"global on persistent", abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT, FlushGlobal, false},
		{"both on both", abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL | abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT, FlushGlobal | FlushPersistent, true},
		{"both on one", abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT, FlushGlobal | FlushPersistent, false},
		{"none", 0, FlushGlobal, false},
	} {
		qp := &provider.QP{Type: provider.QPTypeRC, CapsEx: tc.flags}
		err := provider.CheckSend(qp, sendWRView(&SendWR{Opcode: WRFlush, FlushType: tc.typ, FlushLength: 8}))
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrNotSupported)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
