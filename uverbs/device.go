package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
)

// sysfsRoot is where sysfs is mounted; tests point it at a fake tree.
var sysfsRoot = "/sys"

// devDir holds the uverbs character devices.
const devDir = "/dev/infiniband"

// Device describes an RDMA device that user space can drive through a
// uverbs character device.
type Device struct {
	Name         string // the kernel's IB device name, e.g. "rxe0"
	NodeGUID     GUID
	SysImageGUID GUID
	NodeType     NodeType
	Transport    Transport // derived from NodeType, as libibverbs does
	NodeDesc     string    // the node description, e.g. "rxe"
	FWVersion    string    // "" when the device has no firmware version

	// DriverName names the kernel driver: "rxe" for Soft-RoCE and "siw"
	// for soft-iWARP (recognized by their node descriptions, as they have
	// no parent device), else the driver bound to the parent device, such
	// as "mlx5_core". It is "" when unknown.
	DriverName string

	UverbsName string // the uverbs device, e.g. "uverbs0"
	DevPath    string // its character device, e.g. "/dev/infiniband/uverbs0"

	// ABIVersion is the uverbs ABI version the kernel speaks, from
	// /sys/class/infiniband_verbs/abi_version (IB_USER_VERBS_ABI_VERSION,
	// 6 on all current kernels).
	ABIVersion int
	// DriverABIVersion is the version of the driver-specific part of the
	// ABI, from /sys/class/infiniband_verbs/uverbsN/abi_version (2 for
	// rxe).
	DriverABIVersion int

	Ports []Port // sorted by number
}

// Port describes one port of a Device.
type Port struct {
	Num       int // 1-based
	State     PortState
	PhysState string // the kernel's name for the physical state, e.g. "LinkUp"
	LinkLayer string // "InfiniBand" or "Ethernet"
	Netdev    string // the network device under a RoCE or iWARP port, if any
}

// Devices lists the RDMA devices that have a uverbs character device,
// sorted by name. With no RDMA devices, or no RDMA support in the kernel,
// it returns an empty list and no error.
func Devices() ([]Device, error) {
	classDir := filepath.Join(sysfsRoot, "class", "infiniband_verbs")
	entries, err := os.ReadDir(classDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs Devices: %w", err)
	}
	abi, err := readInt(filepath.Join(classDir, "abi_version"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("uverbs Devices: %w", err)
	}
	var devs []Device
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		d, err := readDevice(classDir, e.Name())
		if errors.Is(err, errGone) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, fmt.Errorf("uverbs Devices: %w", err)
		}
		d.ABIVersion = abi
		devs = append(devs, d)
	}
	slices.SortFunc(devs, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	fillNetdevs(devs)
	return devs, nil
}

// fillNetdevs names the network device of Ethernet ports whose sysfs
// does not: Linux 6.1 gives an iWARP port's GIDs no netdev, so siw's
// gid_attrs/ndevs cannot be read (6.12's can), and siw has no parent
// device to lead to its netdev either. RDMA netlink's port dump names it
// (RDMA_NLDEV_ATTR_NDEV_NAME, as "rdma link" shows). Best effort: a
// port stays without a netdev when netlink cannot say.
func fillNetdevs(devs []Device) {
	missing := false
	for _, d := range devs {
		for _, p := range d.Ports {
			missing = missing || p.LinkLayer == "Ethernet" && p.Netdev == ""
		}
	}
	if !missing {
		return
	}
	links, err := portNetdevs()
	if err != nil {
		return
	}
	for i := range devs {
		for j := range devs[i].Ports {
			p := &devs[i].Ports[j]
			if p.LinkLayer == "Ethernet" && p.Netdev == "" {
				p.Netdev = links[portKey{devs[i].Name, p.Num}]
			}
		}
	}
}

type portKey struct {
	dev  string
	port int
}

// portNetdevs lists each port's network device over RDMA netlink;
// tests replace it.
var portNetdevs = func() (map[portKey]string, error) {
	nl, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	nl.SetDeadline(time.Now().Add(5 * time.Second))
	links, err := nl.Links()
	if err != nil {
		return nil, err
	}
	m := map[portKey]string{}
	for _, l := range links {
		if l.Netdev != "" {
			m[portKey{l.DevName, int(l.Port)}] = l.Netdev
		}
	}
	return m, nil
}

