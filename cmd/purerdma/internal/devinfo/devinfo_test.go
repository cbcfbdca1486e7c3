package devinfo

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/uverbs"
)

// fakeDevinfo is a device for devinfo that answers from fixed values.
type fakeDevinfo struct {
	attr    uverbs.DeviceAttr
	ports   map[int]uverbs.PortAttr
	gids    map[int][]uverbs.GIDEntry
	vectors int
	openErr error
	portErr error
	closed  int
}

func (f *fakeDevinfo) QueryDevice() (uverbs.DeviceAttr, error) { return f.attr, nil }
func (f *fakeDevinfo) QueryPort(p int) (uverbs.PortAttr, error) {
	if f.portErr != nil {
		return uverbs.PortAttr{}, f.portErr
	}
	return f.ports[p], nil
}
func (f *fakeDevinfo) GIDTable(p int) ([]uverbs.GIDEntry, error) { return f.gids[p], nil }
func (f *fakeDevinfo) NumCompVectors() int                       { return f.vectors }
func (f *fakeDevinfo) Close() error                              { f.closed++; return nil }

// useDevinfoFakes makes devinfo see ds, opened as fakes.
func useDevinfoFakes(t *testing.T, ds []uverbs.Device, fakes map[string]*fakeDevinfo) {
	t.Helper()
	devstest.UseDevices(t, ds, nil)
	oldOpen := openDevice
	openDevice = func(d uverbs.Device) (devinfoContext, error) {
		f := fakes[d.Name]
		if f == nil {
			t.Fatalf("devinfo opened unknown device %s", d.Name)
		}
		if f.openErr != nil {
			return nil, f.openErr
		}
		return f, nil
	}
	t.Cleanup(func() { openDevice = oldOpen })
}

