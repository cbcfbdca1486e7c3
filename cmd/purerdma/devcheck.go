package main

import (
	"net/netip"

	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/uverbs"
)

// The device checks of the commands still in this package, which are
// package devs's.

// rdmaDevices lists the devices, or fails when there are none.
func rdmaDevices() ([]uverbs.Device, error) { return devs.All() }

// findDevice returns the device named name, or for "" the first one.
func findDevice(name string) (uverbs.Device, error) { return devs.Find(name) }

// netdevAddrs lists the IP addresses of a network interface but its
// link-local ones.
func netdevAddrs(name string) []netip.Addr { return devs.NetdevAddrs(name) }

// checkCMDevices is devs.CheckCM.
func checkCMDevices() error { return devs.CheckCM() }

// bindError is devs.BindError.
func bindError(addr netip.AddrPort, err error) error { return devs.BindError(addr, err) }

// linkClient is what the commands need of RDMA netlink.
type linkClient = devs.Netlink

// withNetlink runs f on a fresh RDMA netlink connection.
func withNetlink(f func(linkClient) error) error { return devs.WithNetlink(f) }
