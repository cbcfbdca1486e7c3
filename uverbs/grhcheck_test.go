package uverbs

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestGRHCheck: on a port that requires a GRH, an address without
// IsGlobal fails in QP.Modify (each address vector the mask selects) and
// CreateAH before any kernel call (the fake context has no command fd),
// naming the field, the port and what to set, matching EINVAL, and the
// QP keeps its state. The VM test TestMissingGRH checks the same against
// rxe's real port.
func TestGRHCheck(t *testing.T) {
	for _, ll := range []LinkLayer{LinkLayerEthernet, LinkLayerInfiniBand} {
		t.Run(ll.String(), func(t *testing.T) {
			c := fakeContext("dev0", 1)
			c.ports.Store(1, portRoute{grh: true, linkLayer: ll})
			why := map[LinkLayer]string{
				LinkLayerEthernet:   "port dev0/1 is RoCE (link layer Ethernet), where every address is global",
				LinkLayerInfiniBand: "port dev0/1 requires a global route header in every address (GRH_REQUIRED)",
			}[ll]
			qp := &QP{resource: resource{ctx: c, kind: "QP", handle: 1}, typ: QPTypeRC}
			global := AHAttr{IsGlobal: true, PortNum: 1}
			for _, tt := range []struct {
				name      string
				from      QPState
				attr      QPAttr
				mask      QPAttrMask
				field, op string
			}{
				{"RTR", QPStateInit, QPAttr{State: QPStateRTR, AHAttr: AHAttr{PortNum: 1}},
					QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer,
					"AHAttr", "QP.Modify: RC QP INIT -> RTR"},
				{"RTR alternate path", QPStateInit, QPAttr{State: QPStateRTR, AHAttr: global, AltAHAttr: AHAttr{PortNum: 1}, AltPortNum: 1},
					QPAttrState | QPAttrAV | QPAttrAltPath | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer,
					"AltAHAttr", "QP.Modify: RC QP INIT -> RTR"},
				{"RTS alternate path", QPStateRTR, QPAttr{State: QPStateRTS, AltAHAttr: AHAttr{PortNum: 1}, AltPortNum: 1},
					QPAttrState | QPAttrAltPath | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic,
					"AltAHAttr", "QP.Modify: RC QP RTR -> RTS"},
			} {
				qp.pv.State.Store(uint32(tt.from))
				err := qp.Modify(&tt.attr, tt.mask)
				want := "uverbs " + tt.op + ": " + tt.field + ".IsGlobal is false, but " + why
				if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, syscall.EINVAL) {
					t.Errorf("%s: Modify = %v; want %q... matching EINVAL", tt.name, err, want)
					continue
				}
				for _, w := range []string{"set " + tt.field + ".IsGlobal and " + tt.field + ".GRH", "DGID", "SGIDIndex", "HopLimit"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", tt.name, err, w)
					}
				}
				if s := qp.State(); s != tt.from {
					t.Errorf("%s: state %v after the refusal, want %v", tt.name, s, tt.from)
				}
			}

			pd := &PD{resource: resource{ctx: c, kind: "PD", handle: 1}}
			ah, err := pd.CreateAH(AHAttr{PortNum: 1, DLID: 3})
			want := "uverbs CreateAH: AHAttr.IsGlobal is false, but " + why
			if ah != nil || err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("CreateAH = %v, %v; want %q... matching EINVAL", ah, err, want)
			}
		})
	}
}
