// Package res is "purerdma res": the kernel's tables of RDMA objects, as
// iproute2's "rdma resource show" prints them.
package res

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/rdmaout"
	"github.com/purerdma/rdma/rdmactl"
)

// Command is "purerdma res".
var Command = cli.Command{
	Name: "res",
	Usage: "  res [show] [-json] [DEV]                 count each device's RDMA objects, like rdma resource show\n" +
		"  res [show] [-json] OBJECT [DEV[/PORT]]   list objects: qp, cq, mr, pd, cm_id or ctx\n",
	Help: `Flags:
  -json   print rdma -j's JSON: one array of objects with rdma's keys and values
          (summary: ifindex, ifname and a count per kind; qp: ifindex, ifname,
          port, lqpn, rqpn, type, state, rq-psn, sq-psn, path-mig-state, pdn,
          pid, comm; cq: cqn, cqe, users, poll-ctx, adaptive-moderation, ctxn;
          mr: mrn, rkey, lkey, iova, mrlen, pdn; pd: pdn, local_dma_lkey, users,
          unsafe_global_rkey, ctxn; cm_id: port, cm-idn, lqpn, qp-type, state,
          ps, src-addr, dst-addr; ctx: ctxn), each key only when the kernel
          sends it

DEV (or "dev DEV", or "link DEV/PORT" as rdma takes them) keeps one
device's objects, or for qp and cm_id one port's. The kernel shows MR keys
and a PD's local_dma_lkey only to a caller with CAP_NET_ADMIN.

Examples:
  purerdma res
  purerdma res qp
  purerdma res -json cm_id rxe0
  purerdma res mr dev rxe1
`,
	Run: run,
}

var objects = []string{"qp", "cq", "mr", "pd", "cm_id", "ctx"}

func run(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 && (args[0] == "show" || args[0] == "list") {
		args = args[1:]
	}
	words, jsonOut, err := cli.Words("res", args)
	if err != nil {
		return err
	}
	object, filter := "", ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case object == "" && filter == "" && slices.Contains(objects, w):
			object = w
		case (w == "dev" || w == "link") && filter == "":
			if i+1 == len(words) {
				return cli.UsageError("res: %q needs a device", w)
			}
			i++
			filter = words[i]
		case filter == "":
			filter = w
		default:
			return cli.UsageError("res: unexpected %q", w)
		}
	}
	dev, port, err := cli.ParseLink(filter)
	if err != nil {
		return err
	}
	if port != 0 && object != "qp" && object != "cm_id" {
		return cli.UsageError("res: a port (%q) selects only qp and cm_id", filter)
	}
	c, err := rdmactl.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	recs, err := Records(c, object, dev, port)
	if err != nil {
		return err
	}
	if jsonOut {
		return rdmaout.WriteJSON(stdout, recs)
	}
	return rdmaout.WriteText(stdout, recs)
}

