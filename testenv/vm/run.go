package vm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Exit codes for failures of the VM itself, as timeout(1) and
// docker run use them, so they don't look like the command's own.
const (
	ExitTimeout  = 124 // the run passed its timeout and was killed
	ExitVMFailed = 125 // the VM never reached the command, or died under it
)

// Config describes one run.
type Config struct {
	Kernel   string        // "6.1", "6.12" or a linux-image-* package
	Refresh  bool          // ask apt for the newest package of Kernel
	Timeout  time.Duration // the whole run, boot included; 0 = none
	Args     []string      // the command; Args[0] is looked up in PATH inside the VM
	Dir      string        // working directory; default the current one
	Env      []string      // environment; default os.Environ()
	Writable []string      // host folders mounted read-write at the same path
	MemoryMB int           // default 3072
	CPUs     int           // default 2, 1 with Peer
	Stdout   io.Writer     // the command's output (stdout and stderr, merged)
	Stderr   io.Writer     // the runner's own messages
	Dmesg    bool          // print the guest kernel log after the command
	Verbose  bool          // pass boot messages through
	// Peer, when set, boots a second VM with this kernel beside the
	// first, joined to it by a data link with one rxe device on each end
	// and a management link that carries rxevm-peer (the two-VM bed,
	// peer.go). Args run on the first VM.
	Peer string
	// EmptyRoot, when set, boots a VM without the host's file system that
	// runs EmptyRoot.Steps instead of Args; Dir, Env and Writable are not
	// used then.
	EmptyRoot *EmptyRoot
}

// Result is what a run measured.
type Result struct {
	// ExitCode is the command's exit status. In an EmptyRoot run it is
	// that of the first step that failed (125 for one that did not run or
	// was not ready), 0 when every step exited 0.
	ExitCode int
	Kernel   Kernel
	Peer     Kernel        // the peer VM's, with Config.Peer
	Boot     time.Duration // from starting qemu to the command starting
	Command  time.Duration
	Total    time.Duration
	Root     *RootReport // EmptyRoot runs: what the guest saw and ran
}

// guestConfig is handed to the guest half through the out share.
type guestConfig struct {
	Args   []string
	Dir    string
	Env    []string
	Marker string
	Link   *linkConfig // in the two-VM bed
	Serve  bool        // the bed's peer: serve rxevm-peer until killed instead of running Args
}

// guestStatus comes back from the guest.
type guestStatus struct {
	ExitCode int
	Error    string // setup failure before the command ran
	Command  time.Duration
	// PeerDown: the set-up failed because the bed's peer VM stopped or
	// never answered.
	PeerDown bool
}

const guestArg = "__rxevm_guest__"

// Run boots a VM, runs cfg.Args inside it and returns its exit code. The
// error is non-nil only when the VM failed (Result.ExitCode is then
// ExitTimeout or ExitVMFailed); a command that fails is not an error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{ExitCode: ExitVMFailed}
	if cfg.EmptyRoot != nil {
		if err := checkEmptyRoot(cfg.EmptyRoot); err != nil {
			return res, fmt.Errorf("rxevm: empty root: %w", err)
		}
	} else if len(cfg.Args) == 0 {
		return res, errors.New("rxevm: no command")
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Stderr, format+"\n", a...) }
	if cfg.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return res, fmt.Errorf("rxevm: %w", err)
		}
		cfg.Dir = wd
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 3072
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
		if cfg.Peer != "" {
			cfg.CPUs = 1 // two TCG guests on the machine: one vCPU each
		}
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}

	k, err := ResolveKernel(ctx, cfg.Kernel, cfg.Refresh, logf)
	if err != nil {
		return res, err
	}
	if cfg.EmptyRoot != nil {
		if cfg.Peer != "" {
			return res, errors.New("rxevm: an empty-root VM has no peer")
		}
		return runEmptyRoot(ctx, cfg, k, logf)
	}
	initrd, err := vmInitramfs(ctx, k, logf)
	if err != nil {
		return res, err
	}
	var peer *peerBoot
	if cfg.Peer != "" {
		pk, err := ResolveKernel(ctx, cfg.Peer, cfg.Refresh, logf)
		if err != nil {
			return res, fmt.Errorf("rxevm: peer VM: %w", err)
		}
		pinitrd, err := vmInitramfs(ctx, pk, logf)
		if err != nil {
			return res, fmt.Errorf("rxevm: peer VM: %w", err)
		}
		peer = &peerBoot{kernel: pk, initrd: pinitrd}
	}
	exe, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("rxevm: %w", err)
	}
	exe, _ = filepath.EvalSymlinks(exe)

	for attempt := 1; ; attempt++ {
		res, retry, err := boot(ctx, cfg, k, initrd, exe, peer)
		if !retry || attempt == bootAttempts {
			return res, err
		}
		logf("rxevm: boot %d of %d failed before the command started; booting again: %v", attempt, bootAttempts, err)
	}
}

