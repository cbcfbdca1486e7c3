package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
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
	if err := setupNetwork(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupRXE(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupSiw(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if err := setupPmem(); err != nil {
		return guestStatus{Error: err.Error()}
	}
	if gc.Link != nil { // the two-VM bed (peer.go)
		if err := setupLink(gc.Link); err != nil {
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

// setupNetwork builds veth0 (198.18.0.1) <-> veth1 (198.18.0.2) in the one
// network namespace rxe supports on 6.1, and the routing that keeps
// traffic between them on the veths instead of lo (see
// docs/testing.md): rxeNetwork, over rtnetlink.
func setupNetwork() error {
	if err := applyNetwork(&rxeNetwork); err != nil {
		return err
	}
	// The receiving veth would drop rxe's UDP from a local address as a
	// martian.
	return noMartians("all", "default", "veth0", "veth1")
}

// noMartians lets devs accept packets from local addresses, without
// reverse path filtering.
func noMartians(devs ...string) error {
	for _, dev := range devs {
		for k, v := range map[string]string{"accept_local": "1", "rp_filter": "0"} {
			p := "/proc/sys/net/ipv4/conf/" + dev + "/" + k
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// rxeNetwork is the rxe pair's network. The local table moves after rules
// sending each veth's address to the other out of its own veth. IPv6:
// the same, without duplicate address detection (a tentative address
// cannot be bound). rdma_cm checks a request's route back with an IPv6
// lookup that carries no input interface, so the veth routes match on
// addresses alone, and packets arriving on a veth for its own address are
// sent to the local table first. Neighbours are pinned: no cold ARP in
// the first address resolution.
var rxeNetwork = network{
	Veths: []veth{{"veth0", "veth1"}},
	Links: []link{{Name: "lo", Up: true}, {Name: "veth0", Up: true}, {Name: "veth1", Up: true}},
	Addrs: []addr{
		{Dev: "veth0", Prefix: prefix(addr0 + "/24")},
		{Dev: "veth1", Prefix: prefix(addr1 + "/24")},
		{Dev: "veth0", Prefix: prefix(addr6_0 + "/64"), NoDAD: true},
		{Dev: "veth1", Prefix: prefix(addr6_1 + "/64"), NoDAD: true},
	},
	Rules: []rule{
		{Pref: 100, Table: unix.RT_TABLE_LOCAL},
		{Pref: 0, Delete: true},
		{Pref: 10, IIf: "lo", From: host(addr0), To: host(addr1), Table: 101},
		{Pref: 11, IIf: "lo", From: host(addr1), To: host(addr0), Table: 102},
		{Pref: 12, IIf: "lo", From: prefix("0.0.0.0/32"), To: host(addr0), Table: 102},
		{IPv6: true, Pref: 100, Table: unix.RT_TABLE_LOCAL},
		{IPv6: true, Pref: 0, Delete: true},
		{IPv6: true, Pref: 5, IIf: "veth1", To: host(addr6_1), Table: unix.RT_TABLE_LOCAL},
		{IPv6: true, Pref: 6, IIf: "veth0", To: host(addr6_0), Table: unix.RT_TABLE_LOCAL},
		{IPv6: true, Pref: 10, From: host(addr6_0), To: host(addr6_1), Table: 101},
		{IPv6: true, Pref: 11, From: host(addr6_1), To: host(addr6_0), Table: 102},
	},
	Routes: []route{
		{Dst: host(addr1), Dev: "veth0", Src: netip.MustParseAddr(addr0), Table: 101},
		{Dst: host(addr0), Dev: "veth1", Src: netip.MustParseAddr(addr1), Table: 102},
		{Dst: host(addr6_1), Dev: "veth0", Src: netip.MustParseAddr(addr6_0), Table: 101},
		{Dst: host(addr6_0), Dev: "veth1", Src: netip.MustParseAddr(addr6_1), Table: 102},
	},
	Neighs: []neigh{
		{Addr: netip.MustParseAddr(addr1), Dev: "veth0", MACOf: "veth1"},
		{Addr: netip.MustParseAddr(addr0), Dev: "veth1", MACOf: "veth0"},
		{Addr: netip.MustParseAddr(addr6_1), Dev: "veth0", MACOf: "veth1"},
		{Addr: netip.MustParseAddr(addr6_0), Dev: "veth1", MACOf: "veth0"},
	},
}

// setupRXE adds rxe0 on veth0 and rxe1 on veth1 over RDMA netlink and
// waits for both ports to be ACTIVE.
func setupRXE() error {
	return addLinks("rxe", [][2]string{{"rxe0", "veth0"}, {"rxe1", "veth1"}})
}

// siwNetwork is veth2 (siwAddr0) <-> veth3 (siwAddr1) with the routing
// of the rxe pair (tables 103 and 104), IPv4 only.
var siwNetwork = network{
	Veths: []veth{{"veth2", "veth3"}},
	Links: []link{{Name: "veth2", Up: true}, {Name: "veth3", Up: true}},
	Addrs: []addr{{Dev: "veth2", Prefix: prefix(siwAddr0 + "/24")}, {Dev: "veth3", Prefix: prefix(siwAddr1 + "/24")}},
	Rules: []rule{
		{Pref: 13, IIf: "lo", From: host(siwAddr0), To: host(siwAddr1), Table: 103},
		{Pref: 14, IIf: "lo", From: host(siwAddr1), To: host(siwAddr0), Table: 104},
		{Pref: 15, IIf: "lo", From: prefix("0.0.0.0/32"), To: host(siwAddr0), Table: 104},
	},
	Routes: []route{
		{Dst: host(siwAddr1), Dev: "veth2", Src: netip.MustParseAddr(siwAddr0), Table: 103},
		{Dst: host(siwAddr0), Dev: "veth3", Src: netip.MustParseAddr(siwAddr1), Table: 104},
	},
	Neighs: []neigh{
		{Addr: netip.MustParseAddr(siwAddr1), Dev: "veth2", MACOf: "veth3"},
		{Addr: netip.MustParseAddr(siwAddr0), Dev: "veth3", MACOf: "veth2"},
	},
}

// setupSiw builds the siw pair's network (after setupNetwork) and adds
// siw0 on veth2 and siw1 on veth3.
func setupSiw() error {
	if err := applyNetwork(&siwNetwork); err != nil {
		return err
	}
	if err := noMartians("veth2", "veth3"); err != nil {
		return err
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
