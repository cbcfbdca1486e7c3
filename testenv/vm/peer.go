package vm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The two-VM bed (Config.Peer): the first VM and the peer VM are joined
// by two point-to-point links, each a virtio-net device on both VMs over
// QEMU's -netdev dgram on Unix sockets (no root, no bridge):
//
//   - the data link, link0 on both ends (MTU linkMTU), with one rxe
//     device, linkDev, on each end: linkAddrs[0] on the first VM,
//     linkAddrs[1] on the peer;
//   - the management link, mgmt0 on both ends (no RDMA device), which
//     carries rxevm-peer's commands, so that faults put on the data link
//     never cut the channel that runs the test.
//
// Index 0 is the first VM, 1 the peer. docs/testing.md, "The two-VM bed".
var (
	linkAddrs = [2]string{"198.18.2.1", "198.18.2.2"}
	mgmtAddrs = [2]string{"198.18.3.1", "198.18.3.2"}
	linkMACs  = [2]string{"52:54:00:18:02:01", "52:54:00:18:02:02"}
	mgmtMACs  = [2]string{"52:54:00:18:03:01", "52:54:00:18:03:02"}
)

const (
	linkNetdev = "link0"
	mgmtNetdev = "mgmt0"
	linkDev    = "rxe2"
	// linkMTU: rxe's path MTU is the largest IB MTU that fits the netdev
	// MTU minus 80 bytes of headers, so 4096 needs at least 4176.
	linkMTU = 4200
	// wantActiveMTU is the active_mtu both link devices must report.
	wantActiveMTU = 4096
	// peerPort is rxevm-peer's TCP port on the management addresses.
	peerPort = 7000
)

// The bed's environment variables, set in both VMs' commands (each VM
// names itself LOCAL and the other PEER).
const (
	EnvLocalAddr = "RXEVM_LOCAL_ADDR" // this VM's IPv4 address on the data link
	EnvPeerAddr  = "RXEVM_PEER_ADDR"  // the other VM's
	EnvLocalDev  = "RXEVM_LOCAL_DEV"  // this VM's rxe device on the data link
	EnvPeerDev   = "RXEVM_PEER_DEV"   // the other VM's
	EnvPeerVM    = "RXEVM_PEER_VM"    // the other VM's kernel release
)

// PeerCommand is the command on PATH in both VMs of the bed that runs its
// arguments on the other VM.
const PeerCommand = "rxevm-peer"

// peerBinDir holds the rxevm-peer link in the guest; it is appended to
// the command's PATH.
const peerBinDir = "/run/rxevm-bin"

// Files the host keeps in the first VM's out share (/run/rxevm) for
// rxevm-peer's error messages.
const (
	peerConsoleFile = "peer-console" // the peer's console, last lines
	peerExitFile    = "peer-exit"    // why the peer VM is gone, once it is
)

// linkConfig tells a guest of the bed which end it is.
type linkConfig struct {
	Side       int    // 0 the first VM, 1 the peer
	Token      string // shared by both ends; rxevm-peer requests carry it
	PeerKernel string // the other end's kernel release
}

// linkEnv is the bed's environment of side's commands.
func linkEnv(l *linkConfig) []string {
	o := 1 - l.Side
	return []string{
		EnvLocalAddr + "=" + linkAddrs[l.Side], EnvPeerAddr + "=" + linkAddrs[o],
		EnvLocalDev + "=" + linkDev, EnvPeerDev + "=" + linkDev,
		EnvPeerVM + "=" + l.PeerKernel,
	}
}

