// Package devinfo is "purerdma devinfo": device and port attributes,
// printed as rdma-core's ibv_devinfo prints them.
//
// It prints what ibv_devinfo prints, byte for byte: the same
// fields, order, tabs and number formats. It follows rdma-core's current
// libibverbs/examples/devinfo.c, which differs from older releases (such
// as the rdma-core 44 the tests compare with) only where devices report
// what those did not know: the names CC_DMA_BOUNCE, SUPPORT_FLUSH and
// SUPPORT_ATOMIC_WRITE, the 200 Gbps speed and active_speed_ex. Two
// blocks of the current devinfo.c are left out: the completion counter
// capabilities (max_comp_cntr, comp_cntr_caps) and effective_speed,
// which need kernel methods neither 6.1 nor 6.12 has; devinfo.c prints
// neither when the kernel lacks them. The TSO, packet pacing and RSS
// hash lines print zeros, as ibv_devinfo does for every device but mlx5,
// whose provider reads them from its private response.
package devinfo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/uverbs"
)

// Command is "purerdma devinfo".
var Command = cli.Command{
	Name: "devinfo",
	Usage: "  devinfo [-d DEV] [-i PORT] [-v] [-l] [-json]\n" +
		"                                           print device and port attributes, as ibv_devinfo does\n",
	Help: `Flags (ibv_devinfo's; long forms too: --ib-dev=DEV, --ib-port=PORT, --verbose, --list):
  -d DEV    only this device (default: all)
  -i PORT   only this port (default: all)
  -v        all the attributes, GIDs included
  -l        only the names of the devices
  -json     print {"devices": [...]}: each device's hca_id, transport, fw_ver,
            node_guid, sys_image_guid, vendor_id, vendor_part_id, hw_ver, board_id,
            phys_port_cnt and ports (port, state, max_mtu, active_mtu, sm_lid,
            port_lid, port_lmc, link_layer); with -l only the hca_id of each

Examples:
  purerdma devinfo
  purerdma devinfo -d rxe0 -i 1 -v
  purerdma devinfo -l
  purerdma devinfo -json
`,
	Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
		return devinfoCmd(args, stdout)
	},
	JSON: devinfoList{},
}

// devinfoContext is what devinfo needs from an open device; tests
// substitute a fake.
type devinfoContext interface {
	QueryDevice() (uverbs.DeviceAttr, error)
	QueryPort(port int) (uverbs.PortAttr, error)
	GIDTable(port int) ([]uverbs.GIDEntry, error)
	NumCompVectors() int
	Close() error
}