// Records reads the objects of one kind ("" for the summary) of dev
// ("" for all) and lays them out as rdma does. port, if not 0, keeps the
// QPs or rdma_cm IDs of that port.
func Records(c *rdmactl.Client, object, dev string, port uint32) ([]rdmaout.Record, error) {
	recs := []rdmaout.Record{}
	keep := func(p rdmactl.Optional[uint32]) bool { return port == 0 || p.Valid && p.Value == port }
	switch object {
	case "":
		sums, err := c.Resources(dev)
		if err != nil {
			return nil, err
		}
		for _, s := range sums {
			r := rdmaout.Record{Prefix: fmt.Sprintf("%d: %s: ", s.DevIndex, s.Device)}
			r.JSONOnly("ifindex", s.DevIndex)
			r.JSONOnly("ifname", s.Device)
			for _, n := range s.Counts {
				r.Uint(n.Name, n.Current)
			}
			recs = append(recs, r)
		}
	case "qp":
		qps, err := c.QPs(dev)
		if err != nil {
			return nil, err
		}
		for _, q := range qps {
			if !keep(q.Port) {
				continue
			}
			r := link(q.DevIndex, q.Device, q.Port)
			r.Uint("lqpn", uint64(q.QPNum))
			optUint(&r, "rqpn", q.RemoteQPNum)
			r.String("type", q.Type.String())
			r.String("state", q.State.String())
			optUint(&r, "rq-psn", q.RQPSN)
			r.Uint("sq-psn", uint64(q.SQPSN))
			if q.PathMigState.Valid {
				r.String("path-mig-state", q.PathMigState.Value.String())
			}
			optUint(&r, "pdn", q.PDN)
			owner(&r, q.Owner)
			recs = append(recs, r)
		}
	case "cq":
		cqs, err := c.CQs(dev)
		if err != nil {
			return nil, err
		}
		for _, q := range cqs {
			r := device(q.DevIndex, q.Device)
			optUint(&r, "cqn", q.CQN)
			r.Uint("cqe", uint64(q.CQE))
			r.Uint("users", q.Users)
			if q.PollContext.Valid {
				r.String("poll-ctx", q.PollContext.Value.String())
			}
			if q.AdaptiveModeration.Valid {
				r.Bool("adaptive-moderation", q.AdaptiveModeration.Value)
			}
			optUint(&r, "ctxn", q.CtxN)
			owner(&r, q.Owner)
			recs = append(recs, r)
		}
	case "mr":
		mrs, err := c.MRs(dev)
		if err != nil {
			return nil, err
		}
		for _, m := range mrs {
			r := device(m.DevIndex, m.Device)
			optUint(&r, "mrn", m.MRN)
			optHex(&r, "rkey", m.RKey)
			optHex(&r, "lkey", m.LKey)
			if m.IOVA.Valid {
				r.Hex("iova", m.IOVA.Value)
			}
			r.Uint("mrlen", m.Length)
			optUint(&r, "pdn", m.PDN)
			owner(&r, m.Owner)
			recs = append(recs, r)
		}
	case "pd":
		pds, err := c.PDs(dev)
		if err != nil {
			return nil, err
		}
		for _, p := range pds {
			r := device(p.DevIndex, p.Device)
			optUint(&r, "pdn", p.PDN)
			optHex(&r, "local_dma_lkey", p.LocalDMALKey)
			r.Uint("users", p.Users)
			optHex(&r, "unsafe_global_rkey", p.UnsafeGlobalRKey)
			optUint(&r, "ctxn", p.CtxN)
			owner(&r, p.Owner)
			recs = append(recs, r)
		}
	case "cm_id":
		ids, err := c.CMIDs(dev)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if !keep(id.Port) {
				continue
			}
			r := link(id.DevIndex, id.Device, id.Port)
			optUint(&r, "cm-idn", id.CMIDN)
			optUint(&r, "lqpn", id.QPNum)
			if id.QPType.Valid {
				r.String("qp-type", id.QPType.Value.String())
			}
			r.String("state", id.State.String())
			r.String("ps", id.PS.String())
			owner(&r, id.Owner)
			if id.Src.Valid {
				r.String("src-addr", addr(id.Src.Value))
			}
			if id.Dst.Valid {
				r.String("dst-addr", addr(id.Dst.Value))
			}
			recs = append(recs, r)
		}
	case "ctx":
		ctxs, err := c.Contexts(dev)
		if err != nil {
			return nil, err
		}
		for _, x := range ctxs {
			r := device(x.DevIndex, x.Device)
			r.Uint("ctxn", uint64(x.CtxN))
			owner(&r, x.Owner)
			recs = append(recs, r)
		}
	default:
		return nil, cli.UsageError("res: unknown object %q (want one of %s)", object, strings.Join(objects, ", "))
	}
	return recs, nil
}

// addr formats an address as rdma does: inet_ntop's text, a colon and
// the port, without brackets around an IPv6 address.
func addr(ap netip.AddrPort) string {
	return ap.Addr().String() + ":" + strconv.Itoa(int(ap.Port()))
}

// link starts a record of an object on a port: "link DEV/PORT ".
func link(index uint32, dev string, port rdmactl.Optional[uint32]) rdmaout.Record {
	r := rdmaout.Record{Prefix: "link " + dev + "/- "}
	r.JSONOnly("ifindex", index)
	r.JSONOnly("ifname", dev)
	if port.Valid {
		r.Prefix = fmt.Sprintf("link %s/%d ", dev, port.Value)
		r.JSONOnly("port", port.Value)
	}
	return r
}

// device starts a record of an object of a device: "dev DEV ".
func device(index uint32, dev string) rdmaout.Record {
	r := rdmaout.Record{Prefix: "dev " + dev + " "}
	r.JSONOnly("ifindex", index)
	r.JSONOnly("ifname", dev)
	return r
}

func optUint(r *rdmaout.Record, key string, v rdmactl.Optional[uint32]) {
	if v.Valid {
		r.Uint(key, uint64(v.Value))
	}
}

func optHex(r *rdmaout.Record, key string, v rdmactl.Optional[uint32]) {
	if v.Valid {
		r.Hex(key, uint64(v.Value))
	}
}

// owner adds pid (for a process) and comm.
func owner(r *rdmaout.Record, o rdmactl.Owner) {
	if !o.Kernel {
		r.Uint("pid", uint64(o.PID))
	}
	r.Comm(o.Comm, o.Kernel)
}