// linkArgs are side's QEMU options for both links; dir holds their
// sockets.
func linkArgs(dir string, side int) []string {
	var args []string
	for _, l := range []struct{ id, mac, extra string }{
		{"data", linkMACs[side], fmt.Sprintf(",host_mtu=%d", linkMTU)},
		{"mgmt", mgmtMACs[side], ""},
	} {
		local := filepath.Join(dir, fmt.Sprintf("%s%d", l.id, side))
		remote := filepath.Join(dir, fmt.Sprintf("%s%d", l.id, 1-side))
		args = append(args,
			"-netdev", fmt.Sprintf("dgram,id=%s,local.type=unix,local.path=%s,remote.type=unix,remote.path=%s", l.id, local, remote),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=%s,mac=%s%s", l.id, l.mac, l.extra))
	}
	return args
}

// peerVM is the peer QEMU of a bed, running beside the first VM.
type peerVM struct {
	kernel  Kernel
	outA    string // the first VM's out share
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	console []byte // bounded
	exitMsg string // set when the peer stopped by itself
}

// startPeer boots the peer VM of kernel k; gc is its guest configuration
// (Serve set). Its console is mirrored into outA's peer-console file, and
// when it stops by itself, why goes into outA's peer-exit file.
// exe, shares and virtfs are the first VM's (the same host folders,
// mounted the same way).
func startPeer(ctx context.Context, cfg Config, k Kernel, initrd, exe string, gc guestConfig, shares string, virtfs []string, linkDir, outA string) (*peerVM, error) {
	out, err := os.MkdirTemp("", "rxevm-peer-")
	if err != nil {
		return nil, fmt.Errorf("rxevm: %w", err)
	}
	pmemDir, err := os.MkdirTemp("", "rxevm-pmem-")
	if err != nil {
		os.RemoveAll(out)
		return nil, fmt.Errorf("rxevm: %w", err)
	}
	files := map[string][]byte{"exe": []byte(exe), "shares": []byte(shares)}
	if files["config.json"], err = json.Marshal(gc); err == nil {
		for name, data := range files {
			if err = os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
				break
			}
		}
	}
	if err != nil {
		os.RemoveAll(out)
		os.RemoveAll(pmemDir)
		return nil, fmt.Errorf("rxevm: peer VM: %w", err)
	}
	args := append(qemuArgs(cfg, k, initrd, ""), vmArgs(cfg, pmemDir, out)...)
	args = append(args, virtfs...)
	args = append(args, linkArgs(linkDir, 1)...)
	pctx, cancel := context.WithCancel(ctx)
	p := &peerVM{kernel: k, outA: outA, cancel: cancel, done: make(chan struct{})}
	qemu := exec.CommandContext(pctx, "qemu-system-x86_64", args...)
	qemu.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	qemu.Stderr = &stderr
	qemu.Stdout = p
	qemu.WaitDelay = 2 * time.Second
	if err := qemu.Start(); err != nil {
		cancel()
		os.RemoveAll(out)
		os.RemoveAll(pmemDir)
		return nil, fmt.Errorf("rxevm: peer VM: %w", err)
	}
	mirrorDone := make(chan struct{})
	go func() { // the console mirror, for rxevm-peer's errors
		defer close(mirrorDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				p.writeConsole()
				return
			case <-t.C:
				p.writeConsole()
			}
		}
	}()
	go func() {
		defer os.RemoveAll(pmemDir)
		defer os.RemoveAll(out)
		err := qemu.Wait()
		if pctx.Err() == nil { // stopped by itself: say why
			why := "the peer VM stopped"
			var st guestStatus
			if b, e := os.ReadFile(filepath.Join(out, "status.json")); e == nil && json.Unmarshal(b, &st) == nil && st.Error != "" {
				why += ": set-up failed: " + st.Error
			} else if b, e := os.ReadFile(filepath.Join(out, "init-error")); e == nil {
				why += ": " + strings.TrimSpace(string(b))
			}
			if bytes.Contains(p.consoleBytes(), []byte("Kernel panic")) {
				why += " (kernel panic)"
			}
			if err != nil {
				why += fmt.Sprintf(" (qemu: %v %s)", err, strings.TrimSpace(stderr.String()))
			}
			p.mu.Lock()
			p.exitMsg = fmt.Sprintf("%s (kernel %s)", why, k.Release)
			p.mu.Unlock()
			writeFileAtomic(filepath.Join(outA, peerExitFile), []byte(p.exitMsg+"\n"))
		}
		close(p.done)
		<-mirrorDone
	}()
	return p, nil
}

// Write takes the peer's serial console.
func (p *peerVM) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.console = appendBounded(p.console, b, 64<<10)
	p.mu.Unlock()
	return len(b), nil
}

func (p *peerVM) consoleBytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.console)
}

// tail is the peer console's last lines, for error messages.
func (p *peerVM) tail() string {
	c := consoleFilter{all: p.consoleBytes()}
	return strings.Replace(c.tail(), "--- last console output ---", "--- last console output of the peer VM ---", 1)
}

func (p *peerVM) writeConsole() {
	writeFileAtomic(filepath.Join(p.outA, peerConsoleFile), []byte(p.tail()))
}

// exited reports why the peer stopped by itself, "" while it runs or when
// it was stopped.
func (p *peerVM) exited() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitMsg
}

// stop kills the peer VM and waits for it.
func (p *peerVM) stop() {
	p.cancel()
	<-p.done
}

func writeFileAtomic(path string, data []byte) {
	tmp := path + ".new"
	if os.WriteFile(tmp, data, 0o644) == nil {
		os.Rename(tmp, path)
	}
}

// newToken is a random hex string.
func newToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
