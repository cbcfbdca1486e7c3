// Package devs is the system the purerdma commands act on: the RDMA
// devices and RDMA netlink, found and opened with errors that say what
// to do. The package variables are what the commands see of the
// machine; tests replace them (package devstest).
//
// The commands check their device before they wait for a peer: a device
// name that does not exist, or a machine without RDMA devices, fails at
// once with an error that says what exists or how to add a device,
// instead of a server that waits for a client it could never serve.
package devs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/purerdma/rdma/rdmactl"
	"github.com/purerdma/rdma/uverbs"
)

// ErrNoDevice is what every "no such device" error of the commands
// matches.
var ErrNoDevice = errors.New("no RDMA device")

// Dir is where the kernel puts its RDMA character devices.
var Dir = "/dev/infiniband"

// List lists the devices.
var List = uverbs.Devices

// NetdevAddrs lists the IP addresses of a network interface but its
// link-local ones, for the lists of devices.
var NetdevAddrs = func(name string) []netip.Addr {
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

// LinkAddHint says how to get a device where there is none.
const LinkAddHint = `add a soft-RoCE device over an Ethernet interface with "purerdma link add rxe0 type rxe netdev ETH" (as root; the kernel needs the rdma_rxe module)`

// All lists the devices, or fails when there are none.
func All() ([]uverbs.Device, error) {
	devs, err := List()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, NoDevicesError()
	}
	return devs, nil
}

// NoDevicesError explains an empty device list.
func NoDevicesError() error {
	if _, err := os.Stat(Dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist (no RDMA driver is loaded); %s", ErrNoDevice, Dir, LinkAddHint)
	}
	return fmt.Errorf("%w: %s has no verbs device; %s", ErrNoDevice, Dir, LinkAddHint)
}

// Find returns the device named name, or for "" the first one.
func Find(name string) (uverbs.Device, error) {
	devs, err := All()
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
	return uverbs.Device{}, fmt.Errorf("%w named %q; the RDMA devices here: %s", ErrNoDevice, name, Describe(devs))
}

// Describe lists devices by name, each with the network interfaces
// under its ports and their addresses: "rxe0 (veth0 198.18.0.1),
// mlx5_0".
func Describe(devs []uverbs.Device) string {
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
			for _, a := range NetdevAddrs(p.Netdev) {
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

// CheckCM is the device check of the commands that name an IP address
// instead of a device (the rdma_cm finds the device): there must be one.
func CheckCM() error {
	_, err := All()
	return err
}

// BindError explains an rdma_cm bind to addr that failed when no RDMA
// device has the address (the kernel says EADDRNOTAVAIL when no
// interface has it, ENODEV when one has it but no RDMA device is over
// that interface), listing the devices that exist; the kernel's error
// stays wrapped.
func BindError(addr netip.AddrPort, err error) error {
	devs, lerr := All()
	if lerr != nil {
		return fmt.Errorf("%w (%w)", lerr, err)
	}
	if addr.Addr().IsUnspecified() || have(devs, addr.Addr()) {
		return err
	}
	return fmt.Errorf("%w has the address %v; the RDMA devices here: %s (%w)", ErrNoDevice, addr.Addr(), Describe(devs), err)
}

// have reports whether a network interface under one of the devices'
// ports has the address a.
func have(devs []uverbs.Device, a netip.Addr) bool {
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev != "" && slices.Contains(NetdevAddrs(p.Netdev), a.Unmap()) {
				return true
			}
		}
	}
	return false
}

// Netlink is what the commands need of *rdmactl.Client.
type Netlink interface {
	AddLink(name, linkType, netdev string) error
	DeleteLink(name string) error
	Links() ([]rdmactl.Link, error)
	Close() error
}

// DialNetlink opens an RDMA netlink connection.
var DialNetlink = func() (Netlink, error) {
	c, err := rdmactl.Open()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// WithNetlink runs f on a fresh RDMA netlink connection.
func WithNetlink(f func(Netlink) error) error {
	c, err := DialNetlink()
	if err != nil {
		return err
	}
	err = f(c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}
