// Command purerdma inspects and manages RDMA devices without libibverbs or
// iproute2:
//
//	purerdma devices                                 list devices, like ibv_devices
//	purerdma link [show|list] [DEV[/PORT]]           list ports, like rdma link
//	purerdma link add NAME type TYPE netdev NETDEV   add a software device (rxe, siw)
//	purerdma link del NAME                           remove a software device
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/uverbs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is a subcommand that lives in its own file and registers itself
// in an init function, so commands can be added without touching this one.
type command struct {
	name  string
	usage string // one or more "  name args   description" lines
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("purerdma: command " + c.name + " registered twice")
	}
	commands[c.name] = c
}

// usage is the built-in commands' text followed by the registered ones'.
func usage() string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(usageText)
	for _, n := range names {
		b.WriteString(commands[n].usage)
		if !strings.HasSuffix(commands[n].usage, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// linkClient is what the link commands need from *rdmanl.Conn; tests
// substitute a fake.
type linkClient interface {
	NewLink(name, linkType, netdev string) error
	DelLink(name string) error
	Links() ([]rdmanl.Link, error)
	Close() error
}

// The system the commands act on; tests replace these.
var (
	listDevices = uverbs.Devices
	dialNetlink = func() (linkClient, error) {
		c, err := rdmanl.Dial()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
)

const usageText = `usage: purerdma <command> [arguments]

commands:
  devices                                  list RDMA devices and their node GUIDs
  link [show|list] [DEV[/PORT]]            list the ports of RDMA devices
  link add NAME type TYPE netdev NETDEV    add a software RDMA device (type rxe or siw)
  link del NAME                            remove a software RDMA device
`

// errUsage marks a command line that cannot be run; run prints the usage.
var errUsage = errors.New("usage")

// usageError reports a bad command line.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// run runs the command line args (without the program name) and returns
// the exit status: 0 on success, 1 when the command fails, 2 for a bad
// command line.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that ends on an interrupt.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()); msg != "" {
			fmt.Fprintf(stderr, "purerdma%s\n", msg)
		}
		io.WriteString(stderr, usage())
		return 2
	default:
		fmt.Fprintf(stderr, "purerdma: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return errUsage
	case "devices":
		if len(args) > 1 {
			return usageError("devices takes no arguments")
		}
		return devices(stdout)
	case "link":
		return link(args[1:], stdout)
	}
	if c, ok := commands[args[0]]; ok {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	return usageError("unknown command %q", args[0])
}

// devices prints the devices in ibv_devices' format.
func devices(stdout io.Writer) error {
	devs, err := listDevices()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "    %-16s\t   node GUID\n", "device")
	fmt.Fprintf(stdout, "    %-16s\t----------------\n", "------")
	for _, d := range devs {
		fmt.Fprintf(stdout, "    %-16s\t%16s\n", d.Name, d.NodeGUID)
	}
	return nil
}

func link(args []string, stdout io.Writer) error {
	verb := "show"
	if len(args) > 0 {
		verb, args = args[0], args[1:]
	}
	switch verb {
	case "show", "list":
		if len(args) > 1 {
			return usageError("link %s takes at most one device", verb)
		}
		filter := ""
		if len(args) == 1 {
			filter = args[0]
		}
		return linkShow(filter, stdout)
	case "add":
		name, linkType, netdev, err := parseLinkAdd(args)
		if err != nil {
			return err
		}
		return withNetlink(func(c linkClient) error { return c.NewLink(name, linkType, netdev) })
	case "del", "delete":
		if len(args) != 1 {
			return usageError("link %s takes one device name", verb)
		}
		return withNetlink(func(c linkClient) error { return c.DelLink(args[0]) })
	case "-h", "-help", "--help", "help":
		return errUsage
	}
	return usageError("unknown link command %q", verb)
}

// parseLinkAdd parses "NAME type TYPE netdev NETDEV", the words of
// iproute2's "rdma link add"; the two keyword pairs may come in either
// order.
func parseLinkAdd(args []string) (name, linkType, netdev string, err error) {
	if len(args) == 0 {
		return "", "", "", usageError("link add needs a device name")
	}
	name, args = args[0], args[1:]
	for len(args) > 0 {
		if len(args) < 2 {
			return "", "", "", usageError("link add: %q needs a value", args[0])
		}
		key, val := args[0], args[1]
		switch key {
		case "type":
			linkType = val
		case "netdev":
			netdev = val
		default:
			return "", "", "", usageError("link add: unknown keyword %q", key)
		}
		args = args[2:]
	}
	if linkType == "" || netdev == "" {
		return "", "", "", usageError("link add needs both type and netdev")
	}
	return name, linkType, netdev, nil
}

// linkShow prints the ports in the format of iproute2's "rdma link",
// optionally only those of one device ("rxe0") or one port ("rxe0/1").
func linkShow(filter string, stdout io.Writer) error {
	dev, port := filter, uint32(0)
	if d, p, ok := strings.Cut(filter, "/"); ok {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil || n == 0 {
			return usageError("bad port in %q", filter)
		}
		dev, port = d, uint32(n)
	}
	var links []rdmanl.Link
	err := withNetlink(func(c linkClient) error {
		var err error
		links, err = c.Links()
		return err
	})
	if err != nil {
		return err
	}
	shown := 0
	for _, l := range links {
		if dev != "" && l.DevName != dev || port != 0 && l.Port != port {
			continue
		}
		fmt.Fprintf(stdout, "link %s/%d state %s physical_state %s", l.DevName, l.Port, l.StateName(), l.PhysStateName())
		if l.Netdev != "" {
			fmt.Fprintf(stdout, " netdev %s", l.Netdev)
		}
		fmt.Fprintln(stdout)
		shown++
	}
	if filter != "" && shown == 0 {
		var names []string
		for _, l := range links {
			if !slices.Contains(names, l.DevName) {
				names = append(names, l.DevName)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("link show %s: %w; %s", filter, rdmanl.ErrNoDevice, linkAddHint)
		}
		return fmt.Errorf("link show %s: %w; the RDMA devices here: %s", filter, rdmanl.ErrNoDevice, strings.Join(names, ", "))
	}
	return nil
}

// withNetlink runs f on a fresh RDMA netlink connection.
func withNetlink(f func(linkClient) error) error {
	c, err := dialNetlink()
	if err != nil {
		return err
	}
	err = f(c)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}