// openDevice opens a device for devinfo; tests replace it.
var openDevice = func(d uverbs.Device) (devinfoContext, error) {
	c, err := d.Open(nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

type devinfoOptions struct {
	dev     string // -d: only this device
	port    int    // -i: only this port; 0 for all
	verbose bool   // -v
	list    bool   // -l: only the device names
	json    bool   // -json
}

// devinfoOpts is ibv_devinfo's getopt_long table.
var devinfoOpts = []cli.Opt{{Short: 'd', Long: "ib-dev", HasArg: true}, {Short: 'i', Long: "ib-port", HasArg: true},
	{Short: 'l', Long: "list"}, {Short: 'v', Long: "verbose"}}

// parseDevinfoArgs parses ibv_devinfo's options the way its getopt_long
// does (cli.Getopt: -d DEV, -dDEV, --ib-dev=DEV, --ib-dev DEV, --ib-d
// DEV, -vl, no operands) and purerdma's -json.
func parseDevinfoArgs(args []string) (devinfoOptions, error) {
	var o devinfoOptions
	_, err := cli.Getopt{Cmd: "devinfo", Opts: devinfoOpts, JSON: &o.json}.Parse(args, func(opt cli.Opt, val string) error {
		switch opt.Short {
		case 'd':
			o.dev = val
		case 'i':
			n, err := strconv.ParseInt(val, 0, 32)
			if err != nil || n <= 0 {
				return cli.UsageError("devinfo: bad port %q", val)
			}
			o.port = int(n)
		case 'l':
			o.list = true
		case 'v':
			o.verbose = true
		}
		return nil
	})
	return o, err
}

// devinfoCmd runs "purerdma devinfo".
func devinfoCmd(args []string, stdout io.Writer) error {
	o, err := parseDevinfoArgs(args)
	if err != nil {
		return err
	}
	ds, err := devs.List()
	if err != nil {
		return err
	}
	if o.json {
		return devinfoJSONCmd(stdout, ds, o)
	}
	if o.list {
		s := "s"
		if len(ds) == 1 {
			s = ""
		}
		fmt.Fprintf(stdout, "%d HCA%s found:\n", len(ds), s)
		for _, d := range ds {
			fmt.Fprintf(stdout, "\t%s\n", d.Name)
		}
		fmt.Fprintln(stdout)
		return nil
	}
	if o.dev != "" {
		d, err := devs.Find(o.dev)
		if err != nil {
			return fmt.Errorf("devinfo: %w", err)
		}
		return printHCA(stdout, d, o)
	}
	if len(ds) == 0 {
		return fmt.Errorf("devinfo: %w", devs.NoDevicesError())
	}
	var errs []error
	for _, d := range ds {
		errs = append(errs, printHCA(stdout, d, o))
	}
	return errors.Join(errs...)
}

// devinfoList is what "devinfo -json" prints.
type devinfoList struct {
	Devices []devinfoJSON `json:"devices"`
}

// devinfoJSON is one device of "devinfo -json".
type devinfoJSON struct {
	HCAID        string            `json:"hca_id"`
	Transport    string            `json:"transport,omitempty"`
	FWVer        string            `json:"fw_ver,omitempty"`
	NodeGUID     string            `json:"node_guid,omitempty"`      // as ibv_devinfo: 0002:c903:00a0:b0c0
	SysImageGUID string            `json:"sys_image_guid,omitempty"` // the same
	VendorID     *uint32           `json:"vendor_id,omitempty"`
	VendorPartID *uint32           `json:"vendor_part_id,omitempty"`
	HWVer        *uint32           `json:"hw_ver,omitempty"`
	BoardID      string            `json:"board_id,omitempty"`
	PhysPortCnt  *int              `json:"phys_port_cnt,omitempty"`
	Ports        []devinfoPortJSON `json:"ports,omitempty"`
}

type devinfoPortJSON struct {
	Port      int    `json:"port"`
	State     string `json:"state"`
	MaxMTU    int    `json:"max_mtu"`    // bytes
	ActiveMTU int    `json:"active_mtu"` // bytes
	SMLID     uint16 `json:"sm_lid"`
	PortLID   uint16 `json:"port_lid"`
	PortLMC   uint8  `json:"port_lmc"`
	LinkLayer string `json:"link_layer"`
}

// devinfoJSONCmd prints the devices (or with -l their names) as one
// JSON document.
func devinfoJSONCmd(stdout io.Writer, ds []uverbs.Device, o devinfoOptions) error {
	if o.dev != "" {
		d, err := devs.Find(o.dev)
		if err != nil {
			return fmt.Errorf("devinfo: %w", err)
		}
		ds = []uverbs.Device{d}
	} else if len(ds) == 0 && !o.list {
		return fmt.Errorf("devinfo: %w", devs.NoDevicesError())
	}
	out := devinfoList{Devices: []devinfoJSON{}}
	for _, d := range ds {
		if o.list {
			out.Devices = append(out.Devices, devinfoJSON{HCAID: d.Name})
			continue
		}
		j, err := hcaJSON(d, o)
		if err != nil {
			return err
		}
		out.Devices = append(out.Devices, j)
	}
	return cli.WriteJSON(stdout, out)
}

// hcaJSON queries one device for devinfo -json.
func hcaJSON(dev uverbs.Device, o devinfoOptions) (_ devinfoJSON, err error) {
	ctx, err := openDevice(dev)
	if err != nil {
		return devinfoJSON{}, fmt.Errorf("devinfo: %s: %w", dev.Name, err)
	}
	defer func() {
		if cerr := ctx.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("devinfo: %s: %w", dev.Name, cerr)
		}
	}()
	a, err := ctx.QueryDevice()
	if err != nil {
		return devinfoJSON{}, fmt.Errorf("devinfo: %s: %w", dev.Name, err)
	}
	if o.port > a.PhysPortCnt {
		return devinfoJSON{}, fmt.Errorf("devinfo: %s has no port %d (it has %d)", dev.Name, o.port, a.PhysPortCnt)
	}
	j := devinfoJSON{
		HCAID: dev.Name, Transport: transportStr(dev.Transport), FWVer: a.FWVer,
		NodeGUID: a.NodeGUID.Colon(), SysImageGUID: a.SysImageGUID.Colon(),
		VendorID: &a.VendorID, VendorPartID: &a.VendorPartID, HWVer: &a.HWVer, BoardID: a.BoardID,
		PhysPortCnt: &a.PhysPortCnt, Ports: []devinfoPortJSON{},
	}
	for port := 1; port <= a.PhysPortCnt; port++ {
		if o.port != 0 && port != o.port {
			continue
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			return devinfoJSON{}, fmt.Errorf("devinfo: %s: %w", dev.Name, err)
		}
		j.Ports = append(j.Ports, devinfoPortJSON{Port: port, State: portStateStr(pa.State),
			MaxMTU: pa.MaxMTU.Bytes(), ActiveMTU: pa.ActiveMTU.Bytes(), SMLID: pa.SMLID, PortLID: pa.LID,
			PortLMC: pa.LMC, LinkLayer: linkLayerStr(pa.LinkLayer)})
	}
	return j, nil
}

// printHCA prints one device, as print_hca_cap does.
func printHCA(w io.Writer, dev uverbs.Device, o devinfoOptions) (err error) {
	ctx, err := openDevice(dev)
	if err != nil {
		return fmt.Errorf("devinfo: %s: %w", dev.Name, err)
	}
	defer func() {
		if cerr := ctx.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("devinfo: %s: %w", dev.Name, cerr)
		}
	}()
	a, err := ctx.QueryDevice()
	if err != nil {
		return fmt.Errorf("devinfo: %s: %w", dev.Name, err)
	}
	if o.port > a.PhysPortCnt {
		return fmt.Errorf("devinfo: %s has no port %d (it has %d)", dev.Name, o.port, a.PhysPortCnt)
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }

	p("hca_id:\t%s\n", dev.Name)
	p("\ttransport:\t\t\t%s (%d)\n", transportStr(dev.Transport), int(dev.Transport))
	if a.FWVer != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p("\tnode_guid:\t\t\t%s\n", a.NodeGUID.Colon())
	p("\tsys_image_guid:\t\t\t%s\n", a.SysImageGUID.Colon())
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", int32(a.VendorPartID))
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	if a.BoardID != "" {
		p("\tboard_id:\t\t\t%s\n", a.BoardID)
	}
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if o.verbose {
		printDeviceVerbose(w, &a, ctx.NumCompVectors())
	}

	for port := 1; port <= a.PhysPortCnt; port++ {
		if o.port != 0 && port != o.port {
			continue
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			return fmt.Errorf("devinfo: %s: %w", dev.Name, err)
		}
		p("\t\tport:\t%d\n", port)
		p("\t\t\tstate:\t\t\t%s (%d)\n", portStateStr(pa.State), int(pa.State))
		p("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuStr(pa.MaxMTU), pa.MaxMTU)
		p("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuStr(pa.ActiveMTU), pa.ActiveMTU)
		p("\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
		p("\t\t\tport_lid:\t\t%d\n", pa.LID)
		p("\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
		p("\t\t\tlink_layer:\t\t%s\n", linkLayerStr(pa.LinkLayer))
		if o.verbose {
			p("\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSz)
			p("\t\t\tport_cap_flags:\t\t0x%08x\n", pa.PortCapFlags)
			p("\t\t\tport_cap_flags2:\t0x%04x\n", pa.PortCapFlags2)
			p("\t\t\tmax_vl_num:\t\t%s (%d)\n", vlStr(pa.MaxVLNum), pa.MaxVLNum)
			p("\t\t\tbad_pkey_cntr:\t\t0x%x\n", pa.BadPKeyCntr)
			p("\t\t\tqkey_viol_cntr:\t\t0x%x\n", pa.QKeyViolCntr)
			p("\t\t\tsm_sl:\t\t\t%d\n", pa.SMSL)
			p("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PKeyTblLen)
			p("\t\t\tgid_tbl_len:\t\t%d\n", int32(pa.GIDTblLen))
			p("\t\t\tsubnet_timeout:\t\t%d\n", pa.SubnetTimeout)
			p("\t\t\tinit_type_reply:\t%d\n", pa.InitTypeReply)
			p("\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(pa.ActiveWidth), pa.ActiveWidth)
			speed := uint32(pa.ActiveSpeed)
			if pa.ActiveSpeedEx != 0 {
				speed = pa.ActiveSpeedEx
			}
			p("\t\t\tactive_speed:\t\t%s (%d)\n", speedStr(speed), speed)
			if dev.Transport == uverbs.TransportIB {
				p("\t\t\tphys_state:\t\t%s (%d)\n", physStateStr(pa.PhysState), pa.PhysState)
			}
			gids, err := ctx.GIDTable(port)
			if err != nil {
				return fmt.Errorf("devinfo: %s: %w", dev.Name, err)
			}
			printGIDs(w, gids, pa.LinkLayer)
		}
		p("\n")
	}
	return nil
}

// printDeviceVerbose prints the device attributes only -v shows.
func printDeviceVerbose(w io.Writer, a *uverbs.DeviceAttr, compVectors int) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	// ibv_device_attr's limits are C ints (vendor_part_id a uint32),
	// all printed with %d: a kernel value of 2^31 or more prints
	// negative there, and here.
	d := func(v int) int32 { return int32(uint32(v)) }

	p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	p("\tmax_qp:\t\t\t\t%d\n", d(a.MaxQP))
	p("\tmax_qp_wr:\t\t\t%d\n", d(a.MaxQPWR))
	p("\tdevice_cap_flags:\t\t0x%08x\n", uint32(a.DeviceCapFlags))
	printFlags(w, uint64(uint32(a.DeviceCapFlags)), devinfoCapFlags, capName)
	p("\tmax_sge:\t\t\t%d\n", d(a.MaxSGE))
	p("\tmax_sge_rd:\t\t\t%d\n", d(a.MaxSGERd))
	p("\tmax_cq:\t\t\t\t%d\n", d(a.MaxCQ))
	p("\tmax_cqe:\t\t\t%d\n", d(a.MaxCQE))
	p("\tmax_mr:\t\t\t\t%d\n", d(a.MaxMR))
	p("\tmax_pd:\t\t\t\t%d\n", d(a.MaxPD))
	p("\tmax_qp_rd_atom:\t\t\t%d\n", d(a.MaxQPRdAtom))
	p("\tmax_ee_rd_atom:\t\t\t%d\n", d(a.MaxEERdAtom))
	p("\tmax_res_rd_atom:\t\t%d\n", d(a.MaxResRdAtom))
	p("\tmax_qp_init_rd_atom:\t\t%d\n", d(a.MaxQPInitRdAtom))
	p("\tmax_ee_init_rd_atom:\t\t%d\n", d(a.MaxEEInitRdAtom))
	p("\tatomic_cap:\t\t\t%s (%d)\n", atomicCapStr(a.AtomicCap), int32(a.AtomicCap))
	p("\tmax_ee:\t\t\t\t%d\n", d(a.MaxEE))
	p("\tmax_rdd:\t\t\t%d\n", d(a.MaxRDD))
	p("\tmax_mw:\t\t\t\t%d\n", d(a.MaxMW))
	p("\tmax_raw_ipv6_qp:\t\t%d\n", d(a.MaxRawIPv6QP))
	p("\tmax_raw_ethy_qp:\t\t%d\n", d(a.MaxRawEthyQP))
	p("\tmax_mcast_grp:\t\t\t%d\n", d(a.MaxMcastGrp))
	p("\tmax_mcast_qp_attach:\t\t%d\n", d(a.MaxMcastQPAttach))
	p("\tmax_total_mcast_qp_attach:\t%d\n", d(a.MaxTotalMcastQPAttach))
	p("\tmax_ah:\t\t\t\t%d\n", d(a.MaxAH))
	p("\tmax_fmr:\t\t\t%d\n", d(a.MaxFMR))
	if a.MaxFMR != 0 {
		p("\tmax_map_per_fmr:\t\t%d\n", d(a.MaxMapPerFMR))
	}
	p("\tmax_srq:\t\t\t%d\n", d(a.MaxSRQ))
	if a.MaxSRQ != 0 {
		p("\tmax_srq_wr:\t\t\t%d\n", d(a.MaxSRQWR))
		p("\tmax_srq_sge:\t\t\t%d\n", d(a.MaxSRQSGE))
	}
	p("\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	odp := a.ODPCaps
	p("\tgeneral_odp_caps:\n")
	printFlags(w, uint64(odp.General), []uint64{uint64(uverbs.ODPSupport), uint64(uverbs.ODPSupportImplicit)},
		func(b uint64) string { return uverbs.ODPGeneralCaps(b).String() })
	for _, t := range []struct {
		name string
		caps uverbs.ODPTransportCaps
	}{{"rc", odp.RC}, {"uc", odp.UC}, {"ud", odp.UD}, {"xrc", odp.XRC}} {
		p("\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			p("\t\t\t\t\tNO SUPPORT\n")
			continue
		}
		printFlags(w, uint64(t.caps), odpTransportFlags, func(b uint64) string { return uverbs.ODPTransportCaps(b).String() })
	}

	if a.CompletionTimestampMask != 0 {
		p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		p("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		p("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		p("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		p("\traw packet caps:\n")
		for _, c := range rawPacketCapNames {
			if a.RawPacketCaps&c.bit != 0 {
				p("\t\t\t\t\t%s\n", c.name)
			}
		}
	}
	p("\tdevice_cap_flags_ex:\t\t0x%X\n", uint64(a.DeviceCapFlagsEx))
	printFlags(w, uint64(a.DeviceCapFlagsEx)&0xffffffff00000000, devinfoCapFlagsEx, capName)

	// TSO limits come only from the mlx5 provider's private response.
	p("\ttso_caps:\n")
	p("\t\tmax_tso:\t\t\t%d\n", 0)

	p("\trss_caps:\n")
	p("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", uint32(a.RSSCaps.MaxRWQIndirectionTables))
	p("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", uint32(a.RSSCaps.MaxRWQIndirectionTableSize))
	// The hash function and fields are mlx5's too.
	p("\t\trx_hash_function:\t\t\t\t0x%x\n", 0)
	p("\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", 0)
	if a.RSSCaps.SupportedQPTs != 0 {
		p("\t\tsupported_qp:\n")
		printFlags(w, uint64(a.RSSCaps.SupportedQPTs), []uint64{1 << qptRawPacket, 1 << qptUD}, qptName)
	}
	p("\tmax_wq_type_rq:\t\t\t%d\n", uint32(a.MaxWQTypeRQ))

	// Packet pacing limits come only from the mlx5 provider too.
	p("\tpacket_pacing_caps:\n")
	p("\t\tqp_rate_limit_min:\t%dkbps\n", 0)
	p("\t\tqp_rate_limit_max:\t%dkbps\n", 0)

	if tm := a.TMCaps; tm.MaxNumTags != 0 {
		p("\tmax_rndv_hdr_size:\t\t%d\n", uint32(tm.MaxRndvHdrSize))
		p("\tmax_num_tags:\t\t\t%d\n", uint32(tm.MaxNumTags))
		p("\tmax_ops:\t\t\t%d\n", uint32(tm.MaxOps))
		p("\tmax_sge:\t\t\t%d\n", uint32(tm.MaxSGE))
		p("\tflags:\n")
		if tm.Flags&tmCapRC != 0 {
			p("\t\t\t\t\tIBV_TM_CAP_RC\n")
		}
	} else {
		p("\ttag matching not supported\n")
	}

	if cq := a.CQModCaps; cq.MaxCQCount != 0 && cq.MaxCQPeriod != 0 {
		p("\n\tcq moderation caps:\n")
		p("\t\tmax_cq_count:\t%d\n", uint32(cq.MaxCQCount))
		p("\t\tmax_cq_period:\t%d us\n\n", uint32(cq.MaxCQPeriod))
	}
	if a.MaxDMSize != 0 {
		p("\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	p("\tnum_comp_vectors:\t\t%d\n", compVectors)
}

// devinfoCapFlags are the device_cap_flags ibv_devinfo names, in its
// order; it prints the rest as unknown.
var devinfoCapFlags = []uint64{
	uint64(uverbs.DeviceCapResizeMaxWR), uint64(uverbs.DeviceCapBadPKeyCntr), uint64(uverbs.DeviceCapBadQKeyCntr),
	uint64(uverbs.DeviceCapRawMulti), uint64(uverbs.DeviceCapAutoPathMig), uint64(uverbs.DeviceCapChangePhyPort),
	uint64(uverbs.DeviceCapUDAVPortEnforce), uint64(uverbs.DeviceCapCurrQPStateMod), uint64(uverbs.DeviceCapShutdownPort),
	uint64(uverbs.DeviceCapInitType), uint64(uverbs.DeviceCapPortActiveEvent), uint64(uverbs.DeviceCapSysImageGUID),
	uint64(uverbs.DeviceCapRCRNRNAKGen), uint64(uverbs.DeviceCapSRQResize), uint64(uverbs.DeviceCapNNotifyCQ),
	uint64(uverbs.DeviceCapMemWindow), uint64(uverbs.DeviceCapUDIPCsum), uint64(uverbs.DeviceCapXRC),
	uint64(uverbs.DeviceCapMemMgtExtensions), uint64(uverbs.DeviceCapMemWindowType2A), uint64(uverbs.DeviceCapMemWindowType2B),
	uint64(uverbs.DeviceCapRCIPCsum), uint64(uverbs.DeviceCapRawIPCsum), uint64(uverbs.DeviceCapManagedFlowSteering),
}

// devinfoCapFlagsEx are the upper 32 bits of device_cap_flags_ex it
// names. FLUSH_GLOBAL, FLUSH_PERSISTENT and ATOMIC_WRITE are not among
// them: on Linux 6.2 and later rxe shows "Unknown flags: 0x1C000000000".
var devinfoCapFlagsEx = []uint64{
	uint64(uverbs.DeviceCapRawScatterFCS), uint64(uverbs.DeviceCapPCIWriteEndPadding), uint64(uverbs.DeviceCapCCDMABounce),
}

var odpTransportFlags = []uint64{
	uint64(uverbs.ODPSupportSend), uint64(uverbs.ODPSupportRecv), uint64(uverbs.ODPSupportWrite),
	uint64(uverbs.ODPSupportRead), uint64(uverbs.ODPSupportAtomic), uint64(uverbs.ODPSupportSRQRecv),
	uint64(uverbs.ODPSupportFlush), uint64(uverbs.ODPSupportAtomicWrite),
}

func capName(b uint64) string { return uverbs.DeviceCap(b).String() }

var rawPacketCapNames = []struct {
	bit  uverbs.RawPacketCaps
	name string
}{
	{uverbs.RawPacketCVLANStripping, "C-VLAN stripping offload"},
	{uverbs.RawPacketScatterFCS, "Scatter FCS offload"},
	{uverbs.RawPacketIPCsum, "IP csum offload"},
	{uverbs.RawPacketDelayDrop, "Delay drop"},
}

// QP types (ibv_qp_type) as bit numbers of supported_qpts, and
// IBV_TM_CAP_RC.
const (
	qptUD        = 4
	qptRawPacket = 8
	tmCapRC      = 1
)

func qptName(b uint64) string {
	if b == 1<<qptRawPacket {
		return "SUPPORT_RAW_PACKET"
	}
	return "SUPPORT_UD"
}

// printFlags prints the name of each flag of known set in v, in known's
// order, then the rest of v as "Unknown flags", the way devinfo.c's
// print_*_flags functions do.
func printFlags(w io.Writer, v uint64, known []uint64, name func(uint64) string) {
	unknown := v
	for _, k := range known {
		if v&k != 0 {
			fmt.Fprintf(w, "\t\t\t\t\t%s\n", name(k))
		}
		unknown &^= k
	}
	if unknown != 0 {
		fmt.Fprintf(w, "\t\t\t\t\tUnknown flags: 0x%X\n", unknown)
	}
}

// printGIDs prints the GID lines of a port, as print_all_port_gids does:
// entries whose interface ID (the low 8 bytes) is zero are skipped; IB
// and RoCE v1 GIDs print in full hex, RoCE v2 ones as inet_ntop writes
// IPv6 addresses; on Ethernet the type follows.
func printGIDs(w io.Writer, gids []uverbs.GIDEntry, ll uverbs.LinkLayer) {
	for _, e := range gids {
		if e.GID[8]|e.GID[9]|e.GID[10]|e.GID[11]|e.GID[12]|e.GID[13]|e.GID[14]|e.GID[15] == 0 {
			continue
		}
		// libibverbs' ibv_query_gid_type folds IB into "IB/RoCE v1" and
		// every other type into RoCE v2.
		v1 := e.Type == uverbs.GIDTypeIB || e.Type == uverbs.GIDTypeRoCEv1
		suffix := ""
		if ll == uverbs.LinkLayerEthernet {
			if v1 {
				suffix = ", RoCE v1"
			} else {
				suffix = ", RoCE v2"
			}
		}
		s := e.GID.String()
		if !v1 {
			s = inetNtop6(e.GID)
		}
		fmt.Fprintf(w, "\t\t\tGID[%3d]:\t\t%s%s\n", e.Index, s, suffix)
	}
}

// inetNtop6 formats an IPv6 address exactly as glibc's inet_ntop does,
// which differs from Go's net.IP.String for IPv4-mapped and
// IPv4-compatible addresses ("::ffff:198.18.0.1", "::1.2.3.4"): the
// longest run of two or more zero groups (the first of equal runs)
// becomes "::", groups are lowercase hex without leading zeros.
func inetNtop6(a [16]byte) string {
	var words [8]int
	for i := range words {
		words[i] = int(a[2*i])<<8 | int(a[2*i+1])
	}
	bestBase, bestLen, curBase, curLen := -1, 0, -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase == -1 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase != -1 {
			if bestBase == -1 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase != -1 && (bestBase == -1 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase != -1 && bestLen < 2 {
		bestBase = -1
	}
	var b strings.Builder
	for i := 0; i < len(words); i++ {
		if bestBase != -1 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || bestLen == 5 && words[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", a[12], a[13], a[14], a[15])
			return b.String()
		}
		fmt.Fprintf(&b, "%x", words[i])
	}
	if bestBase != -1 && bestBase+bestLen == len(words) {
		b.WriteByte(':')
	}
	return b.String()
}

func transportStr(t uverbs.Transport) string {
	switch t {
	case uverbs.TransportIB, uverbs.TransportIWARP, uverbs.TransportUSNIC, uverbs.TransportUSNICUDP, uverbs.TransportUnspecified:
		return t.String()
	}
	return "invalid transport"
}

func portStateStr(s uverbs.PortState) string {
	switch s {
	case uverbs.PortDown, uverbs.PortInit, uverbs.PortArmed, uverbs.PortActive:
		return s.String()
	}
	return "invalid state"
}

func physStateStr(s uint8) string {
	names := []string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
		5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return "invalid physical state"
}

func atomicCapStr(a uverbs.AtomicCap) string {
	switch a {
	case uverbs.AtomicNone, uverbs.AtomicHCA, uverbs.AtomicGlob:
		return a.String()
	}
	return "invalid atomic capability"
}

func mtuStr(m uverbs.MTU) string {
	if m.Bytes() == 0 {
		return "invalid MTU"
	}
	return m.String()
}

func linkLayerStr(l uverbs.LinkLayer) string {
	switch l {
	case uverbs.LinkLayerUnspecified, uverbs.LinkLayerInfiniBand, uverbs.LinkLayerEthernet:
		return l.String()
	}
	return "Unknown"
}

func widthStr(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedStr(s uint32) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	case 256:
		return "200.0 Gbps"
	}
	return "invalid speed"
}

func vlStr(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}
