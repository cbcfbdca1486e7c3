// Package vm runs a command inside a QEMU virtual machine with soft-RoCE:
// a stock Debian kernel, a veth pair (198.18.0.1 / 198.18.0.2) and two rxe
// devices, rxe0 on veth0 and rxe1 on veth1. The host's root is the VM's
// root (read-only, under a throw-away tmpfs overlay), so test binaries and
// tools built on the host run unchanged at the same paths.
//
// The host half ([Run]) fetches the kernel package into a cache on first
// use, builds a small busybox initramfs, starts qemu and streams the
// command's output. The guest half ([GuestMain]) is the same executable
// started as PID 1 inside the VM.
//
// With [Config.Peer] a second VM boots beside the first, joined to it by
// a data link with one rxe device on each end and a management link over
// which rxevm-peer ([PeerMain]) runs commands on the other VM: the
// two-VM bed (peer.go, docs/testing.md "The two-VM bed").
//
// With [Config.EmptyRoot] the VM shares nothing with the host: its only
// files are the initramfs's (the modules, a static build of the runner as
// /init, and the static binaries under test), the runner's init sets up
// the same network and devices in Go (rtnetlink and RDMA netlink instead
// of iproute2), and runs [Step]s, reporting over the serial console. See
// docs/testing.md and docs/containers.md.
package vm