// vmInitramfs is the initramfs of k's VM (the siw module built first).
func vmInitramfs(ctx context.Context, k Kernel, logf func(string, ...any)) (string, error) {
	siw, err := SiwModule(ctx, k, logf)
	if err != nil {
		return "", err
	}
	return buildInitramfs(k, siw)
}

// peerBoot is the bed's peer VM to boot beside the first.
type peerBoot struct {
	kernel Kernel
	initrd string
}

// bootAttempts bounds boots that fail before the command starts. QEMU's
// multi-threaded TCG occasionally runs a stale int3 while the kernel
// patches its own text early in boot (an oops in sched_clock_cpu on
// 6.12); the command has not run yet, so booting again is safe. A VM that
// dies after the command started is never retried.
const bootAttempts = 3

// boot runs one VM. retry reports a failure before the command started.
func boot(ctx context.Context, cfg Config, k Kernel, initrd, exe string, pb *peerBoot) (res Result, retry bool, err error) {
	res = Result{ExitCode: ExitVMFailed, Kernel: k}
	if pb != nil {
		res.Peer = pb.kernel
	}
	out, err := os.MkdirTemp("", "rxevm-")
	if err != nil {
		return res, false, fmt.Errorf("rxevm: %w", err)
	}
	defer os.RemoveAll(out)
	// The NVDIMM's backing: QEMU creates an unlinked file in this folder.
	pmemDir, err := os.MkdirTemp("", "rxevm-pmem-")
	if err != nil {
		return res, false, fmt.Errorf("rxevm: %w", err)
	}
	defer os.RemoveAll(pmemDir)
	marker := make([]byte, 8)
	rand.Read(marker)
	gc := guestConfig{Args: cfg.Args, Dir: cfg.Dir, Env: guestEnv(cfg.Env, k), Marker: hex.EncodeToString(marker)}
	var shares strings.Builder
	var virtfs []string
	for i, w := range cfg.Writable {
		abs, err := filepath.Abs(w)
		if err != nil {
			return res, false, fmt.Errorf("rxevm: %w", err)
		}
		if strings.ContainsAny(abs, " \t\n,") {
			return res, false, fmt.Errorf("rxevm: writable folder %q: spaces and commas are not supported", abs)
		}
		tag := "rw" + strconv.Itoa(i)
		fmt.Fprintf(&shares, "%s %s\n", tag, abs)
		virtfs = append(virtfs, "-virtfs", "local,path="+abs+",mount_tag="+tag+",security_model=none,multidevs=remap")
	}
	var peer *peerVM
	var linkArgv []string
	if pb != nil {
		linkDir, err := os.MkdirTemp("", "rxevm-link-")
		if err != nil {
			return res, false, fmt.Errorf("rxevm: %w", err)
		}
		defer os.RemoveAll(linkDir)
		token := newToken()
		gc.Link = &linkConfig{Side: 0, Token: token, PeerKernel: pb.kernel.Release}
		gc.Env = append(gc.Env, linkEnv(gc.Link)...)
		pgc := guestConfig{Dir: cfg.Dir, Env: guestEnv(cfg.Env, pb.kernel), Marker: newToken(), Serve: true,
			Link: &linkConfig{Side: 1, Token: token, PeerKernel: k.Release}}
		pgc.Env = append(pgc.Env, linkEnv(pgc.Link)...)
		peer, err = startPeer(ctx, cfg, pb.kernel, pb.initrd, exe, pgc, shares.String(), virtfs, linkDir, out)
		if err != nil {
			return res, false, err
		}
		defer peer.stop() // before out is removed: the peer mirrors its console there
		linkArgv = linkArgs(linkDir, 0)
	}
	peerTail := func() string {
		if peer == nil {
			return ""
		}
		return peer.tail()
	}
	files := map[string][]byte{"exe": []byte(exe), "shares": []byte(shares.String())}
	if files["config.json"], err = json.Marshal(gc); err != nil {
		return res, false, fmt.Errorf("rxevm: %w", err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return res, false, fmt.Errorf("rxevm: %w", err)
		}
	}

	args := append(qemuArgs(cfg, k, initrd, ""), vmArgs(cfg, pmemDir, out)...)
	args = append(args, virtfs...)
	args = append(args, linkArgv...)
	console := &consoleFilter{start: []byte("\nRXEVM-START-" + gc.Marker + "\n"), end: []byte("\nRXEVM-END-" + gc.Marker + "\n"), out: cfg.Stdout, verbose: cfg.Verbose,
		startedCh: make(chan struct{}), endedCh: make(chan struct{})}
	qctx, kill := context.WithCancel(ctx)
	defer kill()
	dog := watch(console, kill, bootLimit, powerOffLimit)
	runErr, qemuErr, total := runQEMU(qctx, args, console, &res)
	res.Total = total
	bit := dog.stop()
	peerGone := ""
	if peer != nil {
		peerGone = peer.exited()
		peer.stop()
		if peerGone != "" && res.Boot != 0 {
			fmt.Fprintf(cfg.Stderr, "rxevm: %s while the command ran%s\n", peerGone, peer.tail())
		}
	}

	if ctx.Err() != nil {
		res.ExitCode = ExitTimeout
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, false, fmt.Errorf("rxevm: timed out after %v (kernel %s); the VM and the command were killed%s%s", cfg.Timeout, k.Release, console.tail(), peerTail())
		}
		return res, false, fmt.Errorf("rxevm: interrupted; the VM was killed")
	}
	switch bit {
	case dogBoot:
		return res, true, fmt.Errorf("rxevm: the VM did not start the command within %v of starting QEMU; it was killed (kernel %s)%s%s", bootLimit, k.Release, console.tail(), peerTail())
	case dogPowerOff:
		// The command ran and ended; what it reported is read below.
		fmt.Fprintf(cfg.Stderr, "rxevm: the VM did not power off within %v of the command's end; it was killed (kernel %s)\n", powerOffLimit, k.Release)
	}
	if cfg.Dmesg {
		if b, err := os.ReadFile(filepath.Join(out, "dmesg")); err == nil {
			fmt.Fprintf(cfg.Stderr, "rxevm: guest kernel log:\n%s", b)
		}
	}
	var st guestStatus
	b, statusErr := os.ReadFile(filepath.Join(out, "status.json"))
	if statusErr == nil {
		statusErr = json.Unmarshal(b, &st)
	}
	switch {
	case statusErr == nil && st.Error != "" && st.PeerDown:
		// Both VMs are booted again: the command has not run.
		return res, true, fmt.Errorf("rxevm: VM set-up failed before the command ran (kernel %s): %s%s", k.Release, st.Error, peerTail())
	case statusErr == nil && st.Error != "":
		return res, false, fmt.Errorf("rxevm: VM set-up failed before the command ran (kernel %s): %s%s", k.Release, st.Error, console.tail())
	case statusErr == nil:
		res.ExitCode = st.ExitCode
		res.Command = st.Command
		return res, false, nil
	}
	why := "the VM stopped before the command ran"
	if res.Boot != 0 {
		why = "the VM died while the command ran"
	}
	if b, err := os.ReadFile(filepath.Join(out, "init-error")); err == nil {
		why += ": " + strings.TrimSpace(string(b))
	}
	if console.panicked() {
		why += " (kernel panic)"
	}
	if runErr != nil {
		why += fmt.Sprintf(" (qemu: %v %s)", runErr, qemuErr)
	}
	return res, res.Boot == 0, fmt.Errorf("rxevm: %s (kernel %s)%s", why, k.Release, console.tail())
}

