package uverbs_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

type vmDevice struct{ name, netdev, ip string }

// vmDevices are the current fabric's devices in the VM: rxe0 on veth0
// (198.18.0.1) and rxe1 on veth1 (198.18.0.2), or siw0 on veth2
// (198.18.1.1) and siw1 on veth3 (198.18.1.2).
func vmDevices() []vmDevice {
	f := testenv.CurrentFabric()
	var ds []vmDevice
	for i := range f.Devs {
		ds = append(ds, vmDevice{f.Devs[i], f.Netdevs[i], f.Addrs[i].String()})
	}
	return ds
}

// openVMDevice opens one of the VM's devices and closes it at cleanup.
func openVMDevice(t *testing.T, devs []uverbs.Device, name string) (uverbs.Device, *uverbs.Context) {
	t.Helper()
	for _, d := range devs {
		if d.Name != name {
			continue
		}
		c, err := d.Open(nil)
		if err != nil {
			t.Fatalf("Open(%s): %v", name, err)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("Close(%s): %v", name, err)
			}
		})
		return d, c
	}
	t.Fatalf("no device %s among %d devices", name, len(devs))
	return uverbs.Device{}, nil
}

// vmKernel is the series of the VM's kernel, "6.1" or "6.12", or ""
// for another one. 6.12's rxe has FLUSH, ATOMIC WRITE and
// active_speed_ex; 6.1's has none of them (docs/testing.md).
func vmKernel() string {
	v := os.Getenv("PURERDMA_VM")
	switch {
	case strings.HasPrefix(v, "6.12."):
		return "6.12"
	case strings.HasPrefix(v, "6.1."):
		return "6.1"
	}
	return ""
}

