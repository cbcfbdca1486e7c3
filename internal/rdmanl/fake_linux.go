//go:build linux

package rdmanl

import "sync/atomic"

// Fake is a scripted RDMA netlink for tests that run uverbs against a
// scripted device (uverbs/internal/mlx5/oracle): while one is installed,
// Dial returns a Conn that answers Devices, Chardev and System from it and sends
// nothing. Only tests install one (internal/layering checks that no
// other code calls InstallFake).
type Fake struct {
	Devices  []Device
	Chardevs map[uint32]Chardev // by device index
	System   System
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
