package uverbs_test

import (
	"os"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestDevicesInVM checks discovery against the soft-RoCE VM, which
// promises rxe0 on veth0 and rxe1 on veth1. It skips on other hosts.
func TestDevicesInVM(t *testing.T) {
	devs := testenv.Devices(t, 2)
	netdevs := map[string]string{"rxe0": "veth0", "rxe1": "veth1"}
	for name, netdev := range netdevs {
		t.Run(name, func(t *testing.T) {
			var d *uverbs.Device
			for i := range devs {
				if devs[i].Name == name {
					d = &devs[i]
				}
			}
			if d == nil {
				t.Fatalf("no device %s among %d devices", name, len(devs))
			}
			t.Logf("%+v", *d)
			fi, err := os.Stat(d.DevPath)
			if err != nil {
				t.Errorf("DevPath: %v", err)
			} else if fi.Mode()&os.ModeCharDevice == 0 {
				t.Errorf("DevPath %s is %v, not a character device", d.DevPath, fi.Mode())
			}
			// IB_USER_VERBS_ABI_VERSION in <rdma/ib_user_verbs.h>.
			if d.ABIVersion != 6 {
				t.Errorf("ABIVersion = %d, want 6", d.ABIVersion)
			}
			// RXE_UVERBS_ABI_VERSION in drivers/infiniband/sw/rxe/rxe.h.
			if d.DriverABIVersion != 2 {
				t.Errorf("DriverABIVersion = %d, want 2", d.DriverABIVersion)
			}
			if d.DriverName != "rxe" {
				t.Errorf("DriverName = %q, want rxe", d.DriverName)
			}
			if d.NodeType != uverbs.NodeCA || d.Transport != uverbs.TransportIB {
				t.Errorf("NodeType, Transport = %v, %v; want an InfiniBand CA", d.NodeType, d.Transport)
			}
			if d.NodeGUID == 0 {
				t.Error("NodeGUID is 0")
			}
			if len(d.Ports) != 1 {
				t.Fatalf("%d ports, want 1", len(d.Ports))
			}
			p := d.Ports[0]
			if p.Num != 1 || p.State != uverbs.PortActive || p.LinkLayer != "Ethernet" || p.Netdev != netdev {
				t.Errorf("port = %+v; want port 1 PORT_ACTIVE on Ethernet, netdev %s", p, netdev)
			}
		})
	}
	for _, name := range []string{"rxe0", "rxe1"} {
		d, err := uverbs.DeviceByName(name)
		if err != nil || d.Name != name {
			t.Errorf("DeviceByName(%s) = %s, %v", name, d.Name, err)
		}
	}
}
