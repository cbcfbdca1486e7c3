package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/purerdma/rdma/uverbs"
)

// The commands check their device before they wait for a peer: a device
// name that does not exist, or a machine without RDMA devices, fails at
// once with an error that says what exists or how to add a device,
// instead of a server that waits for a client it could never serve.

// errNoDevice is what every "no such device" error of the commands
// matches.
var errNoDevice = errors.New("no RDMA device")

// devDir is where the kernel puts its RDMA character devices; tests
// point it elsewhere.
var devDir = "/dev/infiniband"

// netdevAddrs lists the IP addresses of a network interface but its
// link-local ones, for the lists of devices; tests replace it.
var netdevAddrs = func(name string) []netip.Addr {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var s []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
			s = append(s, p.Addr())
		}
	}
	return s
}

// linkAddHint says how to get a device where there is none.
const linkAddHint = `add a soft-RoCE device over an Ethernet interface with "purerdma link add rxe0 type rxe netdev ETH" (as root; the kernel needs the rdma_rxe module)`

// rdmaDevices lists the devices, or fails when there are none.
func rdmaDevices() ([]uverbs.Device, error) {
	devs, err := listDevices()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, noDevicesError()
	}
	return devs, nil
}

// noDevicesError explains an empty device list.
func noDevicesError() error {
	if _, err := os.Stat(devDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist (no RDMA driver is loaded); %s", errNoDevice, devDir, linkAddHint)
	}
	return fmt.Errorf("%w: %s has no verbs device; %s", errNoDevice, devDir, linkAddHint)
}

// findDevice returns the device named name, or for "" the first one.
func findDevice(name string) (uverbs.Device, error) {
	devs, err := rdmaDevices()
	if err != nil {
		return uverbs.Device{}, err
	}
	if name == "" {
		return devs[0], nil
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return uverbs.Device{}, fmt.Errorf("%w named %q; the RDMA devices here: %s", errNoDevice, name, describeDevices(devs))
}

// describeDevices lists devices by name, each with the network
// interfaces under its ports and their addresses: "rxe0 (veth0
// 198.18.0.1), mlx5_0".
func describeDevices(devs []uverbs.Device) string {
	var b strings.Builder
	for i, d := range devs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Name)
		var nets []string
		for _, p := range d.Ports {
			if p.Netdev == "" {
				continue
			}
			words := []string{p.Netdev}
			for _, a := range netdevAddrs(p.Netdev) {
				words = append(words, a.String())
			}
			nets = append(nets, strings.Join(words, " "))
		}
		if len(nets) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(nets, "; "))
		}
	}
	return b.String()
}

// checkCMDevices is the device check of the commands that name an IP
// address instead of a device (the rdma_cm finds the device): there must
// be one.
func checkCMDevices() error {
	_, err := rdmaDevices()
	return err
}

// bindError explains an rdma_cm bind to addr that failed when no RDMA
// device has the address (the kernel says EADDRNOTAVAIL when no
// interface has it, ENODEV when one has it but no RDMA device is over
// that interface), listing the devices that exist; the kernel's error
// stays wrapped.
func bindError(addr netip.AddrPort, err error) error {
	devs, lerr := rdmaDevices()
	if lerr != nil {
		return fmt.Errorf("%w (%w)", lerr, err)
	}
	if addr.Addr().IsUnspecified() || devicesHave(devs, addr.Addr()) {
		return err
	}
	return fmt.Errorf("%w has the address %v; the RDMA devices here: %s (%w)", errNoDevice, addr.Addr(), describeDevices(devs), err)
}

// devicesHave reports whether a network interface under one of the
// devices' ports has the address a.
func devicesHave(devs []uverbs.Device, a netip.Addr) bool {
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev != "" && slices.Contains(netdevAddrs(p.Netdev), a.Unmap()) {
				return true
			}
		}
	}
	return false
}