// vmArgs are the QEMU options of the normal VM (not the empty-root one)
// past qemuArgs: its machine, memory, NVDIMM and the host and out
// shares.
func vmArgs(cfg Config, pmemDir, out string) []string {
	return []string{
		// An emulated NVDIMM (ACPI NFIT): the guest's persistent memory,
		// which rxe requires for FLUSH_PERSISTENT (guest_linux.go).
		"-machine", "pc,nvdimm=on",
		"-m", fmt.Sprintf("%d,slots=1,maxmem=%dM", cfg.MemoryMB, cfg.MemoryMB+pmemMB),
		"-object", fmt.Sprintf("memory-backend-file,id=pmem0,share=on,mem-path=%s,size=%dM", pmemDir, pmemMB),
		"-device", "nvdimm,id=nvdimm0,memdev=pmem0",
		"-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + out + ",mount_tag=out,security_model=none",
	}
}

// Watchdog limits. A boot reaches the command in 5-20 s here, and the
// guest powers off within a second or two of the command's end; a VM past
// either limit has hung (seen once, 2026-11-24: a VM of a package whose
// tests take milliseconds on the host ran until go test killed it after
// 11 minutes, with nothing printed). A hung boot is retried like a boot
// that failed; a hung power-off is killed and the command's status read.
const (
	bootLimit     = 3 * time.Minute
	powerOffLimit = time.Minute
)