func TestQueryDeviceInVM(t *testing.T) {
	devs := fabricDevices(t)
	for _, vd := range vmDevices() {
		t.Run(vd.name, func(t *testing.T) {
			d, c := openVMDevice(t, devs, vd.name)
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatalf("QueryDevice: %v", err)
			}
			t.Logf("%+v", a)
			if a.MaxQP <= 0 || a.MaxQPWR <= 0 || a.MaxCQ <= 0 || a.MaxCQE <= 0 || a.MaxMR <= 0 || a.MaxPD <= 0 || a.MaxSGE <= 0 {
				t.Errorf("limits not positive: MaxQP %d MaxQPWR %d MaxCQ %d MaxCQE %d MaxMR %d MaxPD %d MaxSGE %d",
					a.MaxQP, a.MaxQPWR, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD, a.MaxSGE)
			}
			if a.PhysPortCnt != 1 {
				t.Errorf("PhysPortCnt = %d, want 1", a.PhysPortCnt)
			}
			if a.NodeGUID != d.NodeGUID || a.SysImageGUID != d.SysImageGUID {
				t.Errorf("NodeGUID, SysImageGUID = %v, %v; sysfs says %v, %v", a.NodeGUID, a.SysImageGUID, d.NodeGUID, d.SysImageGUID)
			}
			// rxe: RXE_VENDOR_ID, firmware version 0 and no sysfs fw_ver,
			// atomics within the device. siw: SIW_VENDOR_ID ("bmt"),
			// no firmware version either, no atomics (RDMAP has none).
			want := struct {
				vendor uint32
				atomic uverbs.AtomicCap
			}{0xffffff, uverbs.AtomicHCA}
			if testenv.CurrentFabric().IWARP {
				want.vendor, want.atomic = 0x626d74, uverbs.AtomicNone
			}
			if a.VendorID != want.vendor || a.FWVer != "0.0.0" || a.AtomicCap != want.atomic {
				t.Errorf("VendorID %#x, FWVer %q, AtomicCap %v; want %#x, 0.0.0, %v", a.VendorID, a.FWVer, a.AtomicCap, want.vendor, want.atomic)
			}
			if low := a.DeviceCapFlagsEx & 0xffffffff; low != a.DeviceCapFlags {
				t.Errorf("DeviceCapFlagsEx %v does not extend DeviceCapFlags %v", a.DeviceCapFlagsEx, a.DeviceCapFlags)
			}
			if a.DeviceCapFlags&uverbs.DeviceCapMemMgtExtensions == 0 {
				t.Errorf("DeviceCapFlags %v lack MEM_MGT_EXTENSIONS", a.DeviceCapFlags)
			}

			global, persistent := a.SupportsFlush()
			write := a.SupportsAtomicWrite()
			if k := vmKernel(); k != "" {
				want := k == "6.12" && !testenv.CurrentFabric().IWARP // siw has neither
				if global != want || persistent != want || write != want {
					t.Errorf("kernel %s: flush global %v, persistent %v, atomic write %v; want all %v",
						os.Getenv("PURERDMA_VM"), global, persistent, write, want)
				}
			} else {
				t.Logf("kernel %q: flush %v/%v, atomic write %v (not checked)", os.Getenv("PURERDMA_VM"), global, persistent, write)
			}

			// The legacy command reports the same base attributes and
			// nothing else.
			legacy, err := uverbs.QueryDeviceLegacy(c)
			if err != nil {
				t.Fatalf("legacy QUERY_DEVICE: %v", err)
			}
			base := a
			base.FWVer, base.BoardID = "", ""
			base.ODPCaps, base.CompletionTimestampMask, base.HCACoreClock, base.DeviceCapFlagsEx = uverbs.ODPCaps{}, 0, 0, 0
			base.RSSCaps, base.MaxWQTypeRQ, base.RawPacketCaps = uverbs.RSSCaps{}, 0, 0
			base.TMCaps, base.CQModCaps, base.MaxDMSize = uverbs.TMCaps{}, uverbs.CQModCaps{}, 0
			if diff := cmp.Diff(base, legacy); diff != "" {
				t.Errorf("legacy QUERY_DEVICE against the extended one (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueryPortInVM(t *testing.T) {
	devs := fabricDevices(t)
	for _, vd := range vmDevices() {
		t.Run(vd.name, func(t *testing.T) {
			_, c := openVMDevice(t, devs, vd.name)
			p, err := c.QueryPort(1)
			if err != nil {
				t.Fatalf("QueryPort(1): %v", err)
			}
			t.Logf("%+v", p)
			if p.State != uverbs.PortActive || p.LinkLayer != uverbs.LinkLayerEthernet {
				t.Errorf("State %v, LinkLayer %v; want PORT_ACTIVE on Ethernet", p.State, p.LinkLayer)
			}
			if testenv.CurrentFabric().IWARP {
				// siw: the MTU of the netdev as an IB MTU, no header
				// subtracted; 6.1 reports it as the maximum too,
				// 6.12 the netdev's max_mtu (a veth's is 65535). One
				// GID, no P_Key table.
				mtu := netdevMTU(t, vd.netdev)
				wantMax := mtu
				if vmKernel() == "6.12" {
					wantMax = uverbs.MTU4096
				}
				if p.MaxMTU != wantMax || p.ActiveMTU != mtu {
					t.Errorf("MaxMTU %v, ActiveMTU %v; want %v, %v for the MTU of %s", p.MaxMTU, p.ActiveMTU, wantMax, mtu, vd.netdev)
				}
				if p.GIDTblLen != 1 || p.PKeyTblLen != 0 || p.MaxMsgSz == 0 {
					t.Errorf("GIDTblLen %d, PKeyTblLen %d, MaxMsgSz %d; want siw's 1, 0 and a positive size", p.GIDTblLen, p.PKeyTblLen, p.MaxMsgSz)
				}
			} else {
				if p.MaxMTU != uverbs.MTU4096 {
					t.Errorf("MaxMTU = %v, want 4096", p.MaxMTU)
				}
				if want := rxeActiveMTU(t, vd.netdev); p.ActiveMTU != want {
					t.Errorf("ActiveMTU = %v, want %v for the MTU of %s", p.ActiveMTU, want, vd.netdev)
				}
				if p.GIDTblLen <= 0 || p.PKeyTblLen <= 0 || p.MaxMsgSz == 0 {
					t.Errorf("GIDTblLen %d, PKeyTblLen %d, MaxMsgSz %d; want all positive", p.GIDTblLen, p.PKeyTblLen, p.MaxMsgSz)
				}
			}
			if p.PhysState != 5 {
				t.Errorf("PhysState = %d, want 5 (LINK_UP)", p.PhysState)
			}
			// Linux 6.7 added active_speed_ex, which repeats the 8-bit
			// speed; 6.1 leaves the bytes zero.
			wantEx := map[string]uint32{"6.1": 0, "6.12": uint32(p.ActiveSpeed)}
			if want, ok := wantEx[vmKernel()]; ok && p.ActiveSpeedEx != want {
				t.Errorf("kernel %s: ActiveSpeedEx = %d, want %d", vmKernel(), p.ActiveSpeedEx, want)
			}
			if p.ActiveSpeed != 8 || p.ActiveWidth != 1 {
				t.Errorf("ActiveSpeed %d, ActiveWidth %d; want 8 (10 Gb/s), 1 (1X) on a veth", p.ActiveSpeed, p.ActiveWidth)
			}

			legacy, err := uverbs.QueryPortLegacy(c, 1)
			if err != nil {
				t.Fatalf("legacy QUERY_PORT: %v", err)
			}
			want := p
			want.PortCapFlags2, want.ActiveSpeedEx = 0, 0 // not in the legacy response
			if diff := cmp.Diff(want, legacy); diff != "" {
				t.Errorf("legacy QUERY_PORT against the ioctl (-want +got):\n%s", diff)
			}

			// Ports that do not exist fail before the kernel is asked,
			// with an error that says so.
			for _, port := range []int{0, 2, -1} {
				_, err := c.QueryPort(port)
				if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), vd.name+" has no port "+strconv.Itoa(port)) {
					t.Errorf("QueryPort(%d) = %v; want EINVAL naming the port", port, err)
				}
				if _, err := c.GIDTable(port); !errors.Is(err, syscall.EINVAL) {
					t.Errorf("GIDTable(%d) = %v; want EINVAL", port, err)
				}
			}
		})
	}
}

// rxeActiveMTU is the active MTU rxe gives a port on netdev: the largest
// IB MTU that fits the network device's MTU less RXE_MAX_HDR_LENGTH (80)
// bytes of headers (rxe_set_mtu, eth_mtu_int_to_enum).
func rxeActiveMTU(t *testing.T, netdev string) uverbs.MTU {
	t.Helper()
	return ibMTU(netdevBytes(t, netdev) - 80)
}

// netdevMTU is netdev's MTU as siw reports it: the largest IB MTU that
// fits it (ib_mtu_int_to_enum).
func netdevMTU(t *testing.T, netdev string) uverbs.MTU {
	t.Helper()
	return ibMTU(netdevBytes(t, netdev))
}

func netdevBytes(t *testing.T, netdev string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/net", netdev, "mtu"))
	if err != nil {
		t.Fatal(err)
	}
	mtu, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return mtu
}

// ibMTU is the largest IB MTU of at most n bytes (256 at least).
func ibMTU(n int) uverbs.MTU {
	best := uverbs.MTU256
	for m := uverbs.MTU256; m <= uverbs.MTU4096; m++ {
		if m.Bytes() <= n {
			best = m
		}
	}
	return best
}

func TestQueryGIDTableInVM(t *testing.T) {
	devs := fabricDevices(t)
	for _, vd := range vmDevices() {
		t.Run(vd.name, func(t *testing.T) {
			_, c := openVMDevice(t, devs, vd.name)
			p, err := c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			gids, err := c.GIDTable(1)
			if err != nil {
				t.Fatalf("GIDTable(1): %v", err)
			}
			ifi, err := net.InterfaceByName(vd.netdev)
			if err != nil {
				t.Fatal(err)
			}
			iwarp := testenv.CurrentFabric().IWARP
			if iwarp {
				// siw: one GID, the netdev's MAC address and zeros
				// (siw_query_gid), of type IB. 6.1's GID cache gives
				// it no netdev; 6.12's siw registers its netdev with
				// the core (ib_device_set_netdev), which names it.
				var want uverbs.GID
				copy(want[:], ifi.HardwareAddr)
				wantNetdev, wantIndex := vd.netdev, ifi.Index
				if vmKernel() == "6.1" {
					wantNetdev, wantIndex = "", 0
				}
				if len(gids) != 1 || gids[0].GID != want || gids[0].Type != uverbs.GIDTypeIB ||
					gids[0].Netdev != wantNetdev || gids[0].NetdevIndex != wantIndex {
					t.Errorf("GID table %+v; want one IB GID %v with netdev %q/%d", gids, want, wantNetdev, wantIndex)
				}
			}
			found := iwarp // RoCE v2 GIDs are RoCE's
			used := map[int]bool{}
			for i, e := range gids {
				t.Logf("GID[%d] %s (%s) %v netdev %s/%d", e.Index, e.GID, e.GID.IP(), e.Type, e.Netdev, e.NetdevIndex)
				if e.Port != 1 || e.GID.IsZero() || e.Index < 0 || e.Index >= p.GIDTblLen || i > 0 && gids[i-1].Index >= e.Index {
					t.Errorf("entry %d: %+v: wrong port, empty, out of range or out of order", i, e)
				}
				if !iwarp && (e.Netdev != vd.netdev || e.NetdevIndex != ifi.Index) {
					t.Errorf("GID[%d] netdev %s/%d, want %s/%d", e.Index, e.Netdev, e.NetdevIndex, vd.netdev, ifi.Index)
				}
				used[e.Index] = true
				if e.Type == uverbs.GIDTypeRoCEv2 && e.GID.IP().Equal(net.ParseIP(vd.ip)) {
					found = true
				}
				checkSysfsGID(t, vd.name, e)

				// One entry at a time agrees with the table.
				one, err := c.QueryGIDEntry(1, e.Index)
				if err != nil {
					t.Errorf("QueryGIDEntry(1, %d): %v", e.Index, err)
				} else if diff := cmp.Diff(e, one); diff != "" {
					t.Errorf("QueryGIDEntry(1, %d) against the table (-want +got):\n%s", e.Index, diff)
				}
				if g, err := c.QueryGID(1, e.Index); err != nil || g != e.GID {
					t.Errorf("QueryGID(1, %d) = %v, %v; want %v", e.Index, g, err, e.GID)
				}
			}
			if !found {
				t.Errorf("no RoCE v2 GID for %s in %d entries", vd.ip, len(gids))
			}

			empty := p.GIDTblLen - 1
			for used[empty] {
				empty--
			}
			// siw's one-entry table has no empty entry.
			if _, err := c.QueryGID(1, empty); empty >= 0 && !errors.Is(err, syscall.ENODATA) {
				t.Errorf("QueryGID of the empty entry %d = %v, want ENODATA", empty, err)
			}
			if _, err := c.QueryGID(1, p.GIDTblLen); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("QueryGID past the table (%d) = %v, want EINVAL", p.GIDTblLen, err)
			}
			if _, err := c.QueryGID(1, -1); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("QueryGID(1, -1) = %v, want EINVAL", err)
			}
		})
	}
}

