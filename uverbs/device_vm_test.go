package uverbs_test

import (
	"os"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestDevicesInVM checks discovery against the test VM's current
// fabric: rxe0 on veth0 and rxe1 on veth1, or siw0 on veth2 and siw1 on
// veth3.
func TestDevicesInVM(t *testing.T) {
	f := testenv.NeedFabric(t)
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	// The driver's ABI version (RXE_UVERBS_ABI_VERSION,
	// SIW_ABI_VERSION), its node type and transport.
	want := map[string]struct {
		abi       int
		node      uverbs.NodeType
		transport uverbs.Transport
	}{
		"rxe": {2, uverbs.NodeCA, uverbs.TransportIB},
		"siw": {1, uverbs.NodeRNIC, uverbs.TransportIWARP},
	}[f.Name]
	for i, name := range f.Devs {
		netdev := f.Netdevs[i]
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
			if d.DriverABIVersion != want.abi {
				t.Errorf("DriverABIVersion = %d, want %d", d.DriverABIVersion, want.abi)
			}
			if d.DriverName != f.Name {
				t.Errorf("DriverName = %q, want %s", d.DriverName, f.Name)
			}
			if d.NodeType != want.node || d.Transport != want.transport {
				t.Errorf("NodeType, Transport = %v, %v; want %v, %v", d.NodeType, d.Transport, want.node, want.transport)
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
	for _, name := range f.Devs {
		d, err := uverbs.DeviceByName(name)
		if err != nil || d.Name != name {
			t.Errorf("DeviceByName(%s) = %s, %v", name, d.Name, err)
		}
	}
}