// A watchdog's verdicts.
const (
	dogNone = iota
	dogBoot
	dogPowerOff
)

type watchdog struct {
	done chan struct{}
	bit  chan int
}

// watch kills the VM (kill) when the console's start marker has not
// passed within boot of now, or the VM is still running power off after
// the end marker.
func watch(c *consoleFilter, kill func(), boot, powerOff time.Duration) *watchdog {
	w := &watchdog{done: make(chan struct{}), bit: make(chan int, 1)}
	go func() {
		bit := dogNone
		defer func() { w.bit <- bit }()
		t := time.NewTimer(boot)
		defer t.Stop()
		select {
		case <-c.startedCh:
		case <-w.done:
			return
		case <-t.C:
			bit = dogBoot
			kill()
			return
		}
		select {
		case <-c.endedCh:
		case <-w.done:
			return
		}
		t.Reset(powerOff)
		select {
		case <-w.done:
		case <-t.C:
			bit = dogPowerOff
			kill()
		}
	}()
	return w
}

// stop ends the watch once QEMU has exited and says whether it killed
// the VM, and why.
func (w *watchdog) stop() int {
	close(w.done)
	return <-w.bit
}

// pmemMB is the size of the VM's NVDIMM.
const pmemMB = 64

// pmemDevice is the guest's persistent memory: device DAX, mapped
// directly (guest_linux.go sets it up). A DAX file system would not do:
// the kernel refuses memory registration's long-term page pinning on
// fsdax pages (EOPNOTSUPP).
const pmemDevice = "/dev/dax0.0"