// checkSysfsGID compares a GID entry with what sysfs says about it.
func checkSysfsGID(t *testing.T, dev string, e uverbs.GIDEntry) {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", dev, "ports", strconv.Itoa(e.Port))
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel, strconv.Itoa(e.Index)))
		if err != nil {
			t.Errorf("GID[%d]: %v", e.Index, err)
		}
		return strings.TrimSpace(string(b))
	}
	if s := read("gids"); s != e.GID.String() {
		t.Errorf("GID[%d] = %s, sysfs says %s", e.Index, e.GID, s)
	}
	wantType := map[uverbs.GIDType]string{uverbs.GIDTypeIB: "IB/RoCE v1", uverbs.GIDTypeRoCEv1: "IB/RoCE v1", uverbs.GIDTypeRoCEv2: "RoCE v2"}[e.Type]
	if s := read("gid_attrs/types"); s != wantType {
		t.Errorf("GID[%d] type %v, sysfs says %q", e.Index, e.Type, s)
	}
	if e.Netdev == "" && testenv.CurrentFabric().IWARP {
		// siw on 6.1: no netdev in the GID cache, the kernel refuses
		// the read.
		p := filepath.Join(dir, "gid_attrs/ndevs", strconv.Itoa(e.Index))
		if _, err := os.ReadFile(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("reading %s = %v, want EINVAL", p, err)
		}
	} else if s := read("gid_attrs/ndevs"); s != e.Netdev {
		t.Errorf("GID[%d] netdev %q, sysfs says %q", e.Index, e.Netdev, s)
	}
}

