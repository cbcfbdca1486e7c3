// Package link is "purerdma link": the ports of RDMA devices, as
// iproute2's "rdma link" prints them, and the software devices (rxe,
// siw) added and removed.
package link

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rdmactl"
)

// Command is "purerdma link".
var Command = cli.Command{
	Name: "link",
	Usage: "  link [show|list] [-json] [DEV[/PORT]]    list the ports of RDMA devices\n" +
		"  link add NAME type TYPE netdev NETDEV    add a software RDMA device (type rxe or siw)\n" +
		"  link del NAME                            remove a software RDMA device\n",
	Help: `Flags of link show:
  -json   print {"links": [...]}: each port's device, port, state, physical_state
          and netdev (the network interface under a RoCE or iWARP port, or "")

Adding and removing devices needs root (CAP_NET_ADMIN) and the kernel's
rdma_rxe (type rxe) or siw module.

Examples:
  purerdma link
  purerdma link show rxe0/1
  purerdma link show -json
  purerdma link add rxe0 type rxe netdev eth0
  purerdma link del rxe0
`,
	Run:  run,
	JSON: Links{},
}

func run(_ context.Context, args []string, stdout, _ io.Writer) error {
	verb := "show"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	if slices.ContainsFunc(args, cli.IsHelpFlag) {
		return cli.ErrHelp
	}
	switch verb {
	case "show", "list":
		filters, jsonOut, err := cli.Words("link "+verb, args)
		if err != nil {
			return err
		}
		if len(filters) > 1 {
			return cli.UsageError("link %s takes at most one device", verb)
		}
		filter := ""
		if len(filters) == 1 {
			filter = filters[0]
		}
		return show(filter, jsonOut, stdout)
	case "add":
		name, linkType, netdev, err := parseAdd(args)
		if err != nil {
			return err
		}
		return devs.WithNetlink(func(c devs.Netlink) error { return c.AddLink(name, linkType, netdev) })
	case "del", "delete":
		if len(args) != 1 {
			return cli.UsageError("link %s takes one device name", verb)
		}
		return devs.WithNetlink(func(c devs.Netlink) error { return c.DeleteLink(args[0]) })
	case "help":
		return cli.ErrHelp
	}
	return cli.UsageError("unknown link command %q", verb)
}

// parseAdd parses "NAME type TYPE netdev NETDEV", the words of
// iproute2's "rdma link add"; the two keyword pairs may come in either
// order.
func parseAdd(args []string) (name, linkType, netdev string, err error) {
	if len(args) == 0 {
		return "", "", "", cli.UsageError("link add needs a device name")
	}
	name, args = args[0], args[1:]
	for len(args) > 0 {
		if len(args) < 2 {
			return "", "", "", cli.UsageError("link add: %q needs a value", args[0])
		}
		key, val := args[0], args[1]
		switch key {
		case "type":
			linkType = val
		case "netdev":
			netdev = val
		default:
			return "", "", "", cli.UsageError("link add: unknown keyword %q", key)
		}
		args = args[2:]
	}
	if linkType == "" || netdev == "" {
		return "", "", "", cli.UsageError("link add needs both type and netdev")
	}
	return name, linkType, netdev, nil
}

// show prints the ports in the format of iproute2's "rdma link",
// optionally only those of one device ("rxe0") or one port ("rxe0/1").
func show(filter string, jsonOut bool, stdout io.Writer) error {
	dev, port, err := cli.ParseLink(filter)
	if err != nil {
		return err
	}
	var links []rdmactl.Link
	err = devs.WithNetlink(func(c devs.Netlink) error {
		var err error
		links, err = c.Links()
		return err
	})
	if err != nil {
		return err
	}
	shown := 0
	out := Links{Links: []Link{}}
	for _, l := range links {
		if dev != "" && l.Device != dev || port != 0 && l.Port != port {
			continue
		}
		if jsonOut {
			out.Links = append(out.Links, Link{Device: l.Device, Port: int(l.Port), State: l.State,
				PhysicalState: l.PhysState, Netdev: l.Netdev})
			shown++
			continue
		}
		fmt.Fprintf(stdout, "link %s/%d state %s physical_state %s", l.Device, l.Port, l.State, l.PhysState)
		if l.Netdev != "" {
			fmt.Fprintf(stdout, " netdev %s", l.Netdev)
		}
		fmt.Fprintln(stdout)
		shown++
	}
	if filter != "" && shown == 0 {
		var names []string
		for _, l := range links {
			if !slices.Contains(names, l.Device) {
				names = append(names, l.Device)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("link show %s: %w; %s", filter, rdmactl.ErrNoDevice, devs.LinkAddHint)
		}
		return fmt.Errorf("link show %s: %w; the RDMA devices here: %s", filter, rdmactl.ErrNoDevice, strings.Join(names, ", "))
	}
	if jsonOut {
		return cli.WriteJSON(stdout, out)
	}
	return nil
}

// Links is what "link show -json" prints.
type Links struct {
	Links []Link `json:"links"`
}

// Link is one port of Links.
type Link struct {
	Device        string `json:"device"`
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	Netdev        string `json:"netdev"`
}
