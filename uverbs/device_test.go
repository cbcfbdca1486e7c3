package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSysfs builds a sysfs tree in a temporary directory and points
// sysfsRoot at it for the rest of the test. A value starting with "-> "
// makes a symlink to the rest of the value; any other value is the
// content of a regular file.
func fakeSysfs(t *testing.T, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, oldNetdevs := sysfsRoot, portNetdevs
	sysfsRoot = root
	portNetdevs = func() (map[portKey]string, error) { return nil, errors.New("no RDMA netlink in a fake sysfs") }
	t.Cleanup(func() { sysfsRoot, portNetdevs = old, oldNetdevs })
}

// merge combines fake sysfs trees.
func merge(trees ...map[string]string) map[string]string {
	all := map[string]string{}
	for _, t := range trees {
		for k, v := range t {
			all[k] = v
		}
	}
	return all
}

const verbsABI = "class/infiniband_verbs/abi_version"

// rxeTree lays out an rxe device the way the kernel does: the devices live
// under devices/virtual and the class directories hold symlinks to them.
func rxeTree(ibdev, uverbs, netdev, guid string) map[string]string {
	uv := "devices/virtual/infiniband_verbs/" + uverbs + "/"
	ib := "devices/virtual/infiniband/" + ibdev + "/"
	return map[string]string{
		"class/infiniband_verbs/" + uverbs: "-> ../../" + uv,
		uv + "ibdev":                       ibdev + "\n",
		uv + "abi_version":                 "2\n",
		uv + "dev":                         "231:192\n",
		"class/infiniband/" + ibdev:        "-> ../../" + ib,
		ib + "node_type":                   "1: CA\n",
		ib + "node_guid":                   guid + "\n",
		ib + "sys_image_guid":              guid + "\n",
		ib + "fw_ver":                      "0.0.0\n",
		ib + "node_desc":                   "rxe\n",
		ib + "ports/1/state":               "4: ACTIVE\n",
		ib + "ports/1/phys_state":          "5: LinkUp\n",
		ib + "ports/1/link_layer":          "Ethernet\n",
		ib + "ports/1/gid_attrs/ndevs/0":   netdev + "\n",
		ib + "ports/1/gid_attrs/types/0":   "IB/RoCE v1\n",
		ib + "ports/1/rate":                "10 Gb/sec (1X QDR)\n",
	}
}

func rxeDevice(name, uverbs, netdev string, guid GUID) Device {
	return Device{
		Name:             name,
		NodeGUID:         guid,
		SysImageGUID:     guid,
		NodeType:         NodeCA,
		Transport:        TransportIB,
		NodeDesc:         "rxe",
		FWVersion:        "0.0.0",
		DriverName:       "rxe",
		UverbsName:       uverbs,
		DevPath:          "/dev/infiniband/" + uverbs,
		ABIVersion:       6,
		DriverABIVersion: 2,
		Ports: []Port{{Num: 1, State: PortActive, PhysState: "LinkUp",
			LinkLayer: "Ethernet", Netdev: netdev}},
	}
}

// mlxTree is a two-port InfiniBand HCA on PCI, with a driver link and a
// port whose GID 0 has no network device (the ndevs file is absent).
var mlxTree = map[string]string{
	"class/infiniband_verbs/uverbs10":                                             "-> ../../devices/pci0000:00/0000:00:03.0/infiniband_verbs/uverbs10",
	"devices/pci0000:00/0000:00:03.0/infiniband_verbs/uverbs10/ibdev":             "mlx5_0\n",
	"devices/pci0000:00/0000:00:03.0/infiniband_verbs/uverbs10/abi_version":       "1\n",
	"devices/pci0000:00/0000:00:03.0/driver":                                      "-> ../../../bus/pci/drivers/mlx5_core",
	"class/infiniband/mlx5_0":                                                     "-> ../../devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/device":                    "-> ../../../0000:00:03.0",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/node_type":                 "1: CA\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/node_guid":                 "0002:c903:00a0:b0c0\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/sys_image_guid":            "0002:c903:00a0:b0c0\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/fw_ver":                    "16.35.2000\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/node_desc":                 "host1 mlx5_0\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/2/state":             "1: DOWN\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/2/phys_state":        "3: Disabled\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/2/link_layer":        "InfiniBand\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/1/state":             "4: ACTIVE\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/1/phys_state":        "5: LinkUp\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/1/link_layer":        "InfiniBand\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/1/gid_attrs/types/0": "IB/RoCE v1\n",
	"devices/pci0000:00/0000:00:03.0/infiniband/mlx5_0/ports/10/state":            "2: INIT\n",
}