func parseTestGID(t *testing.T, s string) uverbs.GID {
	t.Helper()
	g, err := uverbs.ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// rxeFake is rxe0 as Linux 6.12 reports it.
func rxeFake(t *testing.T, guid uverbs.GUID, ip string) *fakeDevinfo {
	return &fakeDevinfo{
		attr: uverbs.DeviceAttr{
			FWVer: "0.0.0", NodeGUID: guid, SysImageGUID: guid,
			MaxMRSize: 0xffffffffffffffff, PageSizeCap: 0xfffff000, VendorID: 0xffffff,
			MaxQP: 1048560, MaxQPWR: 1048576, DeviceCapFlags: 0x01223c76, MaxSGE: 32, MaxSGERd: 32,
			MaxCQ: 1048576, MaxCQE: 32767, MaxMR: 524287, MaxPD: 1048576, MaxQPRdAtom: 128,
			MaxResRdAtom: 258048, MaxQPInitRdAtom: 128, AtomicCap: uverbs.AtomicHCA, MaxMW: 524287,
			MaxMcastGrp: 8192, MaxMcastQPAttach: 56, MaxTotalMcastQPAttach: 458752, MaxAH: 32767,
			MaxSRQ: 917503, MaxSRQWR: 1048576, MaxSRQSGE: 27, MaxPKeys: 64, LocalCAAckDelay: 15,
			PhysPortCnt: 1, DeviceCapFlagsEx: 0x1C001223C76,
		},
		ports: map[int]uverbs.PortAttr{1: {
			State: uverbs.PortActive, MaxMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU1024, GIDTblLen: 1024,
			PortCapFlags: 0x00010000, MaxMsgSz: 0x80000000, PKeyTblLen: 1, MaxVLNum: 1, ActiveWidth: 1,
			ActiveSpeed: 8, PhysState: 5, LinkLayer: uverbs.LinkLayerEthernet, GRHRequired: true,
		}},
		gids: map[int][]uverbs.GIDEntry{1: {
			{GID: parseTestGID(t, "fe80::"+guid.Colon()), Index: 0, Port: 1, Type: uverbs.GIDTypeRoCEv2, Netdev: "veth0", NetdevIndex: 3},
			{GID: parseTestGID(t, ip), Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2, Netdev: "veth0", NetdevIndex: 3},
		}},
		vectors: 2,
	}
}

func rxeDev(name string, guid uverbs.GUID) uverbs.Device {
	return uverbs.Device{Name: name, NodeGUID: guid, NodeType: uverbs.NodeCA, Transport: uverbs.TransportIB}
}

// What ibv_devinfo (rdma-core 44) printed for these devices in the VM
// on Linux 6.12.
const (
	rxe0Header = "hca_id:\trxe0\n" +
		"\ttransport:\t\t\tInfiniBand (0)\n" +
		"\tfw_ver:\t\t\t\t0.0.0\n" +
		"\tnode_guid:\t\t\t28e7:e1ff:fe26:d7d5\n" +
		"\tsys_image_guid:\t\t\t28e7:e1ff:fe26:d7d5\n" +
		"\tvendor_id:\t\t\t0xffffff\n" +
		"\tvendor_part_id:\t\t\t0\n" +
		"\thw_ver:\t\t\t\t0x0\n" +
		"\tphys_port_cnt:\t\t\t1\n"
	rxe0Verbose = "\tmax_mr_size:\t\t\t0xffffffffffffffff\n" +
		"\tpage_size_cap:\t\t\t0xfffff000\n" +
		"\tmax_qp:\t\t\t\t1048560\n" +
		"\tmax_qp_wr:\t\t\t1048576\n" +
		"\tdevice_cap_flags:\t\t0x01223c76\n" +
		"\t\t\t\t\tBAD_PKEY_CNTR\n" +
		"\t\t\t\t\tBAD_QKEY_CNTR\n" +
		"\t\t\t\t\tAUTO_PATH_MIG\n" +
		"\t\t\t\t\tCHANGE_PHY_PORT\n" +
		"\t\t\t\t\tUD_AV_PORT_ENFORCE\n" +
		"\t\t\t\t\tPORT_ACTIVE_EVENT\n" +
		"\t\t\t\t\tSYS_IMAGE_GUID\n" +
		"\t\t\t\t\tRC_RNR_NAK_GEN\n" +
		"\t\t\t\t\tSRQ_RESIZE\n" +
		"\t\t\t\t\tMEM_WINDOW\n" +
		"\t\t\t\t\tMEM_MGT_EXTENSIONS\n" +
		"\t\t\t\t\tMEM_WINDOW_TYPE_2B\n" +
		"\tmax_sge:\t\t\t32\n" +
		"\tmax_sge_rd:\t\t\t32\n" +
		"\tmax_cq:\t\t\t\t1048576\n" +
		"\tmax_cqe:\t\t\t32767\n" +
		"\tmax_mr:\t\t\t\t524287\n" +
		"\tmax_pd:\t\t\t\t1048576\n" +
		"\tmax_qp_rd_atom:\t\t\t128\n" +
		"\tmax_ee_rd_atom:\t\t\t0\n" +
		"\tmax_res_rd_atom:\t\t258048\n" +
		"\tmax_qp_init_rd_atom:\t\t128\n" +
		"\tmax_ee_init_rd_atom:\t\t0\n" +
		"\tatomic_cap:\t\t\tATOMIC_HCA (1)\n" +
		"\tmax_ee:\t\t\t\t0\n" +
		"\tmax_rdd:\t\t\t0\n" +
		"\tmax_mw:\t\t\t\t524287\n" +
		"\tmax_raw_ipv6_qp:\t\t0\n" +
		"\tmax_raw_ethy_qp:\t\t0\n" +
		"\tmax_mcast_grp:\t\t\t8192\n" +
		"\tmax_mcast_qp_attach:\t\t56\n" +
		"\tmax_total_mcast_qp_attach:\t458752\n" +
		"\tmax_ah:\t\t\t\t32767\n" +
		"\tmax_fmr:\t\t\t0\n" +
		"\tmax_srq:\t\t\t917503\n" +
		"\tmax_srq_wr:\t\t\t1048576\n" +
		"\tmax_srq_sge:\t\t\t27\n" +
		"\tmax_pkeys:\t\t\t64\n" +
		"\tlocal_ca_ack_delay:\t\t15\n" +
		"\tgeneral_odp_caps:\n" +
		"\trc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tuc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tud_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\txrc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tcompletion_timestamp_mask not supported\n" +
		"\tcore clock not supported\n" +
		"\tdevice_cap_flags_ex:\t\t0x1C001223C76\n" +
		"\t\t\t\t\tUnknown flags: 0x1C000000000\n" +
		"\ttso_caps:\n" +
		"\t\tmax_tso:\t\t\t0\n" +
		"\trss_caps:\n" +
		"\t\tmax_rwq_indirection_tables:\t\t\t0\n" +
		"\t\tmax_rwq_indirection_table_size:\t\t\t0\n" +
		"\t\trx_hash_function:\t\t\t\t0x0\n" +
		"\t\trx_hash_fields_mask:\t\t\t\t0x0\n" +
		"\tmax_wq_type_rq:\t\t\t0\n" +
		"\tpacket_pacing_caps:\n" +
		"\t\tqp_rate_limit_min:\t0kbps\n" +
		"\t\tqp_rate_limit_max:\t0kbps\n" +
		"\ttag matching not supported\n" +
		"\tnum_comp_vectors:\t\t2\n"
	rxe0Port = "\t\tport:\t1\n" +
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
		"\t\t\tmax_mtu:\t\t4096 (5)\n" +
		"\t\t\tactive_mtu:\t\t1024 (3)\n" +
		"\t\t\tsm_lid:\t\t\t0\n" +
		"\t\t\tport_lid:\t\t0\n" +
		"\t\t\tport_lmc:\t\t0x00\n" +
		"\t\t\tlink_layer:\t\tEthernet\n"
	rxe0PortVerbose = "\t\t\tmax_msg_sz:\t\t0x80000000\n" +
		"\t\t\tport_cap_flags:\t\t0x00010000\n" +
		"\t\t\tport_cap_flags2:\t0x0000\n" +
		"\t\t\tmax_vl_num:\t\t1 (1)\n" +
		"\t\t\tbad_pkey_cntr:\t\t0x0\n" +
		"\t\t\tqkey_viol_cntr:\t\t0x0\n" +
		"\t\t\tsm_sl:\t\t\t0\n" +
		"\t\t\tpkey_tbl_len:\t\t1\n" +
		"\t\t\tgid_tbl_len:\t\t1024\n" +
		"\t\t\tsubnet_timeout:\t\t0\n" +
		"\t\t\tinit_type_reply:\t0\n" +
		"\t\t\tactive_width:\t\t1X (1)\n" +
		"\t\t\tactive_speed:\t\t10.0 Gbps (8)\n" +
		"\t\t\tphys_state:\t\tLINK_UP (5)\n" +
		"\t\t\tGID[  0]:\t\tfe80::28e7:e1ff:fe26:d7d5, RoCE v2\n" +
		"\t\t\tGID[  1]:\t\t::ffff:198.18.0.1, RoCE v2\n"
	rxe1Plain = "hca_id:\trxe1\n" +
		"\ttransport:\t\t\tInfiniBand (0)\n" +
		"\tfw_ver:\t\t\t\t0.0.0\n" +
		"\tnode_guid:\t\t\t0433:33ff:fecd:1799\n" +
		"\tsys_image_guid:\t\t\t0433:33ff:fecd:1799\n" +
		"\tvendor_id:\t\t\t0xffffff\n" +
		"\tvendor_part_id:\t\t\t0\n" +
		"\thw_ver:\t\t\t\t0x0\n" +
		"\tphys_port_cnt:\t\t\t1\n" +
		"\t\tport:\t1\n" +
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
		"\t\t\tmax_mtu:\t\t4096 (5)\n" +
		"\t\t\tactive_mtu:\t\t1024 (3)\n" +
		"\t\t\tsm_lid:\t\t\t0\n" +
		"\t\t\tport_lid:\t\t0\n" +
		"\t\t\tport_lmc:\t\t0x00\n" +
		"\t\t\tlink_layer:\t\tEthernet\n" +
		"\n"
)

func useRxeFakes(t *testing.T) (rxe0, rxe1 *fakeDevinfo) {
	t.Helper()
	g0, g1 := uverbs.GUID(0x28e7e1fffe26d7d5), uverbs.GUID(0x043333fffecd1799)
	rxe0, rxe1 = rxeFake(t, g0, "198.18.0.1"), rxeFake(t, g1, "198.18.0.2")
	useDevinfoFakes(t, []uverbs.Device{rxeDev("rxe0", g0), rxeDev("rxe1", g1)},
		map[string]*fakeDevinfo{"rxe0": rxe0, "rxe1": rxe1})
	return rxe0, rxe1
}

// diffLines reports a difference line by line, tabs made visible.
func diffLines(want, got string) string {
	show := func(s string) []string { return strings.Split(strings.ReplaceAll(s, "\t", `\t`), "\n") }
	return cmp.Diff(show(want), show(got))
}

func TestDevinfoRxe(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-v", "-d", "rxe0"}, rxe0Header + rxe0Verbose + rxe0Port + rxe0PortVerbose + "\n"},
		{[]string{"-d", "rxe0"}, rxe0Header + rxe0Port + "\n"},
		{[]string{"--ib-dev=rxe0", "--ib-port", "1"}, rxe0Header + rxe0Port + "\n"},
		{[]string{"-drxe0", "-i1"}, rxe0Header + rxe0Port + "\n"},
		{nil, rxe0Header + rxe0Port + "\n" + rxe1Plain},
		{[]string{"-i", "0x1"}, rxe0Header + rxe0Port + "\n" + rxe1Plain},
		{[]string{"-l"}, "2 HCAs found:\n\trxe0\n\trxe1\n\n"},
		{[]string{"-vl", "-d", "rxe1"}, "2 HCAs found:\n\trxe0\n\trxe1\n\n"},
		{[]string{"--list"}, "2 HCAs found:\n\trxe0\n\trxe1\n\n"},
		{[]string{"--verb", "-d", "rxe0"}, rxe0Header + rxe0Verbose + rxe0Port + rxe0PortVerbose + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			rxe0, rxe1 := useRxeFakes(t)
			code, stdout, stderr := runArgs(append([]string{"devinfo"}, tt.args...)...)
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if diff := diffLines(tt.want, stdout); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if rxe0.closed > 1 || rxe1.closed > 1 {
				t.Errorf("closed %d and %d times", rxe0.closed, rxe1.closed)
			}
		})
	}
}

