package devices

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
	"github.com/purerdma/rdma/uverbs"
)

// runArgs runs a purerdma command line with devices its one command.
func runArgs(args ...string) (code int, stdout, stderr string) {
	return clitest.Run(Command, args...)
}

func TestUsage(t *testing.T) {
	devstest.UseDevices(t, nil, nil)
	for _, args := range [][]string{{"devices", "extra"}, {"devices", "-x"}, {"devices", "-json", "rxe0"}} {
		code, stdout, stderr := runArgs(args...)
		want := "purerdma: devices takes no arguments but -json\n" + clitest.Set(Command).Usage()
		if code != 2 || stdout != "" || stderr != want {
			t.Errorf("%q = %d, stdout %q, stderr %q; want 2 and %q", args, code, stdout, stderr, want)
		}
	}
}

func TestDevices(t *testing.T) {
	devstest.UseDevices(t, []uverbs.Device{
		{Name: "mlx5_0", NodeGUID: 0x0002c90300a0b0c0},
		{Name: "rxe0", NodeGUID: 0x505400fffe123456},
		{Name: "a_device_name_longer_than_16", NodeGUID: 1},
	}, nil)
	code, stdout, stderr := runArgs("devices")
	want := "" +
		"    device          \t   node GUID\n" +
		"    ------          \t----------------\n" +
		"    mlx5_0          \t0002c90300a0b0c0\n" +
		"    rxe0            \t505400fffe123456\n" +
		"    a_device_name_longer_than_16\t0000000000000001\n"
	if code != 0 || stderr != "" {
		t.Errorf("run = %d, stderr %q", code, stderr)
	}
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	old := devs.List
	t.Cleanup(func() { devs.List = old })
	devs.List = func() ([]uverbs.Device, error) { return nil, errors.New("uverbs Devices: boom") }
	code, stdout, stderr := runArgs("devices")
	if code != 1 || stdout != "" || stderr != "purerdma: uverbs Devices: boom\n" {
		t.Errorf("devices with a failing listing = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestThisHost lists the real system's devices: on a host without RDMA
// only the header.
func TestThisHost(t *testing.T) {
	code, stdout, stderr := runArgs("devices")
	if code != 0 || stderr != "" {
		t.Errorf("devices = %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "    device          \t   node GUID\n    ------          \t----------------\n") {
		t.Errorf("devices printed no header:\n%s", stdout)
	}
}

func TestDevicesJSON(t *testing.T) {
	devstest.UseDevices(t, []uverbs.Device{
		{Name: "rxe0", NodeGUID: 0x505400fffe123456, Transport: uverbs.TransportIB, DriverName: "rxe",
			Ports: []uverbs.Port{{Num: 1, State: uverbs.PortActive, PhysState: "LinkUp", LinkLayer: "Ethernet", Netdev: "veth0"}}},
	}, nil)
	code, stdout, stderr := runArgs("devices", "-json")
	if code != 0 || stderr != "" {
		t.Fatalf("run = %d, stderr %q", code, stderr)
	}
	var got map[string][]map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding %q: %v", stdout, err)
	}
	if dec.More() {
		t.Errorf("more than one JSON document: %q", stdout)
	}
	if len(got["devices"]) != 1 {
		t.Fatalf("devices = %v, want one", got)
	}
	d := got["devices"][0]
	for _, k := range []string{"name", "node_guid", "sys_image_guid", "node_type", "transport", "node_desc",
		"fw_ver", "driver", "uverbs_device", "dev_path", "ports"} {
		if _, ok := d[k]; !ok {
			t.Errorf("device has no %q: %v", k, d)
		}
	}
	if d["name"] != "rxe0" || d["node_guid"] != "505400fffe123456" || d["driver"] != "rxe" {
		t.Errorf("device = %v", d)
	}
	want := []any{map[string]any{"port": 1.0, "state": "PORT_ACTIVE", "physical_state": "LinkUp", "link_layer": "Ethernet", "netdev": "veth0"}}
	if diff := cmp.Diff(want, d["ports"]); diff != "" {
		t.Errorf("ports mismatch (-want +got):\n%s", diff)
	}

	devstest.UseDevices(t, nil, nil)
	code, stdout, _ = runArgs("devices", "-json")
	if code != 0 || stdout != "{\n  \"devices\": []\n}\n" {
		t.Errorf("no devices: %d, %q", code, stdout)
	}
}
