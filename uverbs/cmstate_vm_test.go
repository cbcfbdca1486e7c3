package uverbs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestEstablishedByCM: on iWARP it records RTS from INIT (what rdma_cm's
// ESTABLISHED reports) without a kernel call, and refuses a QP in RESET
// or ERR, keeping its state; on RoCE, whose CM moves no QP, it refuses
// and the QP keeps its state.
func TestEstablishedByCM(t *testing.T) {
	e := newEnd(t, 0, pairOpts{typ: uverbs.QPTypeRC})
	standalone(t, e)
	qp := e.qp
	refused := func(want uverbs.QPState) {
		t.Helper()
		if err := qp.EstablishedByCM(); !errors.Is(err, syscall.EINVAL) || qp.State() != want {
			t.Fatalf("EstablishedByCM in %v = %v, state %v; want EINVAL, %v", want, err, qp.State(), want)
		}
	}
	refused(uverbs.QPStateReset)
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if !testenv.CurrentFabric().IWARP {
		refused(uverbs.QPStateInit)
		return
	}
	if err := qp.EstablishedByCM(); err != nil || qp.State() != uverbs.QPStateRTS {
		t.Fatalf("EstablishedByCM in INIT = %v, state %v; want nil, RTS", err, qp.State())
	}
	if err := qp.EstablishedByCM(); err != nil || qp.State() != uverbs.QPStateRTS {
		t.Fatalf("EstablishedByCM in RTS = %v, state %v; want nil, RTS", err, qp.State())
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	refused(uverbs.QPStateErr)
	qp.Close()
	if err := qp.EstablishedByCM(); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("EstablishedByCM after Close = %v, want ErrClosed", err)
	}
}