func TestDevinfoOneDevice(t *testing.T) {
	useRxeFakes(t)
	code, stdout, _ := runArgs("devinfo", "-l")
	if code != 0 || !strings.HasPrefix(stdout, "2 HCAs found:") {
		t.Errorf("-l: %d %q", code, stdout)
	}
	useDevinfoFakes(t, []uverbs.Device{rxeDev("rxe0", 1)}, map[string]*fakeDevinfo{"rxe0": rxeFake(t, 1, "198.18.0.1")})
	if code, stdout, _ := runArgs("devinfo", "-l"); code != 0 || stdout != "1 HCA found:\n\trxe0\n\n" {
		t.Errorf("-l with one device: %d %q", code, stdout)
	}
}

// exoticFake exercises the branches rxe never takes: unknown flags,
// every optional block, out-of-range enums, C int overflow, an
// InfiniBand port with IB GIDs.
func exoticFake(t *testing.T) (uverbs.Device, *fakeDevinfo) {
	dev := uverbs.Device{Name: "mlx5_0", NodeType: uverbs.NodeCA, Transport: uverbs.TransportIB}
	capFlags := uverbs.DeviceCapResizeMaxWR | uverbs.DeviceCapInitType | uverbs.DeviceCapManagedFlowSteering | 1<<15 | 1<<31
	f := &fakeDevinfo{
		attr: uverbs.DeviceAttr{
			FWVer: "16.35.2000", BoardID: "MT_0000000010", NodeGUID: 0x0002c90300a0b0c0, SysImageGUID: 0x0002c90300a0b0c0,
			MaxMRSize: 0xffffffffffffffff, PageSizeCap: 0xfffffffffffff000, VendorID: 0x02c9, VendorPartID: 0xffffffff,
			HWVer: 0xa, MaxQP: 0x80000000, MaxQPWR: 32768, DeviceCapFlags: capFlags, MaxSGE: 30, MaxSGERd: 30,
			MaxCQ: 16777216, MaxCQE: 4194303, MaxMR: 16777216, MaxPD: 16777216, MaxQPRdAtom: 16,
			MaxResRdAtom: 2097152, MaxQPInitRdAtom: 16, AtomicCap: 7, MaxMW: 16777216, MaxMcastGrp: 2097152,
			MaxMcastQPAttach: 240, MaxTotalMcastQPAttach: 503316480, MaxAH: 2147483647, MaxFMR: 3, MaxMapPerFMR: 7,
			MaxPKeys: 128, LocalCAAckDelay: 16, PhysPortCnt: 2,
			ODPCaps:                 uverbs.ODPCaps{General: 3 | 1<<4, RC: 0xff | 1<<10, UD: 3, XRC: uverbs.ODPSupportSRQRecv},
			CompletionTimestampMask: 0x7fffffffffffffff, HCACoreClock: 156250,
			DeviceCapFlagsEx: capFlags | uverbs.DeviceCapRawScatterFCS | uverbs.DeviceCapCCDMABounce | uverbs.DeviceCapFlushGlobal,
			RSSCaps:          uverbs.RSSCaps{SupportedQPTs: 1<<8 | 1<<4 | 1<<2, MaxRWQIndirectionTables: 64, MaxRWQIndirectionTableSize: 2048},
			MaxWQTypeRQ:      16384, RawPacketCaps: 0x1f,
			TMCaps:    uverbs.TMCaps{MaxRndvHdrSize: 64, MaxNumTags: 127, Flags: 1, MaxOps: 32768, MaxSGE: 1},
			CQModCaps: uverbs.CQModCaps{MaxCQCount: 65535, MaxCQPeriod: 4095},
			MaxDMSize: 131072,
		},
		ports: map[int]uverbs.PortAttr{
			1: {State: uverbs.PortActive, MaxMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU4096, LID: 7, SMLID: 1,
				LinkLayer: uverbs.LinkLayerInfiniBand, MaxMsgSz: 0x40000000, PortCapFlags: 0x2659e848, MaxVLNum: 4,
				PKeyTblLen: 128, GIDTblLen: 8, SubnetTimeout: 18, ActiveWidth: 2, ActiveSpeedEx: 256, PhysState: 5},
			2: {State: uverbs.PortNOP, MaxMTU: 0, ActiveMTU: uverbs.MTU4096, SMLID: 1, LID: 65535, LMC: 7,
				LinkLayer: 9, MaxMsgSz: 0x40000000, PortCapFlags: 0x2659e848, PortCapFlags2: 0x32,
				BadPKeyCntr: 3, QKeyViolCntr: 0x10, SMSL: 15, PKeyTblLen: 128, GIDTblLen: 0x80000000,
				SubnetTimeout: 18, InitTypeReply: 1, ActiveWidth: 3, ActiveSpeed: 3},
		},
		gids: map[int][]uverbs.GIDEntry{
			1: {
				{GID: parseTestGID(t, "fe80::2:c903:a0:b0c1"), Index: 0, Port: 1, Type: uverbs.GIDTypeIB},
				{GID: parseTestGID(t, "fe80::"), Index: 1, Port: 1, Type: uverbs.GIDTypeIB},            // no interface ID: skipped
				{GID: parseTestGID(t, "fe80::1:0:0:0"), Index: 2, Port: 1, Type: uverbs.GIDTypeRoCEv2}, // IB link: no type shown
				{GID: parseTestGID(t, "::1.2.3.4"), Index: 100, Port: 1, Type: 7},                      // unknown type: as RoCE v2
			},
		},
		vectors: 63,
	}
	return dev, f
}

