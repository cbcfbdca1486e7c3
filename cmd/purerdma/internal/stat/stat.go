// Package stat is "purerdma stat": the hardware counters of RDMA ports,
// as iproute2's "rdma statistic show" prints them.
package stat

import (
	"context"
	"fmt"
	"io"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/rdmaout"
	"github.com/purerdma/rdma/rdmactl"
)

// Command is "purerdma stat".
var Command = cli.Command{
	Name:  "stat",
	Usage: "  stat [show] [-json] [DEV[/PORT]]         hardware counters of ports, like rdma statistic show\n",
	Help: `Flags:
  -json   print rdma -j's JSON: one array of {"ifname", "port", and each
          counter's name and value}

Without DEV, every port of every device that keeps counters; ports of
devices without hardware counters (siw) are left out, where rdma stops with
"Invalid argument" at the first of them. DEV/PORT (or "link DEV/PORT")
names one port, and a device without counters is then an error.

Examples:
  purerdma stat
  purerdma stat rxe0/1
  purerdma stat -json link rxe1/1
`,
	Run: run,
}

func run(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 && (args[0] == "show" || args[0] == "list") {
		args = args[1:]
	}
	words, jsonOut, err := cli.Words("stat", args)
	if err != nil {
		return err
	}
	filter := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "link" && filter == "":
			if i+1 == len(words) {
				return cli.UsageError("stat: %q needs a device", w)
			}
			i++
			filter = words[i]
		case filter == "":
			filter = w
		default:
			return cli.UsageError("stat: unexpected %q", w)
		}
	}
	dev, port, err := cli.ParseLink(filter)
	if err != nil {
		return err
	}
	c, err := rdmactl.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	var ports []rdmactl.PortCounters
	if port != 0 {
		pc, err := c.Counters(dev, port)
		if err != nil {
			return err
		}
		ports = append(ports, pc)
	} else if ports, err = c.AllCounters(dev); err != nil {
		return err
	}
	recs := Records(ports)
	if jsonOut {
		return rdmaout.WriteJSON(stdout, recs)
	}
	return rdmaout.WriteText(stdout, recs)
}

// Records lays the counters out as rdma does: "link DEV/PORT name value ...".
func Records(ports []rdmactl.PortCounters) []rdmaout.Record {
	recs := []rdmaout.Record{}
	for _, p := range ports {
		r := rdmaout.Record{Prefix: fmt.Sprintf("link %s/%d ", p.Device, p.Port)}
		r.JSONOnly("ifname", p.Device)
		r.JSONOnly("port", p.Port)
		for _, c := range p.Counters {
			r.Uint(c.Name, c.Value)
		}
		recs = append(recs, r)
	}
	return recs
}
