//go:build linux

package rdmanl

import (
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/purerdma/rdma/internal/netlink"
)

// Fake is a scripted RDMA netlink for tests that run uverbs against a
// scripted device (uverbs/internal/mlx5/oracle): while one is installed,
// Dial returns a Conn that answers Devices, Chardev, System, Links,
// Summary, Res and Stat from it, records NewLink and DelLink, and sends
// nothing. The resource and statistics replies are encoded as the kernel
// lays them out and decoded again, so tests of callers run the decoders.
// Only tests install one (internal/layering checks that no other code
// calls InstallFake).
type Fake struct {
	Devices   []Device
	Chardevs  map[uint32]Chardev // by device index
	System    System
	Links     []Link
	Summaries []Summary
	Res       map[ResKind][]Res
	Stats     []PortStats
	// StatErr, when set, is the kernel's answer to STAT_GET on a device,
	// by index (siw's EINVAL).
	StatErr map[uint32]error

	mu    sync.Mutex
	Calls []string // "NewLink NAME TYPE NETDEV", "DelLink NAME"
}

var fake atomic.Pointer[Fake]

// InstallFake makes Dial answer from f until the returned function is
// called. For tests only.
func InstallFake(f *Fake) (uninstall func()) {
	fake.Store(f)
	return func() { fake.Store(nil) }
}

func (f *Fake) chardev(index uint32, client string) (Chardev, error) {
	if cd, ok := f.Chardevs[index]; ok && client == "uverbs" {
		return cd, nil
	}
	return Chardev{}, &OpError{Op: cmdName(cmdChardev), Err: ErrNoDevice}
}

func (f *Fake) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, call)
}

func (f *Fake) summary(index uint32, dev string) (Summary, error) {
	for _, s := range f.Summaries {
		if s.DevIndex == index {
			return parseSummary(EncodeSummary(s))
		}
	}
	return Summary{}, &OpError{Op: cmdName(cmdResGet), Device: dev, Err: ErrNoDevice, Kernel: true}
}

func (f *Fake) res(k ResKind, index uint32, dev string) (Res, error) {
	var msgs []netlink.Message
	t := resTables[k]
	for _, r := range f.Res[k] {
		if r.DevIndex == index {
			msgs = append(msgs, netlink.Message{Header: netlink.Header{Type: nldevType(t.cmd)}, Data: EncodeRes(k, r)})
		}
	}
	return joinRes(msgs, k, index, dev)
}

func (f *Fake) stat(index, port uint32, dev string) (PortStats, error) {
	if err := f.StatErr[index]; err != nil {
		return PortStats{}, &OpError{Op: cmdName(cmdStatGet), Device: dev, Err: err, Kernel: true}
	}
	for _, s := range f.Stats {
		if s.DevIndex == index && s.Port == port {
			return parseStat(EncodeStat(s))
		}
	}
	return PortStats{}, &OpError{Op: cmdName(cmdStatGet), Device: dev, Err: syscall.EINVAL, Kernel: true}
}
