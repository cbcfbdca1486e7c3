package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
	"golang.org/x/sys/unix"
)

// The guest network: a veth pair with one rxe device on each end.
// These addresses exist only inside the VM.
const (
	addr0 = "198.18.0.1"
	addr1 = "198.18.0.2"
	// IPv6 unique local addresses of the same veths.
	addr6_0 = "fd00:198:18::1"
	addr6_1 = "fd00:198:18::2"
	// The siw devices' veth pair (veth2, veth3): addresses of their own,
	// so rdma_cm picks siw or rxe by the address bound or resolved.
	siwAddr0 = "198.18.1.1"
	siwAddr1 = "198.18.1.2"
)

// IsGuest reports whether the process was started by the VM's init as the
// runner's guest half, or, in an EmptyRoot VM, by the kernel as /init.
func IsGuest(args []string) bool {
	return len(args) == 2 && (args[1] == guestArg || args[1] == emptyRootArg)
}

const outDir = "/run/rxevm"

// GuestMain is the VM's PID 1 after the chroot: it sets up the network
// and rxe devices, runs the command on the console, reports its exit
// status through the out share and powers off. In an EmptyRoot VM it is
// the kernel's /init and runs the steps instead (emptyRootMain). It never
// returns.
func GuestMain() {
	if os.Args[1] == emptyRootArg {
		emptyRootMain()
	}
	st := guestRun()
	if b, err := json.Marshal(st); err == nil {
		os.WriteFile(filepath.Join(outDir, "status.json"), b, 0o644)
	}
	saveDmesg()
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func guestRun() guestStatus {
	var gc guestConfig
	b, err := os.ReadFile(filepath.Join(outDir, "config.json"))
	if err == nil {
		err = json.Unmarshal(b, &gc)
	}
	if err != nil {
		return guestStatus{Error: "reading the run config: " + err.Error()}
	}
	console, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		return guestStatus{Error: err.Error()}
	}
	// Raw output: no \n -> \r\n, so the command's bytes reach the host as
	// they were written.
	if t, err := unix.IoctlGetTermios(int(console.Fd()), unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		unix.IoctlSetTermios(int(console.Fd()), unix.TCSETS, t)
	}
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	unix.Sethostname([]byte("rxevm"))
	if err := setupNetwork(ipCommand); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupRXE(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupSiw(ipCommand); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupPmem(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if gc.Link != nil { // the two-VM bed (peer.go)
		if err := setupLink(gc.Link, ipCommand); err != nil {
			return guestStatus{Error: err.Error()}
		}
		if gc.Env, err = installPeerCommand(gc.Env); err != nil {
			return guestStatus{Error: "installing rxevm-peer: " + err.Error()}
		}
		if err := startPeerServer(gc.Link, gc.Env, console); err != nil {
			return guestStatus{Error: err.Error()}
		}
		if gc.Serve {
			fmt.Fprintf(console, "rxevm: peer VM ready: %s %s on %s\n", linkDev, linkAddrs[gc.Link.Side], linkNetdev)
			for { // until the host stops the VM
				time.Sleep(time.Hour)
			}
		}
		if err := waitForPeer(gc.Link); err != nil {
			// Booted again unless the peer's own set-up failed.
			return guestStatus{Error: "the peer VM: " + err.Error(), PeerDown: !strings.Contains(err.Error(), "set-up failed")}
		}
	}

	// Look the command up in the host's PATH, as the host would.
	for _, kv := range gc.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", p)
		}
	}
	cmd := exec.Command(gc.Args[0], gc.Args[1:]...)
	cmd.Dir = gc.Dir
	cmd.Env = gc.Env
	cmd.Stdout = console
	cmd.Stderr = console
	fmt.Fprintf(console, "\nRXEVM-START-%s\n", gc.Marker)
	start := time.Now()
	err = cmd.Run()
	st := guestStatus{Command: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		ws := exitErr.Sys().(syscall.WaitStatus)
		st.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			st.ExitCode = 128 + int(ws.Signal())
			fmt.Fprintf(console, "rxevm: command killed by %v\n", ws.Signal())
		}
	default:
		fmt.Fprintf(console, "rxevm: %v\n", err)
		st.ExitCode = 127
	}
	fmt.Fprintf(console, "\nRXEVM-END-%s\n", gc.Marker)
	return st
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNetwork builds veth0 (198.18.0.1) <-> veth1 (198.18.0.2) in the one
// network namespace rxe supports on 6.1, and the routing that keeps
// traffic between them on the veths instead of lo (see
// docs/testing.md). ip runs one `ip` command line: iproute2 in the
// normal VM, ipNetlink in the empty-root one.
func setupNetwork(ip func(args ...string) error) error {
	for _, c := range networkCommands {
		if err := ip(c...); err != nil {
			return err
		}
	}
	// The receiving veth would drop rxe's UDP from a local address as a
	// martian.
	for _, dev := range []string{"all", "default", "veth0", "veth1"} {
		for k, v := range map[string]string{"accept_local": "1", "rp_filter": "0"} {
			p := "/proc/sys/net/ipv4/conf/" + dev + "/" + k
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	// Pinned neighbours: no cold ARP in the first address resolution.
	for _, n := range [][3]string{{addr1, "veth1", "veth0"}, {addr0, "veth0", "veth1"}, {addr6_1, "veth1", "veth0"}, {addr6_0, "veth0", "veth1"}} {
		mac, err := os.ReadFile("/sys/class/net/" + n[1] + "/address")
		if err != nil {
			return err
		}
		if err := ip("neigh", "replace", n[0], "lladdr", strings.TrimSpace(string(mac)), "dev", n[2], "nud", "permanent"); err != nil {
			return err
		}
	}
	return nil
}

// networkCommands are the `ip` command lines of setupNetwork.
var networkCommands = [][]string{
	{"link", "set", "lo", "up"},
	{"link", "add", "veth0", "type", "veth", "peer", "name", "veth1"},
	{"addr", "add", addr0 + "/24", "dev", "veth0"},
	{"addr", "add", addr1 + "/24", "dev", "veth1"},
	{"link", "set", "veth0", "up"},
	{"link", "set", "veth1", "up"},
	{"rule", "add", "pref", "100", "lookup", "local"},
	{"rule", "del", "pref", "0"},
	{"route", "add", addr1, "dev", "veth0", "src", addr0, "table", "101"},
	{"route", "add", addr0, "dev", "veth1", "src", addr1, "table", "102"},
	{"rule", "add", "pref", "10", "iif", "lo", "from", addr0, "to", addr1, "lookup", "101"},
	{"rule", "add", "pref", "11", "iif", "lo", "from", addr1, "to", addr0, "lookup", "102"},
	{"rule", "add", "pref", "12", "iif", "lo", "from", "0.0.0.0/32", "to", addr0, "lookup", "102"},
	// IPv6: the same, without duplicate address detection (a tentative
	// address cannot be bound). rdma_cm checks a request's route back
	// with an IPv6 lookup that carries no input interface, so the veth
	// routes match on addresses alone, and packets arriving on a veth
	// for its own address are sent to the local table first.
	{"-6", "addr", "add", addr6_0 + "/64", "dev", "veth0", "nodad"},
	{"-6", "addr", "add", addr6_1 + "/64", "dev", "veth1", "nodad"},
	{"-6", "rule", "add", "pref", "100", "lookup", "local"},
	{"-6", "rule", "del", "pref", "0"},
	{"-6", "route", "add", addr6_1, "dev", "veth0", "src", addr6_0, "table", "101"},
	{"-6", "route", "add", addr6_0, "dev", "veth1", "src", addr6_1, "table", "102"},
	{"-6", "rule", "add", "pref", "5", "iif", "veth1", "to", addr6_1, "lookup", "local"},
	{"-6", "rule", "add", "pref", "6", "iif", "veth0", "to", addr6_0, "lookup", "local"},
	{"-6", "rule", "add", "pref", "10", "from", addr6_0, "to", addr6_1, "lookup", "101"},
	{"-6", "rule", "add", "pref", "11", "from", addr6_1, "to", addr6_0, "lookup", "102"},
}

// ipCommand runs iproute2's ip.
func ipCommand(args ...string) error { return run("ip", args...) }

// setupRXE adds rxe0 on veth0 and rxe1 on veth1 over RDMA netlink and
// waits for both ports to be ACTIVE.
func setupRXE() error {
	return addLinks("rxe", [][2]string{{"rxe0", "veth0"}, {"rxe1", "veth1"}})
}

// siwNetworkCommands build veth2 (siwAddr0) <-> veth3 (siwAddr1) with the
// routing of the rxe pair (tables 103 and 104), IPv4 only.
var siwNetworkCommands = [][]string{
	{"link", "add", "veth2", "type", "veth", "peer", "name", "veth3"},
	{"addr", "add", siwAddr0 + "/24", "dev", "veth2"},
	{"addr", "add", siwAddr1 + "/24", "dev", "veth3"},
	{"link", "set", "veth2", "up"},
	{"link", "set", "veth3", "up"},
	{"route", "add", siwAddr1, "dev", "veth2", "src", siwAddr0, "table", "103"},
	{"route", "add", siwAddr0, "dev", "veth3", "src", siwAddr1, "table", "104"},
	{"rule", "add", "pref", "13", "iif", "lo", "from", siwAddr0, "to", siwAddr1, "lookup", "103"},
	{"rule", "add", "pref", "14", "iif", "lo", "from", siwAddr1, "to", siwAddr0, "lookup", "104"},
	{"rule", "add", "pref", "15", "iif", "lo", "from", "0.0.0.0/32", "to", siwAddr0, "lookup", "104"},
}

// setupSiw builds the siw pair's network (after setupNetwork) and adds
// siw0 on veth2 and siw1 on veth3.
func setupSiw(ip func(args ...string) error) error {
	for _, c := range siwNetworkCommands {
		if err := ip(c...); err != nil {
			return err
		}
	}
	for _, dev := range []string{"veth2", "veth3"} {
		for k, v := range map[string]string{"accept_local": "1", "rp_filter": "0"} {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/"+k, []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	for _, n := range [][3]string{{siwAddr1, "veth3", "veth2"}, {siwAddr0, "veth2", "veth3"}} {
		mac, err := os.ReadFile("/sys/class/net/" + n[1] + "/address")
		if err != nil {
			return err
		}
		if err := ip("neigh", "replace", n[0], "lladdr", strings.TrimSpace(string(mac)), "dev", n[2], "nud", "permanent"); err != nil {
			return err
		}
	}
	return addLinks("siw", [][2]string{{"siw0", "veth2"}, {"siw1", "veth3"}})
}

// addLinks adds RDMA links of kind over RDMA netlink ({name, netdev}) and
// waits for their ports to be ACTIVE.
func addLinks(kind string, links [][2]string) error {
	c, err := rdmanl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, l := range links {
		if err := c.NewLink(l[0], kind, l[1]); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, l := range links {
		dev := l[0]
		for {
			b, _ := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/state")
			if strings.Contains(string(b), "ACTIVE") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s port 1 not ACTIVE after 10s (state %q)", dev, strings.TrimSpace(string(b)))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// saveDmesg leaves the kernel log in the out share for -dmesg.
func saveDmesg() {
	buf := make([]byte, 1<<20)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err == nil && n > 0 {
		os.WriteFile(filepath.Join(outDir, "dmesg"), buf[:n], 0o644)
	}
}

// setupPmem turns the NVDIMM into pmemDevice. QEMU's NVDIMM has no label
// area, so the kernel binds it as a raw namespace; it is switched to
// device DAX the way ndctl create-namespace -m devdax does: unbind the
// namespace, point the region's dax seed at it (4 KiB alignment, so that
// mappings of any page multiple work; struct pages kept on the device)
// and bind the dax device to dax_pmem.
func setupPmem() error {
	const (
		nd = "/sys/bus/nd"
		ns = "namespace0.0"
	)
	if err := waitFor(nd + "/devices/" + ns + "/driver"); err != nil {
		return err
	}
	seed, err := os.ReadFile(nd + "/devices/region0/dax_seed")
	if err != nil {
		return fmt.Errorf("pmem: %w", err)
	}
	dax := strings.TrimSpace(string(seed))
	uuid := make([]byte, 16)
	if _, err := unix.Getrandom(uuid, 0); err != nil {
		return fmt.Errorf("pmem: %w", err)
	}
	for _, w := range [][2]string{
		{nd + "/drivers/nd_pmem/unbind", ns},
		{nd + "/devices/" + dax + "/uuid", fmt.Sprintf("%x-%x-%x-%x-%x", uuid[0:4], uuid[4:6], uuid[6:8], uuid[8:10], uuid[10:])},
		{nd + "/devices/" + dax + "/mode", "pmem"},
		{nd + "/devices/" + dax + "/align", "4096"},
		{nd + "/devices/" + dax + "/namespace", ns},
		{nd + "/drivers/dax_pmem/bind", dax},
	} {
		if err := os.WriteFile(w[0], []byte(w[1]), 0o200); err != nil {
			return fmt.Errorf("pmem: device DAX: %w", err)
		}
	}
	if err := waitFor(pmemDevice); err != nil {
		return err
	}
	return unix.Chmod(pmemDevice, 0o666)
}

// waitFor waits up to 10 s for path to exist.
func waitFor(path string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pmem: %s did not appear in 10s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
