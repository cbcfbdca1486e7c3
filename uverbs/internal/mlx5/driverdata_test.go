package mlx5

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/abi"
)

func TestDriverData(t *testing.T) {
	sq, _ := SQSize(RC, true, 16, 1, 0, lim)
	rq, _ := RQSize(100, 3, false, lim)
	got := CreateQPData(0x10000, 0x20000, sq, rq, NoUIdx, 5)
	want := abi.MLX5CreateQP{BufAddr: 0x10000, DbAddr: 0x20000, SQWQECount: 64, RQWQECount: 128, RQWQEShift: 6,
		Flags: abi.MLX5_QP_FLAG_UAR_PAGE_INDEX, Uidx: 0xffffff, BfregIndex: 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CreateQPData (-want +got)\n%s", diff)
	}
	if got := CreateQPData(1, 2, sq, RQSizing{}, 7, -1); got.Flags != 0 || got.BfregIndex != 0 || got.RQWQECount != 0 || got.Uidx != 7 {
		t.Errorf("static-UAR QP without RQ: %+v", got)
	}
	cs, _ := CQSize(255, 64, 4096)
	cq, err := CreateCQData(0x30000, 0x20040, cs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(abi.MLX5CreateCQ{BufAddr: 0x30000, DbAddr: 0x20040, CQESize: 64,
		Flags: abi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, UARPageIndex: 3}, cq); diff != "" {
		t.Errorf("CreateCQData (-want +got)\n%s", diff)
	}
	if _, err := CreateCQData(0, 0, cs, 1<<16); !errors.Is(err, ErrInvalid) {
		t.Errorf("UAR page 2^16: %v, want ErrInvalid", err)
	}
	if got := ResizeCQData(0x40000, cs); got != (abi.MLX5ResizeCQ{BufAddr: 0x40000, CQESize: 64}) {
		t.Errorf("ResizeCQData: %+v", got)
	}
	if got := CreateSRQData(1, 2, NoUIdx); got != (abi.MLX5CreateSRQ{BufAddr: 1, DbAddr: 2, Uidx: NoUIdx}) {
		t.Errorf("CreateSRQData: %+v", got)
	}
}
