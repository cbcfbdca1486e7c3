package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/rdmanl"
)

// installRes installs a fake kernel holding what the test VM's 6.12
// answered while rping ran between rxe0 and rxe1 (the expected output
// below is rdma's for those objects), with this process as the owner of
// the user objects, and a siw device without counters.
func installRes(t *testing.T) (pid uint32, comm string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	comm = strings.Fields(string(b))[0]
	pid = uint32(os.Getpid())
	a := func(r rdmanl.ResAttrs, at ...rdmanl.Attr) rdmanl.ResAttrs { r.SetAttr(at...); return r }
	one := func(k rdmanl.ResKind, e ...rdmanl.ResAttrs) []rdmanl.Res {
		return []rdmanl.Res{{DevIndex: 0, DevName: "rxe0", Entries: e}}
	}
	t.Cleanup(rdmanl.InstallFake(&rdmanl.Fake{
		Devices: []rdmanl.Device{{Index: 0, Name: "rxe0", PortCount: 1}, {Index: 2, Name: "siw0", PortCount: 1}},
		Summaries: []rdmanl.Summary{
			{DevIndex: 0, DevName: "rxe0", Entries: []rdmanl.SummaryEntry{{Name: "pd", Current: 3}, {Name: "cq", Current: 2}, {Name: "qp", Current: 2}, {Name: "cm_id", Current: 2}, {Name: "mr", Current: 3}, {Name: "ctx", Current: 1}, {Name: "srq", Current: 0}}},
			{DevIndex: 2, DevName: "siw0", Entries: []rdmanl.SummaryEntry{{Name: "pd", Current: 0}, {Name: "cq", Current: 0}, {Name: "qp", Current: 0}, {Name: "cm_id", Current: 0}, {Name: "mr", Current: 0}, {Name: "ctx", Current: 0}, {Name: "srq", Current: 0}}},
		},
		Res: map[rdmanl.ResKind][]rdmanl.Res{
			rdmanl.ResQP: one(rdmanl.ResQP,
				a(rdmanl.ResAttrs{Port: 1, LQPN: 17, RQPN: 17, RQPSN: 4124860, SQPSN: 8379976, Type: 2, State: 3, PID: pid, PDN: 2},
					rdmanl.AttrPortIndex, rdmanl.AttrLQPN, rdmanl.AttrRQPN, rdmanl.AttrRQPSN, rdmanl.AttrSQPSN,
					rdmanl.AttrPathMigState, rdmanl.AttrType, rdmanl.AttrState, rdmanl.AttrPID, rdmanl.AttrPDN),
				a(rdmanl.ResAttrs{Port: 1, LQPN: 1, SQPSN: 1, Type: 1, State: 3, KernName: "ib_core"},
					rdmanl.AttrPortIndex, rdmanl.AttrLQPN, rdmanl.AttrSQPSN, rdmanl.AttrType, rdmanl.AttrState, rdmanl.AttrKernName),
				a(rdmanl.ResAttrs{LQPN: 18, SQPSN: 0, Type: 4, State: 0, PID: pid, PDN: 2}, // not yet on a port
					rdmanl.AttrLQPN, rdmanl.AttrSQPSN, rdmanl.AttrType, rdmanl.AttrState, rdmanl.AttrPID, rdmanl.AttrPDN)),
			rdmanl.ResCQ: one(rdmanl.ResCQ,
				a(rdmanl.ResAttrs{CQE: 1023, Users: 2, PollCtx: 2, KernName: "ib_core"},
					rdmanl.AttrCQN, rdmanl.AttrCQE, rdmanl.AttrUsers, rdmanl.AttrPollCtx, rdmanl.AttrDIM, rdmanl.AttrKernName),
				a(rdmanl.ResAttrs{CQN: 1, CQE: 63, Users: 2, PID: pid},
					rdmanl.AttrCQN, rdmanl.AttrCQE, rdmanl.AttrUsers, rdmanl.AttrDIM, rdmanl.AttrCtxN, rdmanl.AttrPID)),
			rdmanl.ResMR: one(rdmanl.ResMR,
				a(rdmanl.ResAttrs{MRN: 2, RKey: 0x490, LKey: 0x490, MRLen: 64, PDN: 2, PID: pid},
					rdmanl.AttrMRN, rdmanl.AttrRKey, rdmanl.AttrLKey, rdmanl.AttrMRLen, rdmanl.AttrPDN, rdmanl.AttrPID)),
			rdmanl.ResPD: one(rdmanl.ResPD,
				a(rdmanl.ResAttrs{LocalDMALKey: 0x11f, Users: 1, KernName: "ib_core"},
					rdmanl.AttrPDN, rdmanl.AttrLocalDMALKey, rdmanl.AttrUsers, rdmanl.AttrKernName),
				a(rdmanl.ResAttrs{PDN: 2, Users: 4, PID: pid},
					rdmanl.AttrPDN, rdmanl.AttrLocalDMALKey, rdmanl.AttrUsers, rdmanl.AttrCtxN, rdmanl.AttrPID)),
			rdmanl.ResCMID: one(rdmanl.ResCMID,
				a(rdmanl.ResAttrs{Port: 1, State: 8, PS: 0x106, PID: pid,
					SrcAddr: netip.MustParseAddrPort("198.18.0.1:7174"), DstAddr: netip.MustParseAddrPort("0.0.0.0:0")},
					rdmanl.AttrPortIndex, rdmanl.AttrCMIDN, rdmanl.AttrState, rdmanl.AttrPS, rdmanl.AttrPID,
					rdmanl.AttrSrcAddr, rdmanl.AttrDstAddr),
				a(rdmanl.ResAttrs{Port: 1, CMIDN: 1, LQPN: 17, Type: 2, State: 5, PS: 0x106, PID: pid,
					SrcAddr: netip.MustParseAddrPort("[fd00:198:18::1]:7174"), DstAddr: netip.MustParseAddrPort("[fd00:198:18::2]:55373")},
					rdmanl.AttrPortIndex, rdmanl.AttrCMIDN, rdmanl.AttrLQPN, rdmanl.AttrType, rdmanl.AttrState,
					rdmanl.AttrPS, rdmanl.AttrPID, rdmanl.AttrSrcAddr, rdmanl.AttrDstAddr)),
			rdmanl.ResCtx: one(rdmanl.ResCtx, a(rdmanl.ResAttrs{PID: pid}, rdmanl.AttrCtxN, rdmanl.AttrPID)),
		},
		Stats: []rdmanl.PortStats{{DevIndex: 0, DevName: "rxe0", Port: 1,
			Counters: []rdmanl.Counter{{Name: "sent_pkts", Value: 5283}, {Name: "rcvd_pkts", Value: 5284}, {Name: "ack_deferred", Value: 3521}}}},
		StatErr: map[uint32]error{2: syscall.EINVAL},
	}))
	return pid, comm
}

