//go:build linux

package rdmanl

import (
	"errors"
	"testing"
)

// TestFake: while a Fake is installed, Dial answers from it and sends
// nothing.
func TestFake(t *testing.T) {
	f := &Fake{
		Devices:  []Device{{Index: 3, Name: "mlx5_0"}},
		Chardevs: map[uint32]Chardev{3: {Name: "uverbs0", DriverID: 1}},
		System:   System{CopyOnFork: true},
	}
	uninstall := InstallFake(f)
	defer uninstall()
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	devs, err := c.Devices()
	if err != nil || len(devs) != 1 || devs[0].Name != "mlx5_0" {
		t.Errorf("Devices: %v, %v", devs, err)
	}
	if cd, err := c.Chardev(3, "uverbs"); err != nil || cd.DriverID != 1 {
		t.Errorf("Chardev: %+v, %v", cd, err)
	}
	if _, err := c.Chardev(4, "uverbs"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("Chardev of a device the fake lacks: %v", err)
	}
	if s, err := c.System(); err != nil || !s.CopyOnFork {
		t.Errorf("System: %+v, %v", s, err)
	}
}