// DeviceByName returns the RDMA device called name. If there is none, the
// error matches os.ErrNotExist.
func DeviceByName(name string) (Device, error) {
	devs, err := Devices()
	if err != nil {
		return Device{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	_, statErr := os.Stat(filepath.Join(sysfsRoot, "class", "infiniband_verbs"))
	return Device{}, &notFoundError{name: name, present: devs, noClass: errors.Is(statErr, fs.ErrNotExist)}
}

// notFoundError names the device asked for and says what there is
// instead: the devices present with their network devices, or why there
// are none.
type notFoundError struct {
	name    string
	present []Device
	noClass bool // no /sys/class/infiniband_verbs at all
}

func (e *notFoundError) Error() string {
	s := "uverbs DeviceByName: no RDMA device named " + strconv.Quote(e.name)
	switch {
	case len(e.present) > 0:
		var b strings.Builder
		for i, d := range e.present {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.Name)
			var nds []string
			for _, p := range d.Ports {
				if p.Netdev != "" {
					nds = append(nds, p.Netdev)
				}
			}
			if len(nds) > 0 {
				b.WriteString(" (netdev " + strings.Join(nds, ", ") + ")")
			}
		}
		return s + "; the devices present are " + b.String()
	case e.noClass:
		return s + ": there is no RDMA device, and no /sys/class/infiniband_verbs: the kernel has no ib_uverbs (load it, and an RDMA driver such as rdma_rxe or mlx5_ib)"
	default:
		return s + ": there is no RDMA device (ib_uverbs is loaded; no driver has registered a device: for soft-RoCE, `rdma link add rxe0 type rxe netdev eth0`)"
	}
}
func (e *notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// errGone marks a device that disappeared during discovery.
var errGone = errors.New("device removed")

// readDevice reads one /sys/class/infiniband_verbs/uverbsN entry and the IB
// device it names.
func readDevice(classDir, uverbs string) (Device, error) {
	uvDir := filepath.Join(classDir, uverbs)
	ibdev, err := readAttr(filepath.Join(uvDir, "ibdev"))
	if errors.Is(err, fs.ErrNotExist) {
		return Device{}, errGone
	}
	if err != nil {
		return Device{}, err
	}
	if ibdev == "" || ibdev == "." || ibdev == ".." || strings.ContainsRune(ibdev, '/') {
		return Device{}, fmt.Errorf("%s/ibdev: bad device name %q", uvDir, ibdev)
	}
	d := Device{
		Name:       ibdev,
		UverbsName: uverbs,
		DevPath:    filepath.Join(devDir, uverbs),
		NodeType:   NodeUnknown,
	}
	if d.DriverABIVersion, err = readInt(filepath.Join(uvDir, "abi_version")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Device{}, err
	}

	ibDir := filepath.Join(sysfsRoot, "class", "infiniband", ibdev)
	if _, err := os.Stat(ibDir); errors.Is(err, fs.ErrNotExist) {
		return Device{}, errGone
	}
	if s, err := readAttr(filepath.Join(ibDir, "node_type")); err == nil {
		n, err := parseNumbered(s)
		if err != nil {
			return Device{}, fmt.Errorf("%s/node_type: %w", ibDir, err)
		}
		d.NodeType = NodeType(n)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Device{}, err
	}
	d.Transport = d.NodeType.Transport()
	for _, g := range []struct {
		file string
		dst  *GUID
	}{{"node_guid", &d.NodeGUID}, {"sys_image_guid", &d.SysImageGUID}} {
		s, err := readAttr(filepath.Join(ibDir, g.file))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Device{}, err
		}
		if *g.dst, err = ParseGUID(s); err != nil {
			return Device{}, fmt.Errorf("%s/%s: %w", ibDir, g.file, err)
		}
	}
	if d.FWVersion, err = readOptional(filepath.Join(ibDir, "fw_ver")); err != nil {
		return Device{}, err
	}
	if d.NodeDesc, err = readOptional(filepath.Join(ibDir, "node_desc")); err != nil {
		return Device{}, err
	}
	d.DriverName = driverName(ibDir, d.NodeDesc)
	if d.Ports, err = readPorts(filepath.Join(ibDir, "ports")); err != nil {
		return Device{}, err
	}
	return d, nil
}

// softDrivers maps the node descriptions the software drivers set to the
// drivers' names; these devices have no parent device to read a driver
// from.
var softDrivers = map[string]string{
	"rxe":                  "rxe", // drivers/infiniband/sw/rxe: rxe_register_device
	"Software iWARP stack": "siw", // SIW_NODE_DESC_COMMON
}

func driverName(ibDir, nodeDesc string) string {
	if name, ok := softDrivers[nodeDesc]; ok {
		return name
	}
	if target, err := os.Readlink(filepath.Join(ibDir, "device", "driver")); err == nil {
		return filepath.Base(target)
	}
	return ""
}

// readPorts reads the ports/N directories of an IB device.
func readPorts(dir string) ([]Port, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ports []Port
	for _, e := range entries {
		num, err := strconv.Atoi(e.Name())
		if err != nil || num < 0 {
			continue
		}
		p, err := readPort(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		p.Num = num
		ports = append(ports, p)
	}
	slices.SortFunc(ports, func(a, b Port) int { return a.Num - b.Num })
	return ports, nil
}

func readPort(dir string) (Port, error) {
	var p Port
	s, err := readAttr(filepath.Join(dir, "state"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return p, err
	}
	if err == nil {
		n, err := parseNumbered(s)
		if err != nil {
			return p, fmt.Errorf("%s/state: %w", dir, err)
		}
		p.State = PortState(n)
	}
	if s, err = readOptional(filepath.Join(dir, "phys_state")); err != nil {
		return p, err
	}
	if _, name, ok := strings.Cut(s, ":"); ok {
		p.PhysState = strings.TrimSpace(name)
	} else {
		p.PhysState = s
	}
	if p.LinkLayer, err = readOptional(filepath.Join(dir, "link_layer")); err != nil {
		return p, err
	}
	// The kernel fails the read when GID 0 has no network device (as on
	// InfiniBand ports), so any error means none.
	p.Netdev, _ = readAttr(filepath.Join(dir, "gid_attrs", "ndevs", "0"))
	return p, nil
}

// readAttr reads a sysfs attribute without its trailing newline.
func readAttr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readOptional reads an attribute that may be absent.
func readOptional(path string) (string, error) {
	s, err := readAttr(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return s, err
}

func readInt(path string) (int, error) {
	s, err := readAttr(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: malformed number %q", path, s)
	}
	return n, nil
}

// parseNumbered parses the number in the kernel's "4: ACTIVE" style.
func parseNumbered(s string) (int, error) {
	num, _, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return 0, fmt.Errorf("malformed value %q", s)
	}
	return n, nil
}