func TestQueryPKeyInVM(t *testing.T) {
	devs := fabricDevices(t)
	_, c := openVMDevice(t, devs, testenv.CurrentFabric().Devs[0])
	p, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.CurrentFabric().IWARP {
		// iWARP has no partitions: siw's port has no P_Key table.
		if k, err := c.QueryPKey(1, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("siw QueryPKey(1, 0) = %#x, %v; want an error matching fs.ErrNotExist", k, err)
		}
	} else if k, err := c.QueryPKey(1, 0); err != nil || k != 0xffff {
		t.Errorf("QueryPKey(1, 0) = %#x, %v; want the default 0xffff", k, err)
	}
	if k, err := c.QueryPKey(1, p.PKeyTblLen); err == nil {
		t.Errorf("QueryPKey(1, %d) past the %d-entry table = %#x, want an error", p.PKeyTblLen, p.PKeyTblLen, k)
	}
	if _, err := c.QueryPKey(2, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("QueryPKey(2, 0) = %v, want EINVAL", err)
	}
}

func TestQueryAfterCloseInVM(t *testing.T) {
	devs := fabricDevices(t)
	_, c := openVMDevice(t, devs, testenv.CurrentFabric().Devs[1])
	if _, err := c.QueryDevice(); err != nil {
		t.Fatalf("QueryDevice on the open context: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"QueryDevice":   func() error { _, err := c.QueryDevice(); return err },
		"QueryPort":     func() error { _, err := c.QueryPort(1); return err },
		"GIDTable":      func() error { _, err := c.GIDTable(1); return err },
		"QueryGID":      func() error { _, err := c.QueryGID(1, 0); return err },
		"QueryGIDEntry": func() error { _, err := c.QueryGIDEntry(1, 0); return err },
		"QueryPKey":     func() error { _, err := c.QueryPKey(1, 0); return err },
	} {
		if err := call(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}