var mlxDevice = Device{
	Name:             "mlx5_0",
	NodeGUID:         0x0002c90300a0b0c0,
	SysImageGUID:     0x0002c90300a0b0c0,
	NodeType:         NodeCA,
	Transport:        TransportIB,
	NodeDesc:         "host1 mlx5_0",
	FWVersion:        "16.35.2000",
	DriverName:       "mlx5_core",
	UverbsName:       "uverbs10",
	DevPath:          "/dev/infiniband/uverbs10",
	ABIVersion:       6,
	DriverABIVersion: 1,
	Ports: []Port{
		{Num: 1, State: PortActive, PhysState: "LinkUp", LinkLayer: "InfiniBand"},
		{Num: 2, State: PortDown, PhysState: "Disabled", LinkLayer: "InfiniBand"},
		{Num: 10, State: PortInit},
	},
}

// siwTree is a soft-iWARP device with only the attributes that matter.
// As on Linux 6.1, its port has no gid_attrs/ndevs to read: its netdev
// comes from RDMA netlink's port dump (fakeSiwNetdev).
var siwTree = map[string]string{
	"class/infiniband_verbs/uverbs3/ibdev":         "siw_eth0\n",
	"class/infiniband/siw_eth0/node_type":          "4: RNIC\n",
	"class/infiniband/siw_eth0/node_guid":          "0250:56ff:fe00:0001\n",
	"class/infiniband/siw_eth0/node_desc":          "Software iWARP stack\n",
	"class/infiniband/siw_eth0/ports/1/state":      "4: ACTIVE\n",
	"class/infiniband/siw_eth0/ports/1/link_layer": "Ethernet\n",
}

// fakeSiwNetdev answers portNetdevs as RDMA netlink would for siwTree.
func fakeSiwNetdev(t *testing.T) {
	old := portNetdevs
	portNetdevs = func() (map[portKey]string, error) {
		return map[portKey]string{{"siw_eth0", 1}: "eth0"}, nil
	}
	t.Cleanup(func() { portNetdevs = old })
}

// TestDevicesNetdevFromNetlink: a port sysfs gives no netdev keeps none
// when RDMA netlink cannot say either, and gets netlink's when it can;
// ports whose sysfs names one are not asked about.
func TestDevicesNetdevFromNetlink(t *testing.T) {
	abi := map[string]string{verbsABI: "6\n"}
	fakeSysfs(t, merge(abi, siwTree))
	d, err := DeviceByName("siw_eth0")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Ports[0].Netdev; got != "" {
		t.Errorf("netdev without netlink = %q, want none", got)
	}
	fakeSiwNetdev(t)
	d, err = DeviceByName("siw_eth0")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Ports[0].Netdev; got != "eth0" {
		t.Errorf("netdev from netlink = %q, want eth0", got)
	}

	fakeSysfs(t, merge(abi, rxeTree("rxe0", "uverbs0", "veth0", "5054:00ff:fe12:3456")))
	portNetdevs = func() (map[portKey]string, error) {
		t.Error("netlink asked though sysfs named every netdev")
		return nil, nil
	}
	if _, err := Devices(); err != nil {
		t.Fatal(err)
	}
}

var siwDevice = Device{
	Name:       "siw_eth0",
	NodeGUID:   0x025056fffe000001,
	NodeType:   NodeRNIC,
	Transport:  TransportIWARP,
	NodeDesc:   "Software iWARP stack",
	DriverName: "siw",
	UverbsName: "uverbs3",
	DevPath:    "/dev/infiniband/uverbs3",
	Ports:      []Port{{Num: 1, State: PortActive, LinkLayer: "Ethernet", Netdev: "eth0"}},
}

