package oracle

import (
	"errors"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// TestPollClosedCQ: uverbs' CQ.Poll calls the mlx5 provider directly
// (door.go), for a CQ with a lock too, whose door stays set after the
// CQ is destroyed; a Poll after Close must still fail with ErrClosed and
// touch nothing, with and without a thread domain.
func TestPollClosedCQ(t *testing.T) {
	for _, withTD := range []bool{false, true} {
		d := newDevice(procMem{})
		r, cleanup := startGo(t, d)
		if err := r.line("open"); err != nil {
			cleanup()
			t.Fatal(err)
		}
		var td *uverbs.TD
		if withTD {
			var err error
			if td, err = r.ctx.AllocTD(); err != nil {
				cleanup()
				t.Fatal(err)
			}
		}
		cq, err := r.ctx.CreateCQ(uverbs.CQConfig{Size: 4, TD: td})
		if err != nil {
			cleanup()
			t.Fatal(err)
		}
		wc := make([]uverbs.WorkCompletion, 4)
		if n, err := cq.Poll(wc); n != 0 || err != nil {
			t.Errorf("TD %v: Poll of an empty CQ = %d, %v; want 0, nil", withTD, n, err)
		}
		if err := cq.Close(); err != nil {
			t.Errorf("TD %v: Close: %v", withTD, err)
		}
		if n, err := cq.Poll(wc); n != 0 || !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("TD %v: Poll after Close = %d, %v; want 0 and ErrClosed", withTD, n, err)
		}
		cleanup()
	}
}