const exoticOutput = "hca_id:\tmlx5_0\n" +
	"\ttransport:\t\t\tInfiniBand (0)\n" +
	"\tfw_ver:\t\t\t\t16.35.2000\n" +
	"\tnode_guid:\t\t\t0002:c903:00a0:b0c0\n" +
	"\tsys_image_guid:\t\t\t0002:c903:00a0:b0c0\n" +
	"\tvendor_id:\t\t\t0x02c9\n" +
	"\tvendor_part_id:\t\t\t-1\n" +
	"\thw_ver:\t\t\t\t0xA\n" +
	"\tboard_id:\t\t\tMT_0000000010\n" +
	"\tphys_port_cnt:\t\t\t2\n" +
	"\tmax_mr_size:\t\t\t0xffffffffffffffff\n" +
	"\tpage_size_cap:\t\t\t0xfffffffffffff000\n" +
	"\tmax_qp:\t\t\t\t-2147483648\n" +
	"\tmax_qp_wr:\t\t\t32768\n" +
	"\tdevice_cap_flags:\t\t0xa0008201\n" +
	"\t\t\t\t\tRESIZE_MAX_WR\n" +
	"\t\t\t\t\tINIT_TYPE\n" +
	"\t\t\t\t\tMANAGED_FLOW_STEERING\n" +
	"\t\t\t\t\tUnknown flags: 0x80008000\n" +
	"\tmax_sge:\t\t\t30\n" +
	"\tmax_sge_rd:\t\t\t30\n" +
	"\tmax_cq:\t\t\t\t16777216\n" +
	"\tmax_cqe:\t\t\t4194303\n" +
	"\tmax_mr:\t\t\t\t16777216\n" +
	"\tmax_pd:\t\t\t\t16777216\n" +
	"\tmax_qp_rd_atom:\t\t\t16\n" +
	"\tmax_ee_rd_atom:\t\t\t0\n" +
	"\tmax_res_rd_atom:\t\t2097152\n" +
	"\tmax_qp_init_rd_atom:\t\t16\n" +
	"\tmax_ee_init_rd_atom:\t\t0\n" +
	"\tatomic_cap:\t\t\tinvalid atomic capability (7)\n" +
	"\tmax_ee:\t\t\t\t0\n" +
	"\tmax_rdd:\t\t\t0\n" +
	"\tmax_mw:\t\t\t\t16777216\n" +
	"\tmax_raw_ipv6_qp:\t\t0\n" +
	"\tmax_raw_ethy_qp:\t\t0\n" +
	"\tmax_mcast_grp:\t\t\t2097152\n" +
	"\tmax_mcast_qp_attach:\t\t240\n" +
	"\tmax_total_mcast_qp_attach:\t503316480\n" +
	"\tmax_ah:\t\t\t\t2147483647\n" +
	"\tmax_fmr:\t\t\t3\n" +
	"\tmax_map_per_fmr:\t\t7\n" +
	"\tmax_srq:\t\t\t0\n" +
	"\tmax_pkeys:\t\t\t128\n" +
	"\tlocal_ca_ack_delay:\t\t16\n" +
	"\tgeneral_odp_caps:\n" +
	"\t\t\t\t\tODP_SUPPORT\n" +
	"\t\t\t\t\tODP_SUPPORT_IMPLICIT\n" +
	"\t\t\t\t\tUnknown flags: 0x10\n" +
	"\trc_odp_caps:\n" +
	"\t\t\t\t\tSUPPORT_SEND\n" +
	"\t\t\t\t\tSUPPORT_RECV\n" +
	"\t\t\t\t\tSUPPORT_WRITE\n" +
	"\t\t\t\t\tSUPPORT_READ\n" +
	"\t\t\t\t\tSUPPORT_ATOMIC\n" +
	"\t\t\t\t\tSUPPORT_SRQ\n" +
	"\t\t\t\t\tSUPPORT_FLUSH\n" +
	"\t\t\t\t\tSUPPORT_ATOMIC_WRITE\n" +
	"\t\t\t\t\tUnknown flags: 0x400\n" +
	"\tuc_odp_caps:\n" +
	"\t\t\t\t\tNO SUPPORT\n" +
	"\tud_odp_caps:\n" +
	"\t\t\t\t\tSUPPORT_SEND\n" +
	"\t\t\t\t\tSUPPORT_RECV\n" +
	"\txrc_odp_caps:\n" +
	"\t\t\t\t\tSUPPORT_SRQ\n" +
	"\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff\n" +
	"\thca_core_clock:\t\t\t156250kHZ\n" +
	"\traw packet caps:\n" +
	"\t\t\t\t\tC-VLAN stripping offload\n" +
	"\t\t\t\t\tScatter FCS offload\n" +
	"\t\t\t\t\tIP csum offload\n" +
	"\t\t\t\t\tDelay drop\n" +
	"\tdevice_cap_flags_ex:\t\t0x244A0008201\n" +
	"\t\t\t\t\tRAW_SCATTER_FCS\n" +
	"\t\t\t\t\tCC_DMA_BOUNCE\n" +
	"\t\t\t\t\tUnknown flags: 0x4000000000\n" +
	"\ttso_caps:\n" +
	"\t\tmax_tso:\t\t\t0\n" +
	"\trss_caps:\n" +
	"\t\tmax_rwq_indirection_tables:\t\t\t64\n" +
	"\t\tmax_rwq_indirection_table_size:\t\t\t2048\n" +
	"\t\trx_hash_function:\t\t\t\t0x0\n" +
	"\t\trx_hash_fields_mask:\t\t\t\t0x0\n" +
	"\t\tsupported_qp:\n" +
	"\t\t\t\t\tSUPPORT_RAW_PACKET\n" +
	"\t\t\t\t\tSUPPORT_UD\n" +
	"\t\t\t\t\tUnknown flags: 0x4\n" +
	"\tmax_wq_type_rq:\t\t\t16384\n" +
	"\tpacket_pacing_caps:\n" +
	"\t\tqp_rate_limit_min:\t0kbps\n" +
	"\t\tqp_rate_limit_max:\t0kbps\n" +
	"\tmax_rndv_hdr_size:\t\t64\n" +
	"\tmax_num_tags:\t\t\t127\n" +
	"\tmax_ops:\t\t\t32768\n" +
	"\tmax_sge:\t\t\t1\n" +
	"\tflags:\n" +
	"\t\t\t\t\tIBV_TM_CAP_RC\n" +
	"\n" +
	"\tcq moderation caps:\n" +
	"\t\tmax_cq_count:\t65535\n" +
	"\t\tmax_cq_period:\t4095 us\n" +
	"\n" +
	"\tmaximum available device memory:\t131072Bytes\n" +
	"\n" +
	"\tnum_comp_vectors:\t\t63\n" +
	"\t\tport:\t1\n" +
	"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
	"\t\t\tmax_mtu:\t\t4096 (5)\n" +
	"\t\t\tactive_mtu:\t\t4096 (5)\n" +
	"\t\t\tsm_lid:\t\t\t1\n" +
	"\t\t\tport_lid:\t\t7\n" +
	"\t\t\tport_lmc:\t\t0x00\n" +
	"\t\t\tlink_layer:\t\tInfiniBand\n" +
	"\t\t\tmax_msg_sz:\t\t0x40000000\n" +
	"\t\t\tport_cap_flags:\t\t0x2659e848\n" +
	"\t\t\tport_cap_flags2:\t0x0000\n" +
	"\t\t\tmax_vl_num:\t\t8 (4)\n" +
	"\t\t\tbad_pkey_cntr:\t\t0x0\n" +
	"\t\t\tqkey_viol_cntr:\t\t0x0\n" +
	"\t\t\tsm_sl:\t\t\t0\n" +
	"\t\t\tpkey_tbl_len:\t\t128\n" +
	"\t\t\tgid_tbl_len:\t\t8\n" +
	"\t\t\tsubnet_timeout:\t\t18\n" +
	"\t\t\tinit_type_reply:\t0\n" +
	"\t\t\tactive_width:\t\t4X (2)\n" +
	"\t\t\tactive_speed:\t\t200.0 Gbps (256)\n" +
	"\t\t\tphys_state:\t\tLINK_UP (5)\n" +
	"\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0002:c903:00a0:b0c1\n" +
	"\t\t\tGID[  2]:\t\tfe80::1:0:0:0\n" +
	"\t\t\tGID[100]:\t\t::1.2.3.4\n" +
	"\n" +
	"\t\tport:\t2\n" +
	"\t\t\tstate:\t\t\tinvalid state (0)\n" +
	"\t\t\tmax_mtu:\t\tinvalid MTU (0)\n" +
	"\t\t\tactive_mtu:\t\t4096 (5)\n" +
	"\t\t\tsm_lid:\t\t\t1\n" +
	"\t\t\tport_lid:\t\t65535\n" +
	"\t\t\tport_lmc:\t\t0x07\n" +
	"\t\t\tlink_layer:\t\tUnknown\n" +
	"\t\t\tmax_msg_sz:\t\t0x40000000\n" +
	"\t\t\tport_cap_flags:\t\t0x2659e848\n" +
	"\t\t\tport_cap_flags2:\t0x0032\n" +
	"\t\t\tmax_vl_num:\t\tinvalid value (0)\n" +
	"\t\t\tbad_pkey_cntr:\t\t0x3\n" +
	"\t\t\tqkey_viol_cntr:\t\t0x10\n" +
	"\t\t\tsm_sl:\t\t\t15\n" +
	"\t\t\tpkey_tbl_len:\t\t128\n" +
	"\t\t\tgid_tbl_len:\t\t-2147483648\n" +
	"\t\t\tsubnet_timeout:\t\t18\n" +
	"\t\t\tinit_type_reply:\t1\n" +
	"\t\t\tactive_width:\t\tinvalid widthX (3)\n" +
	"\t\t\tactive_speed:\t\tinvalid speed (3)\n" +
	"\t\t\tphys_state:\t\tinvalid physical state (0)\n" +
	"\n"