func TestDevices(t *testing.T) {
	abi := map[string]string{verbsABI: "6\n"}
	tests := []struct {
		name string
		tree map[string]string
		want []Device
	}{
		{
			name: "no RDMA in the kernel",
			tree: map[string]string{"class/net/lo/mtu": "65536\n"},
		},
		{
			name: "uverbs loaded, no devices",
			tree: abi,
		},
		{
			name: "two rxe devices",
			tree: merge(abi,
				rxeTree("rxe1", "uverbs1", "veth1", "5054:00ff:fe12:3457"),
				rxeTree("rxe0", "uverbs0", "veth0", "5054:00ff:fe12:3456")),
			want: []Device{
				rxeDevice("rxe0", "uverbs0", "veth0", 0x505400fffe123456),
				rxeDevice("rxe1", "uverbs1", "veth1", 0x505400fffe123457),
			},
		},
		{
			name: "mixed drivers sorted by device name",
			tree: merge(abi, siwTree, mlxTree, rxeTree("rxe0", "uverbs0", "veth0", "5054:00ff:fe12:3456")),
			want: []Device{
				mlxDevice,
				rxeDevice("rxe0", "uverbs0", "veth0", 0x505400fffe123456),
				func() Device { d := siwDevice; d.ABIVersion = 6; return d }(),
			},
		},
		{
			name: "devices removed during the scan are skipped",
			tree: merge(abi, rxeTree("rxe0", "uverbs0", "veth0", "5054:00ff:fe12:3456"), map[string]string{
				// uverbs1 names an IB device that is already gone.
				"class/infiniband_verbs/uverbs1/ibdev": "rxe9\n",
				// uverbs2 is being torn down: no ibdev file.
				"class/infiniband_verbs/uverbs2/dev": "231:194\n",
			}),
			want: []Device{rxeDevice("rxe0", "uverbs0", "veth0", 0x505400fffe123456)},
		},
		{
			name: "other class entries are ignored",
			tree: merge(abi, siwTree, map[string]string{
				"class/infiniband_verbs/umad0/ibdev": "siw_eth0\n",
			}),
			want: []Device{func() Device { d := siwDevice; d.ABIVersion = 6; return d }()},
		},
		{
			name: "no abi_version, no node_type, no ports",
			tree: map[string]string{
				"class/infiniband_verbs/uverbs0/ibdev": "bare\n",
				"class/infiniband/bare/node_guid":      "0000:0000:0000:0001\n",
			},
			want: []Device{{Name: "bare", NodeGUID: 1, NodeType: NodeUnknown,
				Transport: TransportUnknown, UverbsName: "uverbs0", DevPath: "/dev/infiniband/uverbs0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeSysfs(t, tt.tree)
			fakeSiwNetdev(t)
			got, err := Devices()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Devices() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDevicesErrors(t *testing.T) {
	base := merge(map[string]string{verbsABI: "6\n"}, siwTree)
	tests := []struct {
		name    string
		tree    map[string]string
		mention string
	}{
		{"malformed abi_version", map[string]string{verbsABI: "six\n"}, "abi_version"},
		{"malformed driver abi_version", map[string]string{"class/infiniband_verbs/uverbs3/abi_version": "x\n"}, "uverbs3/abi_version"},
		{"malformed node_guid", map[string]string{"class/infiniband/siw_eth0/node_guid": "0250:56ff:fe00\n"}, "node_guid"},
		{"malformed sys_image_guid", map[string]string{"class/infiniband/siw_eth0/sys_image_guid": "zz:0:0:0\n"}, "sys_image_guid"},
		{"malformed node_type", map[string]string{"class/infiniband/siw_eth0/node_type": "RNIC\n"}, "node_type"},
		{"malformed port state", map[string]string{"class/infiniband/siw_eth0/ports/1/state": "ACTIVE\n"}, "ports/1/state"},
		{"bad ibdev name", map[string]string{"class/infiniband_verbs/uverbs3/ibdev": "../siw_eth0\n"}, "bad device name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeSysfs(t, merge(base, tt.tree))
			devs, err := Devices()
			if err == nil {
				t.Fatalf("Devices() = %v, want an error", devs)
			}
			if !strings.HasPrefix(err.Error(), "uverbs Devices: ") || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not start with \"uverbs Devices: \" and mention %q", err, tt.mention)
			}
		})
	}
}

func TestDevicesUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	fakeSysfs(t, merge(map[string]string{verbsABI: "6\n"}, siwTree))
	if err := os.Chmod(filepath.Join(sysfsRoot, "class/infiniband/siw_eth0/node_guid"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Devices(); !errors.Is(err, os.ErrPermission) {
		t.Errorf("Devices() error = %v, want os.ErrPermission", err)
	}
}

func TestDeviceByName(t *testing.T) {
	fakeSysfs(t, merge(map[string]string{verbsABI: "6\n"}, mlxTree,
		rxeTree("rxe0", "uverbs0", "veth0", "5054:00ff:fe12:3456")))
	d, err := DeviceByName("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rxeDevice("rxe0", "uverbs0", "veth0", 0x505400fffe123456), d); diff != "" {
		t.Errorf("DeviceByName(rxe0) mismatch (-want +got):\n%s", diff)
	}
	_, err = DeviceByName("rxe7")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DeviceByName(rxe7) error = %v, want os.ErrNotExist", err)
	}
	if err != nil && !strings.Contains(err.Error(), `"rxe7"`) {
		t.Errorf("error %q does not name the device", err)
	}
	// It lists what is there, with the network devices.
	if err == nil {
		t.Fatal("DeviceByName(rxe7) found a device")
	}
	if !strings.Contains(err.Error(), "the devices present are ") || !strings.Contains(err.Error(), "rxe0 (netdev veth0)") {
		t.Errorf("error %q does not list the devices present with their netdevs", err)
	}
}

func TestDeviceByNameNoRDMA(t *testing.T) {
	fakeSysfs(t, nil)
	_, err := DeviceByName("rxe0")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DeviceByName error = %v, want os.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), "no /sys/class/infiniband_verbs") || !strings.Contains(err.Error(), "ib_uverbs") {
		t.Errorf("error %q does not say that the kernel has no uverbs", err)
	}
	// The class without devices: the driver is what is missing.
	fakeSysfs(t, map[string]string{verbsABI: "6\n"})
	if _, err := DeviceByName("rxe0"); err == nil || !strings.Contains(err.Error(), "no driver has registered a device") {
		t.Errorf("with uverbs and no device: %v", err)
	}
}

