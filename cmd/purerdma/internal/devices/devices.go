// Package devices is "purerdma devices": the RDMA devices and their node
// GUIDs, as ibv_devices prints them.
package devices

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/uverbs"
)

// Command is "purerdma devices".
var Command = cli.Command{
	Name:  "devices",
	Usage: "  devices [-json]                          list RDMA devices and their node GUIDs\n",
	Help: `Flags:
  -json   print {"devices": [...]}: each device's name, node_guid, sys_image_guid,
          node_type, transport, node_desc, fw_ver, driver, uverbs_device, dev_path
          and ports (port, state, physical_state, link_layer, netdev)

Examples:
  purerdma devices
  purerdma devices -json
`,
	Run:  run,
	JSON: List{},
}

func run(_ context.Context, args []string, stdout, _ io.Writer) error {
	words, jsonOut, err := cli.Words("devices", args)
	if errors.Is(err, cli.ErrHelp) {
		return err
	}
	if err != nil || len(words) > 0 {
		return cli.UsageError("devices takes no arguments but -json")
	}
	return list(stdout, jsonOut)
}

// list prints the devices in ibv_devices' format, or as JSON.
func list(stdout io.Writer, jsonOut bool) error {
	ds, err := devs.List()
	if err != nil {
		return err
	}
	if jsonOut {
		out := List{Devices: []Device{}}
		for _, d := range ds {
			out.Devices = append(out.Devices, newDevice(d))
		}
		return cli.WriteJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "    %-16s\t   node GUID\n", "device")
	fmt.Fprintf(stdout, "    %-16s\t----------------\n", "------")
	for _, d := range ds {
		fmt.Fprintf(stdout, "    %-16s\t%16s\n", d.Name, d.NodeGUID)
	}
	return nil
}

// List is what "devices -json" prints.
type List struct {
	Devices []Device `json:"devices"`
}

// Device is one device of a List.
type Device struct {
	Name         string `json:"name"`
	NodeGUID     string `json:"node_guid"`      // 16 hex digits, as the text
	SysImageGUID string `json:"sys_image_guid"` // 16 hex digits
	NodeType     string `json:"node_type"`
	Transport    string `json:"transport"`
	NodeDesc     string `json:"node_desc"`
	FWVersion    string `json:"fw_ver"`
	Driver       string `json:"driver"`
	UverbsDevice string `json:"uverbs_device"`
	DevPath      string `json:"dev_path"`
	Ports        []Port `json:"ports"`
}

// Port is one port of a Device.
type Port struct {
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	LinkLayer     string `json:"link_layer"`
	Netdev        string `json:"netdev"`
}

func newDevice(d uverbs.Device) Device {
	j := Device{
		Name: d.Name, NodeGUID: d.NodeGUID.String(), SysImageGUID: d.SysImageGUID.String(),
		NodeType: d.NodeType.String(), Transport: d.Transport.String(), NodeDesc: d.NodeDesc,
		FWVersion: d.FWVersion, Driver: d.DriverName, UverbsDevice: d.UverbsName, DevPath: d.DevPath,
		Ports: []Port{},
	}
	for _, p := range d.Ports {
		j.Ports = append(j.Ports, Port{Port: p.Num, State: p.State.String(), PhysicalState: p.PhysState,
			LinkLayer: p.LinkLayer, Netdev: p.Netdev})
	}
	return j
}