func TestDevinfoEveryBranch(t *testing.T) {
	dev, f := exoticFake(t)
	useDevinfoFakes(t, []uverbs.Device{dev}, map[string]*fakeDevinfo{dev.Name: f})
	code, stdout, stderr := runArgs("devinfo", "-v")
	if code != 0 || stderr != "" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if diff := diffLines(exoticOutput, stdout); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}

	// -i 2 prints only port 2.
	_, stdout, _ = runArgs("devinfo", "-i", "2")
	if strings.Contains(stdout, "port:\t1") || !strings.Contains(stdout, "port:\t2\n") || strings.Contains(stdout, "max_msg_sz") {
		t.Errorf("-i 2 printed:\n%s", stdout)
	}
}

func TestDevinfoIWARP(t *testing.T) {
	dev := uverbs.Device{Name: "siw0", NodeType: uverbs.NodeRNIC, Transport: uverbs.TransportIWARP}
	f := &fakeDevinfo{
		attr: uverbs.DeviceAttr{PhysPortCnt: 1},
		ports: map[int]uverbs.PortAttr{1: {State: uverbs.PortActive, LinkLayer: uverbs.LinkLayerEthernet,
			ActiveMTU: uverbs.MTU1024, MaxMTU: uverbs.MTU4096, PhysState: 5}},
		gids: map[int][]uverbs.GIDEntry{1: {
			{GID: parseTestGID(t, "fe80::5054:ff:fe12:3456"), Port: 1, Type: uverbs.GIDTypeRoCEv1},
			{GID: parseTestGID(t, "::ffff:10.0.0.1"), Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2},
		}},
	}
	useDevinfoFakes(t, []uverbs.Device{dev}, map[string]*fakeDevinfo{"siw0": f})
	code, stdout, _ := runArgs("devinfo", "-v")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"hca_id:\tsiw0\n\ttransport:\t\t\tiWARP (1)\n\tnode_guid:", // no fw_ver line
		"\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v1\n",
		"\t\t\tGID[  1]:\t\t::ffff:10.0.0.1, RoCE v2\n",
		"\t\t\tactive_speed:\t\tinvalid speed (0)\n\t\t\tGID[  0]", // no phys_state off InfiniBand
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDevinfoErrors(t *testing.T) {
	t.Run("no such device", func(t *testing.T) {
		useRxeFakes(t)
		code, stdout, stderr := runArgs("devinfo", "-d", "mlx5_9")
		if code != 1 || stdout != "" || stderr != "purerdma: devinfo: no RDMA device named \"mlx5_9\"; the RDMA devices here: rxe0, rxe1\n" {
			t.Errorf("= %d, %q, %q", code, stdout, stderr)
		}
	})
	t.Run("no devices", func(t *testing.T) {
		useDevinfoFakes(t, nil, nil)
		dir := devstest.UseDir(t, false)
		code, _, stderr := runArgs("devinfo")
		if code != 1 || stderr != "purerdma: devinfo: no RDMA device: "+dir+" does not exist (no RDMA driver is loaded); "+devs.LinkAddHint+"\n" {
			t.Errorf("= %d, %q", code, stderr)
		}
		if code, stdout, _ := runArgs("devinfo", "-l"); code != 0 || stdout != "0 HCAs found:\n\n" {
			t.Errorf("-l = %d, %q", code, stdout)
		}
	})
	t.Run("port past the device's", func(t *testing.T) {
		rxe0, _ := useRxeFakes(t)
		code, stdout, stderr := runArgs("devinfo", "-d", "rxe0", "-i", "2")
		if code != 1 || stdout != "" || !strings.Contains(stderr, "rxe0 has no port 2 (it has 1)") {
			t.Errorf("= %d, %q, %q", code, stdout, stderr)
		}
		if rxe0.closed != 1 {
			t.Errorf("device closed %d times, want 1", rxe0.closed)
		}
	})
	t.Run("one device fails", func(t *testing.T) {
		rxe0, _ := useRxeFakes(t)
		rxe0.openErr = fmt.Errorf("uverbs Open rxe0: %w", syscall.EACCES)
		code, stdout, stderr := runArgs("devinfo")
		if code != 1 || stdout != rxe1Plain || !strings.Contains(stderr, "devinfo: rxe0: uverbs Open rxe0: permission denied") {
			t.Errorf("= %d, %q, %q", code, stdout, stderr)
		}
	})
	t.Run("port query fails", func(t *testing.T) {
		_, rxe1 := useRxeFakes(t)
		rxe1.portErr = errors.New("boom")
		code, _, stderr := runArgs("devinfo", "-d", "rxe1")
		if code != 1 || stderr != "purerdma: devinfo: rxe1: boom\n" || rxe1.closed != 1 {
			t.Errorf("= %d, %q, closed %d", code, stderr, rxe1.closed)
		}
	})
}

func TestParseDevinfoArgs(t *testing.T) {
	tests := []struct {
		args []string
		want devinfoOptions
		err  string // "" for success
	}{
		{nil, devinfoOptions{}, ""},
		{[]string{"-v"}, devinfoOptions{verbose: true}, ""},
		{[]string{"-l"}, devinfoOptions{list: true}, ""},
		{[]string{"-vl"}, devinfoOptions{verbose: true, list: true}, ""},
		{[]string{"-d", "rxe0"}, devinfoOptions{dev: "rxe0"}, ""},
		{[]string{"-drxe0"}, devinfoOptions{dev: "rxe0"}, ""},
		{[]string{"-vdrxe0"}, devinfoOptions{dev: "rxe0", verbose: true}, ""},
		{[]string{"-vd", "rxe0"}, devinfoOptions{dev: "rxe0", verbose: true}, ""},
		{[]string{"--ib-dev=rxe0"}, devinfoOptions{dev: "rxe0"}, ""},
		{[]string{"--ib-dev", "rxe0"}, devinfoOptions{dev: "rxe0"}, ""},
		{[]string{"--ib-d", "rxe0"}, devinfoOptions{dev: "rxe0"}, ""},
		{[]string{"-i", "2"}, devinfoOptions{port: 2}, ""},
		{[]string{"-i2"}, devinfoOptions{port: 2}, ""},
		{[]string{"-i", "0x10"}, devinfoOptions{port: 16}, ""},
		{[]string{"-i", "010"}, devinfoOptions{port: 8}, ""},
		{[]string{"--ib-port=3", "--verbose", "--list"}, devinfoOptions{port: 3, verbose: true, list: true}, ""},
		{[]string{"-v", "--"}, devinfoOptions{verbose: true}, ""},
		{[]string{"-d", "rxe0", "-d", "rxe1"}, devinfoOptions{dev: "rxe1"}, ""},
		{[]string{"-i", "0"}, devinfoOptions{}, `devinfo: bad port "0"`},
		{[]string{"-i", "-1"}, devinfoOptions{}, `devinfo: bad port "-1"`},
		{[]string{"-i", "one"}, devinfoOptions{}, `devinfo: bad port "one"`},
		{[]string{"-i"}, devinfoOptions{}, "devinfo: -i needs a value"},
		{[]string{"-d"}, devinfoOptions{}, "devinfo: -d needs a value"},
		{[]string{"--ib-dev"}, devinfoOptions{}, "devinfo: --ib-dev needs a value"},
		{[]string{"--list=yes"}, devinfoOptions{}, "devinfo: --list takes no value"},
		{[]string{"--ib"}, devinfoOptions{}, "devinfo: --ib is ambiguous (--ib-dev, --ib-port)"},
		{[]string{"--frob"}, devinfoOptions{}, "devinfo: unknown flag --frob"},
		{[]string{"--"}, devinfoOptions{}, ""},
		{[]string{"--=x"}, devinfoOptions{}, "devinfo: unknown flag --=x"},
		{[]string{"-x"}, devinfoOptions{}, "devinfo: unknown flag -x"},
		{[]string{"rxe0"}, devinfoOptions{}, `devinfo: unexpected argument "rxe0" (all arguments are flags)`},
		{[]string{"--", "rxe0"}, devinfoOptions{}, `devinfo: unexpected argument "rxe0" (all arguments are flags)`},
		{[]string{"-"}, devinfoOptions{}, `devinfo: unexpected argument "-" (all arguments are flags)`},
	}
	for _, tt := range tests {
		got, err := parseDevinfoArgs(tt.args)
		if tt.err != "" {
			if err == nil || !errors.Is(err, cli.ErrUsage) || !strings.HasSuffix(err.Error(), ": "+tt.err) {
				t.Errorf("%q: error %v, want usage error %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
	// A bad command line prints the usage, which lists devinfo.
	code, _, stderr := runArgs("devinfo", "-x")
	if code != 2 || !strings.Contains(stderr, "purerdma: devinfo: unknown flag -x\n") || !strings.Contains(stderr, "  devinfo [-d DEV]") {
		t.Errorf("devinfo -x = %d, %q", code, stderr)
	}
}

func TestInetNtop6(t *testing.T) {
	// What glibc's inet_ntop returns (checked with Python's
	// socket.inet_ntop, which calls it).
	tests := map[string]string{
		"::1.2.3.4":                "::1.2.3.4",
		"::2":                      "::2",
		"::1":                      "::1",
		"::ffff:1.2.3.4":           "::ffff:1.2.3.4",
		"::":                       "::",
		"1::":                      "1::",
		"1:0:0:1:0:0:0:1":          "1:0:0:1::1",
		"fe80::5454:6ff:feba:78fd": "fe80::5454:6ff:feba:78fd",
		"0:0:0:0:0:1:0:0":          "::1:0:0",
		"::ffff:0:1.2.3.4":         "::ffff:0:102:304",
		"1:2:3:4:5:6:7:8":          "1:2:3:4:5:6:7:8",
		"1:0:2:0:0:3:0:0":          "1:0:2::3:0:0",
		"::0.0.1.0":                "::100",
		"::ffff:0.0.0.0":           "::ffff:0.0.0.0",
		"1:0:2:3:4:5:6:7":          "1:0:2:3:4:5:6:7",
		"fe80:0:0:0:1:0:0:0":       "fe80::1:0:0:0",
		"ff02::1:ff00:1":           "ff02::1:ff00:1",
	}
	for in, want := range tests {
		if got := inetNtop6(netip.MustParseAddr(in).As16()); got != want {
			t.Errorf("inetNtop6(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestDevinfoStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{transportStr(uverbs.TransportUSNICUDP), "usNIC UDP"},
		{transportStr(uverbs.TransportUnspecified), "unspecified"},
		{transportStr(uverbs.TransportUnknown), "invalid transport"},
		{portStateStr(uverbs.PortArmed), "PORT_ARMED"},
		{portStateStr(uverbs.PortActiveDefer), "invalid state"},
		{physStateStr(4), "PORT_CONFIGURATION TRAINNING"},
		{physStateStr(7), "PHY TEST"},
		{physStateStr(8), "invalid physical state"},
		{atomicCapStr(uverbs.AtomicGlob), "ATOMIC_GLOB"},
		{mtuStr(6), "invalid MTU"},
		{linkLayerStr(uverbs.LinkLayerUnspecified), "Unspecified"},
		{widthStr(16), "2"},
		{widthStr(8), "12"},
		{speedStr(4), "10.0 Gbps"},
		{speedStr(128), "100.0 Gbps"},
		{speedStr(512), "invalid speed"},
		{vlStr(5), "15"},
		{vlStr(6), "invalid value"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestDevinfoJSON(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"devinfo", "-json"}, `{"devices":[{"hca_id":"rxe0","transport":"InfiniBand","fw_ver":"0.0.0",` +
			`"node_guid":"0000:0000:0000:0001","sys_image_guid":"0000:0000:0000:0001","vendor_id":16777215,` +
			`"vendor_part_id":0,"hw_ver":0,"phys_port_cnt":1,"ports":[{"port":1,"state":"PORT_ACTIVE",` +
			`"max_mtu":4096,"active_mtu":1024,"sm_lid":0,"port_lid":0,"port_lmc":0,"link_layer":"Ethernet"}]}]}`},
		{[]string{"devinfo", "--json", "-d", "rxe0", "-i", "1", "-v"}, ""}, // the same
		{[]string{"devinfo", "-l", "-json"}, `{"devices":[{"hca_id":"rxe0"}]}`},
	} {
		useDevinfoFakes(t, []uverbs.Device{rxeDev("rxe0", 1)}, map[string]*fakeDevinfo{"rxe0": rxeFake(t, 1, "198.18.0.1")})
		code, stdout, stderr := runArgs(tt.args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%q = %d, stderr %q", tt.args, code, stderr)
		}
		var got any
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Fatalf("%q: not one JSON document (%v): %q", tt.args, err, stdout)
		}
		want := tt.want
		if want == "" {
			want = `{"devices":[{"hca_id":"rxe0","transport":"InfiniBand","fw_ver":"0.0.0",` +
				`"node_guid":"0000:0000:0000:0001","sys_image_guid":"0000:0000:0000:0001","vendor_id":16777215,` +
				`"vendor_part_id":0,"hw_ver":0,"phys_port_cnt":1,"ports":[{"port":1,"state":"PORT_ACTIVE",` +
				`"max_mtu":4096,"active_mtu":1024,"sm_lid":0,"port_lid":0,"port_lmc":0,"link_layer":"Ethernet"}]}]}`
		}
		var w any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%q mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
	useDevinfoFakes(t, []uverbs.Device{rxeDev("rxe0", 1)}, nil)
	code, stdout, stderr := runArgs("devinfo", "-json", "-d", "rxe9")
	if code != 1 || stdout != "" || !strings.Contains(stderr, `no RDMA device named "rxe9"; the RDMA devices here: rxe0`) {
		t.Errorf("an unknown device = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// runArgs runs a purerdma command line with devinfo its one command.
func runArgs(args ...string) (code int, stdout, stderr string) {
	return clitest.Run(Command, args...)
}
