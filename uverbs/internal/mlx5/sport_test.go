package mlx5

import (
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// TestRoCEUDPSport: a RoCE address without a flow label gets a UDP
// source port RoCE v2 allows, as libmlx5's mlx5_ah_set_udp_sport picks
// (the mlx5 oracle found port 0 here); with one, the port derived from
// it.
func TestRoCEUDPSport(t *testing.T) {
	p := &Provider{}
	p.resp.CmdsSuppUhw = abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH
	for _, fl := range []uint32{0, 0xabcde} {
		for range 64 {
			var ah provider.AH
			a := provider.AHAttr{Ethernet: true, IsGlobal: true, FlowLabel: fl, SGIDIndex: 1, PortNum: 1}
			if err := p.AHCreated(&ah, &a, make([]byte, abi.Size[abi.MLX5CreateAHResp]())); err != nil {
				t.Fatal(err)
			}
			av := ah.Data.(*AV)
			sport := be.Uint16(av[14:])
			if sport < 0xc000 {
				t.Fatalf("flow label %#x: UDP source port %#x, below 0xc000", fl, sport)
			}
			if fl != 0 && sport != FlowLabelToUDPSport(fl) {
				t.Fatalf("flow label %#x: UDP source port %#x, want %#x", fl, sport, FlowLabelToUDPSport(fl))
			}
		}
	}
}