// guestEnv is the host environment plus what tells tests they are in the
// VM and must find devices.
func guestEnv(env []string, k Kernel) []string {
	var out []string
	for _, kv := range env {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "PURERDMA_REQUIRE_DEVICE", "PURERDMA_VM", "PURERDMA_VM_KERNEL", "PURERDMA_PMEM",
			EnvLocalAddr, EnvPeerAddr, EnvLocalDev, EnvPeerDev, EnvPeerVM:
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PURERDMA_REQUIRE_DEVICE=1", "PURERDMA_VM="+k.Release, "PURERDMA_VM_PACKAGE="+k.Package,
		"PURERDMA_PMEM="+pmemDevice)
}

// consoleFilter passes the serial console through between the guest's
// start and end markers. What comes before (boot) is kept for error
// reports; kernel messages after the start still pass, so a panic under
// the command is visible.
type consoleFilter struct {
	start, end []byte
	out        io.Writer
	verbose    bool
	started    func()
	keepAll    bool // keep the whole console in raw
	// startedCh and endedCh, when set, are closed when the start and the
	// end marker pass (boot's watchdog waits on them).
	startedCh, endedCh chan struct{}

	state   int // 0 boot, 1 command, 2 after
	pending []byte
	boot    []byte // boot output, bounded
	all     []byte // last bytes seen, for panic detection
	raw     []byte // with keepAll: everything, bounded by maxRaw
}

// maxRaw bounds consoleFilter.raw.
const maxRaw = 256 << 20

func (c *consoleFilter) Write(p []byte) (int, error) {
	c.all = appendBounded(c.all, p, 64<<10)
	if c.keepAll && len(c.raw)+len(p) <= maxRaw {
		c.raw = append(c.raw, p...)
	}
	c.pending = append(c.pending, p...)
	for {
		switch c.state {
		case 0:
			if i := bytes.Index(c.pending, c.start); i >= 0 {
				c.keepBoot(c.pending[:i])
				c.pending = c.pending[i+len(c.start):]
				c.state = 1
				if c.started != nil {
					c.started()
				}
				if c.startedCh != nil {
					close(c.startedCh)
				}
				continue
			}
			n := len(c.pending) - overlap(c.pending, c.start)
			c.keepBoot(c.pending[:n])
			c.pending = c.pending[n:]
		case 1:
			if i := bytes.Index(c.pending, c.end); i >= 0 {
				c.out.Write(c.pending[:i])
				c.pending = c.pending[i+len(c.end):]
				c.state = 2
				if c.endedCh != nil {
					close(c.endedCh)
				}
				continue
			}
			n := len(c.pending) - overlap(c.pending, c.end)
			c.out.Write(c.pending[:n])
			c.pending = c.pending[n:]
		case 2:
			c.pending = c.pending[:0]
		}
		return len(p), nil
	}
}

func (c *consoleFilter) keepBoot(p []byte) {
	if c.verbose {
		c.out.Write(p)
	}
	c.boot = appendBounded(c.boot, p, 64<<10)
}

func (c *consoleFilter) panicked() bool { return bytes.Contains(c.all, []byte("Kernel panic")) }

// tail is the console's last lines, for error messages.
func (c *consoleFilter) tail() string {
	t := bytes.TrimSpace(c.all)
	lines := bytes.Split(t, []byte("\n"))
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	if len(t) == 0 {
		return ""
	}
	return "\n--- last console output ---\n" + string(bytes.Join(lines, []byte("\n")))
}

// overlap is the length of the longest suffix of p that is a prefix of m:
// bytes that may be the start of a marker split across writes.
func overlap(p, m []byte) int {
	for n := min(len(p), len(m)-1); n > 0; n-- {
		if bytes.HasSuffix(p, m[:n]) {
			return n
		}
	}
	return 0
}

func appendBounded(dst, p []byte, limit int) []byte {
	dst = append(dst, p...)
	if len(dst) > limit {
		dst = append(dst[:0], dst[len(dst)-limit:]...)
	}
	return dst
}