func TestResOutput(t *testing.T) {
	pid, comm := installRes(t)
	p := func(s string) string { return strings.NewReplacer("PID", fmt.Sprint(pid), "COMM", comm).Replace(s) }
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"res", "-json"}, `[{"ifindex":0,"ifname":"rxe0","pd":3,"cq":2,"qp":2,"cm_id":2,"mr":3,"ctx":1,"srq":0},` +
			`{"ifindex":2,"ifname":"siw0","pd":0,"cq":0,"qp":0,"cm_id":0,"mr":0,"ctx":0,"srq":0}]` + "\n"},
		{[]string{"res"}, "0: rxe0: pd 3 cq 2 qp 2 cm_id 2 mr 3 ctx 1 srq 0 \n2: siw0: pd 0 cq 0 qp 0 cm_id 0 mr 0 ctx 0 srq 0 \n"},
		{[]string{"res", "show", "siw0"}, "2: siw0: pd 0 cq 0 qp 0 cm_id 0 mr 0 ctx 0 srq 0 \n"},
		{[]string{"res", "-json", "qp"}, p(`[{"ifindex":0,"ifname":"rxe0","port":1,"lqpn":17,"rqpn":17,"type":"RC","state":"RTS",` +
			`"rq-psn":4124860,"sq-psn":8379976,"path-mig-state":"MIGRATED","pdn":2,"pid":PID,"comm":"COMM"},` +
			`{"ifindex":0,"ifname":"rxe0","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":1,"comm":"ib_core"},` +
			`{"ifindex":0,"ifname":"rxe0","lqpn":18,"type":"UD","state":"RESET","sq-psn":0,"pdn":2,"pid":PID,"comm":"COMM"}]` + "\n")},
		{[]string{"res", "qp"}, p("link rxe0/1 lqpn 17 rqpn 17 type RC state RTS rq-psn 4124860 sq-psn 8379976 path-mig-state MIGRATED pdn 2 pid PID comm COMM \n" +
			"link rxe0/1 lqpn 1 type GSI state RTS sq-psn 1 comm [ib_core] \n" +
			"link rxe0/- lqpn 18 type UD state RESET sq-psn 0 pdn 2 pid PID comm COMM \n")},
		{[]string{"res", "qp", "link", "rxe0/1"}, p("link rxe0/1 lqpn 17 rqpn 17 type RC state RTS rq-psn 4124860 sq-psn 8379976 path-mig-state MIGRATED pdn 2 pid PID comm COMM \n" +
			"link rxe0/1 lqpn 1 type GSI state RTS sq-psn 1 comm [ib_core] \n")},
		{[]string{"res", "-json", "cq"}, p(`[{"ifindex":0,"ifname":"rxe0","cqn":0,"cqe":1023,"users":2,"poll-ctx":"WORKQUEUE","adaptive-moderation":false,"comm":"ib_core"},` +
			`{"ifindex":0,"ifname":"rxe0","cqn":1,"cqe":63,"users":2,"adaptive-moderation":false,"ctxn":0,"pid":PID,"comm":"COMM"}]` + "\n")},
		{[]string{"res", "cq"}, p("dev rxe0 cqn 0 cqe 1023 users 2 poll-ctx WORKQUEUE adaptive-moderation off comm [ib_core] \n" +
			"dev rxe0 cqn 1 cqe 63 users 2 adaptive-moderation off ctxn 0 pid PID comm COMM \n")},
		{[]string{"res", "mr", "-json"}, p(`[{"ifindex":0,"ifname":"rxe0","mrn":2,"rkey":"490","lkey":"490","mrlen":64,"pdn":2,"pid":PID,"comm":"COMM"}]` + "\n")},
		{[]string{"res", "mr", "dev", "rxe0"}, p("dev rxe0 mrn 2 rkey 0x490 lkey 0x490 mrlen 64 pdn 2 pid PID comm COMM \n")},
		{[]string{"res", "-json", "pd"}, p(`[{"ifindex":0,"ifname":"rxe0","pdn":0,"local_dma_lkey":"11f","users":1,"comm":"ib_core"},` +
			`{"ifindex":0,"ifname":"rxe0","pdn":2,"local_dma_lkey":"0","users":4,"ctxn":0,"pid":PID,"comm":"COMM"}]` + "\n")},
		{[]string{"res", "-json", "cm_id"}, p(`[{"ifindex":0,"ifname":"rxe0","port":1,"cm-idn":0,"state":"LISTEN","ps":"TCP","pid":PID,"comm":"COMM",` +
			`"src-addr":"198.18.0.1:7174","dst-addr":"0.0.0.0:0"},` +
			`{"ifindex":0,"ifname":"rxe0","port":1,"cm-idn":1,"lqpn":17,"qp-type":"RC","state":"CONNECT","ps":"TCP","pid":PID,"comm":"COMM",` +
			`"src-addr":"fd00:198:18::1:7174","dst-addr":"fd00:198:18::2:55373"}]` + "\n")},
		{[]string{"res", "cm_id"}, p("link rxe0/1 cm-idn 0 state LISTEN ps TCP pid PID comm COMM src-addr 198.18.0.1:7174 dst-addr 0.0.0.0:0 \n" +
			"link rxe0/1 cm-idn 1 lqpn 17 qp-type RC state CONNECT ps TCP pid PID comm COMM src-addr fd00:198:18::1:7174 dst-addr fd00:198:18::2:55373 \n")},
		{[]string{"res", "list", "-json", "ctx"}, p(`[{"ifindex":0,"ifname":"rxe0","ctxn":0,"pid":PID,"comm":"COMM"}]` + "\n")},
		{[]string{"res", "-json", "qp", "siw0"}, "[]\n"},
		{[]string{"stat", "-json"}, `[{"ifname":"rxe0","port":1,"sent_pkts":5283,"rcvd_pkts":5284,"ack_deferred":3521}]` + "\n"},
		{[]string{"stat"}, "link rxe0/1 sent_pkts 5283 rcvd_pkts 5284 ack_deferred 3521 \n"},
		{[]string{"stat", "show", "link", "rxe0/1"}, "link rxe0/1 sent_pkts 5283 rcvd_pkts 5284 ack_deferred 3521 \n"},
		{[]string{"stat", "-json", "siw0"}, "[]\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(tt.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResErrors(t *testing.T) {
	installRes(t)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"res", "frob"}, 1, "purerdma: rdmactl Resources frob: no such RDMA device\n"},
		{[]string{"res", "qp", "rxe0", "extra"}, 2, `purerdma: res: unexpected "extra"` + "\n"},
		{[]string{"res", "-x"}, 2, `purerdma: res: unknown flag "-x"` + "\n"},
		{[]string{"res", "pd", "rxe0/1"}, 2, `purerdma: res: a port ("rxe0/1") selects only qp and cm_id` + "\n"},
		{[]string{"res", "qp", "rxe0/x"}, 2, `purerdma: bad port in "rxe0/x"` + "\n"},
		{[]string{"res", "qp", "dev"}, 2, `purerdma: res: "dev" needs a device` + "\n"},
		{[]string{"stat", "siw0/1"}, 1, "purerdma: rdmactl Counters siw0/1: the device has no hardware counters: rdma netlink STAT_GET siw0: invalid argument\n"},
		{[]string{"stat", "rxe0/2"}, 1, "purerdma: rdmactl Counters rxe0/2: no such RDMA device\n"},
		{[]string{"stat", "a", "b"}, 2, `purerdma: stat: unexpected "b"` + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(tt.args...)
			if code != tt.code || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, tt.code)
			}
			if tt.code == 2 {
				tt.msg += usage()
			}
			if diff := cmp.Diff(tt.msg, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