func TestGUID(t *testing.T) {
	tests := []struct {
		guid  GUID
		str   string
		colon string
	}{
		{0x505400fffe123456, "505400fffe123456", "5054:00ff:fe12:3456"},
		{0, "0000000000000000", "0000:0000:0000:0000"},
		{0x0002c90300a0b0c0, "0002c90300a0b0c0", "0002:c903:00a0:b0c0"},
		{0xffffffffffffffff, "ffffffffffffffff", "ffff:ffff:ffff:ffff"},
	}
	for _, tt := range tests {
		if got := tt.guid.String(); got != tt.str {
			t.Errorf("GUID(%#x).String() = %q, want %q", uint64(tt.guid), got, tt.str)
		}
		if got := tt.guid.Colon(); got != tt.colon {
			t.Errorf("GUID(%#x).Colon() = %q, want %q", uint64(tt.guid), got, tt.colon)
		}
		for _, s := range []string{tt.str, tt.colon, strings.ToUpper(tt.colon)} {
			if got, err := ParseGUID(s); err != nil || got != tt.guid {
				t.Errorf("ParseGUID(%q) = %#x, %v; want %#x", s, uint64(got), err, uint64(tt.guid))
			}
		}
	}
	if got, err := ParseGUID("5054:ff:fe12:3456"); err != nil || got != 0x505400fffe123456 {
		t.Errorf("ParseGUID with a short group = %#x, %v", uint64(got), err)
	}
	for _, bad := range []string{"", "5054:00ff:fe12", "5054:00ff:fe12:3456:0", "5054::fe12:3456",
		"5054:000ff:fe12:3456", "0x5054", "505400fffe1234567", "-1", "+1", "g", "5054:00ff:fe12:345g", "1_0"} {
		if got, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) = %#x, want an error", bad, uint64(got))
		}
	}
}

func TestNodeType(t *testing.T) {
	tests := []struct {
		t         NodeType
		str       string
		transport Transport
		tstr      string
	}{
		{NodeCA, "InfiniBand channel adapter", TransportIB, "InfiniBand"},
		{NodeSwitch, "InfiniBand switch", TransportIB, "InfiniBand"},
		{NodeRouter, "InfiniBand router", TransportIB, "InfiniBand"},
		{NodeRNIC, "iWARP NIC", TransportIWARP, "iWARP"},
		{NodeUSNIC, "usNIC", TransportUSNIC, "usNIC"},
		{NodeUSNICUDP, "usNIC UDP", TransportUSNICUDP, "usNIC UDP"},
		{NodeUnspecified, "unspecified", TransportUnspecified, "unspecified"},
		{NodeUnknown, "unknown", TransportUnknown, "unknown"},
		{0, "unknown", TransportUnknown, "unknown"},
		{8, "unknown", TransportUnknown, "unknown"},
	}
	for _, tt := range tests {
		if got := tt.t.String(); got != tt.str {
			t.Errorf("NodeType(%d).String() = %q, want %q", int(tt.t), got, tt.str)
		}
		if got := tt.t.Transport(); got != tt.transport {
			t.Errorf("NodeType(%d).Transport() = %v, want %v", int(tt.t), got, tt.transport)
		}
		if got := tt.t.Transport().String(); got != tt.tstr {
			t.Errorf("NodeType(%d).Transport().String() = %q, want %q", int(tt.t), got, tt.tstr)
		}
	}
}

func TestPortState(t *testing.T) {
	want := map[PortState]string{
		PortNOP: "PORT_NOP", PortDown: "PORT_DOWN", PortInit: "PORT_INIT", PortArmed: "PORT_ARMED",
		PortActive: "PORT_ACTIVE", PortActiveDefer: "PORT_ACTIVE_DEFER", 6: "PortState(6)", -1: "PortState(-1)",
	}
	for s, w := range want {
		if got := s.String(); got != w {
			t.Errorf("PortState(%d).String() = %q, want %q", int(s), got, w)
		}
	}
}
