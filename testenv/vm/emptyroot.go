package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// EmptyRoot is a VM whose whole file system is its initramfs: the host's
// root is not shared (no 9p device at all) and nothing from the host's
// disk is reachable. The initramfs holds only the kernel modules the VM
// needs, Init as /init, Files, and the run's configuration. Every binary
// must be static, which Run checks before booting (see CheckStatic).
//
// Init runs as PID 1. It mounts /proc, /sys and devtmpfs on /dev (nothing
// else), loads the modules, builds the same network as the normal VM over
// rtnetlink, adds rxe0 and rxe1 over RDMA netlink, runs Steps and reports
// over the serial console, then powers off.
type EmptyRoot struct {
	// Init is a static build of a program whose main calls GuestMain when
	// IsGuest(os.Args) holds: cmd/rxevm built with CGO_ENABLED=0.
	Init string
	// Files maps absolute paths in the VM (such as /bin/purerdma) to host
	// files, copied in with mode 0755.
	Files map[string]string
	// Steps run in order.
	Steps []Step
}

// Step is one program the empty-root VM runs.
type Step struct {
	Name string   // names its result; prefixes its output lines when there are several steps
	Args []string // Args[0] is an absolute path in the VM
	Env  []string // default PATH=/bin
	// User, when not 0, runs the step as that user and group id, with no
	// supplementary groups and no capabilities but Caps (a change of uid
	// from 0 clears them).
	User uint32
	// Caps, with User, are capabilities the step keeps, by number (12 is
	// CAP_NET_ADMIN): raised as ambient capabilities, so they are
	// permitted and effective after exec.
	Caps []uintptr
	// Memlock is the step's RLIMIT_MEMLOCK (soft and hard) in bytes: 0
	// keeps the kernel's default for PID 1's children, 8 MiB; Unlimited
	// lifts it.
	Memlock uint64
	// Background starts the step and goes on to the next; it is waited for
	// after the last step.
	Background bool
	// Listen, for a Background step, is an address:port on which the step
	// must have an rdma_cm ID listening before the next step starts, read
	// from the kernel's resource tracking as `rdma res show cm_id` does.
	Listen string
	// Timeout bounds the step from its start; default one minute. A step
	// past it is killed.
	Timeout time.Duration
}

// Unlimited is Step.Memlock without a limit (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// StepResult is what one step did.
type StepResult struct {
	Name     string
	ExitCode int    // 128+N for signal N; -1 when it did not run
	Output   string // stdout and stderr, merged
	Error    string // why it did not run, was killed or was not ready
	Duration time.Duration
	// Process is what the kernel said of the process when it had exited,
	// before it was reaped: the Uid, Gid, Groups, CapInh, CapPrm, CapEff
	// and CapAmb lines of /proc/PID/status and the "Max locked memory"
	// line of /proc/PID/limits.
	Process string
}

// RootReport is what the empty-root VM's init saw and ran.
type RootReport struct {
	Mounts string   // /proc/mounts, read before the first step
	Files  []string // the root's regular files outside /proc, /sys and /dev, read before the first step; anything else is listed as "path (type)"
	Steps  []StepResult
}

// rootConfig is handed to the empty-root init inside its initramfs.
type rootConfig struct {
	Marker  string
	Dmesg   bool     // send the kernel log back
	Modules []string // .ko paths in load order
	Steps   []Step
}

// rootStatus comes back from the empty-root init on the console.
type rootStatus struct {
	Error   string // set-up failure before the first step
	Report  RootReport
	Command time.Duration
	Dmesg   string
}

const (
	emptyRootArg    = "__rxevm_empty_root__"
	rootConfigPath  = "/rxevm/config.json"
	rootStepTimeout = time.Minute
)

// emptyRootModules are the modules the empty-root VM loads, roots only
// (bootModules explains crc32_generic): no 9p, overlay or virtio, since no
// host folder is shared, and no NVDIMM.
var emptyRootModules = []string{"crc32_generic", "ib_uverbs", "rdma_ucm", "rdma_rxe", "veth"}

// CheckStatic returns an error unless path is an x86-64 ELF executable
// that needs nothing from a file system to start: no program interpreter
// (PT_INTERP) and no shared library (DT_NEEDED).
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || (f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN) {
		return fmt.Errorf("%s: not an x86-64 executable (%v, %v)", path, f.Machine, f.Type)
	}
	hasDynamic := false
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			b := make([]byte, p.Filesz)
			p.ReadAt(b, 0)
			return fmt.Errorf("%s is dynamically linked: its ELF interpreter is %s (build it with CGO_ENABLED=0)", path, strings.TrimRight(string(b), "\x00"))
		case elf.PT_DYNAMIC:
			hasDynamic = true
		}
	}
	if hasDynamic && f.SectionByType(elf.SHT_DYNAMIC) == nil {
		return fmt.Errorf("%s has a dynamic segment but no section headers to read it", path)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s is dynamically linked: it needs %s", path, strings.Join(libs, ", "))
	}
	return nil
}

// checkEmptyRoot checks r before anything is built or booted.
func checkEmptyRoot(r *EmptyRoot) error {
	if r.Init == "" {
		return errors.New("no Init")
	}
	if len(r.Steps) == 0 {
		return errors.New("no steps")
	}
	for _, p := range append([]string{r.Init}, sortedValues(r.Files)...) {
		if err := CheckStatic(p); err != nil {
			return err
		}
	}
	for g := range r.Files {
		if !path.IsAbs(g) || path.Clean(g) != g || g == "/" {
			return fmt.Errorf("file %q: want a clean absolute path in the VM", g)
		}
		if reservedRootPath(g) || g == "/lib" {
			return fmt.Errorf("file %s: the runner's own (/init, /rxevm, /lib/modules, /dev, /proc, /sys)", g)
		}
		for h := range r.Files {
			if strings.HasPrefix(h, g+"/") {
				return fmt.Errorf("file %s is also a folder of %s", g, h)
			}
		}
	}
	names := map[string]bool{}
	for i, s := range r.Steps {
		switch {
		case s.Name == "" || strings.ContainsAny(s.Name, " \n"):
			return fmt.Errorf("step %d: want a name without spaces", i)
		case names[s.Name]:
			return fmt.Errorf("step %s: the name is used twice", s.Name)
		case len(s.Args) == 0 || !path.IsAbs(s.Args[0]):
			return fmt.Errorf("step %s: Args[0] must be an absolute path in the VM", s.Name)
		case s.Listen != "" && !s.Background:
			return fmt.Errorf("step %s: Listen is for Background steps", s.Name)
		case s.Timeout < 0:
			return fmt.Errorf("step %s: negative timeout", s.Name)
		case len(s.Caps) > 0 && s.User == 0:
			return fmt.Errorf("step %s: Caps are for a User other than root, who has them all", s.Name)
		}
		for _, c := range s.Caps {
			if c > 63 {
				return fmt.Errorf("step %s: no capability %d", s.Name, c)
			}
		}
		if s.Listen != "" {
			if _, err := netip.ParseAddrPort(s.Listen); err != nil {
				return fmt.Errorf("step %s: Listen: %w", s.Name, err)
			}
		}
		names[s.Name] = true
	}
	return nil
}

func reservedRootPath(p string) bool {
	for _, r := range []string{"/init", "/rxevm", "/lib/modules", "/dev", "/proc", "/sys"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// writeEmptyRootInitramfs writes the empty-root VM's initramfs to dst.
func writeEmptyRootInitramfs(dst string, k Kernel, r *EmptyRoot, marker string, dmesg bool) error {
	mods, err := resolveModules(k.ModulesDir(), nil, emptyRootModules)
	if err != nil {
		return err
	}
	cfg := rootConfig{Marker: marker, Dmesg: dmesg, Steps: r.Steps}
	for _, m := range mods {
		cfg.Modules = append(cfg.Modules, "/lib/modules/"+m.name+".ko")
	}
	cj, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	c := &cpioWriter{w: bw}
	dirs := map[string]bool{}
	mkdirs := func(p string) {
		var parts []string
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			parts = append(parts, d)
		}
		for i := len(parts) - 1; i >= 0; i-- {
			if !dirs[parts[i]] {
				dirs[parts[i]] = true
				c.Dir(strings.TrimPrefix(parts[i], "/"))
			}
		}
	}
	for _, d := range []string{"/dev/", "/proc/", "/sys/", "/lib/modules/", "/rxevm/"} {
		mkdirs(d)
	}
	// The console as the kernel opens it for PID 1's stdin, stdout and
	// stderr (a Go program stops at once without them).
	c.CharDev("dev/console", 0o600, 5, 1)
	add := func(guest, host string) error {
		data, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		mkdirs(guest)
		c.File(strings.TrimPrefix(guest, "/"), 0o755, data)
		return nil
	}
	if err := add("/init", r.Init); err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(r.Files)) {
		if err := add(g, r.Files[g]); err != nil {
			return err
		}
	}
	for i, m := range mods {
		c.File(strings.TrimPrefix(cfg.Modules[i], "/"), 0o644, m.data)
	}
	c.File(strings.TrimPrefix(rootConfigPath, "/"), 0o644, cj)
	if err := c.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// runEmptyRoot is Run for cfg.EmptyRoot.
func runEmptyRoot(ctx context.Context, cfg Config, k Kernel, logf func(string, ...any)) (Result, error) {
	res := Result{ExitCode: ExitVMFailed, Kernel: k}
	dir, err := os.MkdirTemp("", "rxevm-root-")
	if err != nil {
		return res, fmt.Errorf("rxevm: %w", err)
	}
	defer os.RemoveAll(dir)
	m := make([]byte, 8)
	rand.Read(m)
	marker := hex.EncodeToString(m)
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := writeEmptyRootInitramfs(initrd, k, cfg.EmptyRoot, marker, cfg.Dmesg); err != nil {
		return res, fmt.Errorf("rxevm: empty-root initramfs: %w", err)
	}
	for attempt := 1; ; attempt++ {
		res, retry, err := bootEmptyRoot(ctx, cfg, k, initrd, marker)
		if !retry || attempt == bootAttempts {
			return res, err
		}
		logf("rxevm: boot %d of %d failed before the first step started; booting again: %v", attempt, bootAttempts, err)
	}
}

func bootEmptyRoot(ctx context.Context, cfg Config, k Kernel, initrd, marker string) (res Result, retry bool, err error) {
	res = Result{ExitCode: ExitVMFailed, Kernel: k}
	args := append(qemuArgs(cfg, k, initrd, "-- "+emptyRootArg), "-machine", "pc", "-m", fmt.Sprint(cfg.MemoryMB))
	console := &consoleFilter{
		start: []byte("\nRXEVM-START-" + marker + "\n"), end: []byte("\nRXEVM-END-" + marker + "\n"),
		out: cfg.Stdout, verbose: cfg.Verbose, keepAll: true,
	}
	runErr, qemuErr, total := runQEMU(ctx, args, console, &res)
	res.Total = total
	if ctx.Err() != nil {
		res.ExitCode = ExitTimeout
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, false, fmt.Errorf("rxevm: timed out after %v (kernel %s); the VM was killed%s", cfg.Timeout, k.Release, console.tail())
		}
		return res, false, fmt.Errorf("rxevm: interrupted; the VM was killed")
	}
	st, ok := parseRootStatus(console.raw, marker)
	if cfg.Dmesg && st.Dmesg != "" {
		fmt.Fprintf(cfg.Stderr, "rxevm: guest kernel log:\n%s", st.Dmesg)
	}
	switch {
	case ok && st.Error != "":
		return res, false, fmt.Errorf("rxevm: empty-root VM set-up failed before the first step (kernel %s): %s%s", k.Release, st.Error, console.tail())
	case ok:
		res.Command = st.Command
		res.Root = &st.Report
		res.ExitCode = 0
		for _, s := range st.Report.Steps {
			if s.ExitCode != 0 || s.Error != "" {
				res.ExitCode = s.ExitCode
				if s.ExitCode <= 0 {
					res.ExitCode = ExitVMFailed
				}
				break
			}
		}
		return res, false, nil
	}
	why := "the VM stopped before the first step"
	if res.Boot != 0 {
		why = "the VM died while the steps ran"
	}
	if console.panicked() {
		why += " (kernel panic)"
	}
	if runErr != nil {
		why += fmt.Sprintf(" (qemu: %v %s)", runErr, qemuErr)
	}
	return res, res.Boot == 0, fmt.Errorf("rxevm: %s (kernel %s)%s", why, k.Release, console.tail())
}

// rootStatusLine starts the init's report on the console; the JSON
// follows on the same line.
func rootStatusLine(marker string) string { return "\nRXEVM-STATUS-" + marker + " " }

func parseRootStatus(console []byte, marker string) (rootStatus, bool) {
	var st rootStatus
	prefix := []byte(rootStatusLine(marker))
	i := bytes.LastIndex(console, prefix)
	if i < 0 {
		return st, false
	}
	line, _, ok := bytes.Cut(console[i+len(prefix):], []byte("\n"))
	if !ok {
		return st, false
	}
	if err := json.Unmarshal(bytes.TrimRight(line, "\r"), &st); err != nil {
		return st, false
	}
	return st, true
}

// qemuArgs are the options every VM gets; initArgs ends the kernel
// command line.
func qemuArgs(cfg Config, k Kernel, initrd, initArgs string) []string {
	// Without clockArgs the guest finds the vCPUs' TSCs "unsynchronized"
	// and falls back to the emulated HPET: every clock_gettime becomes a
	// system call plus an emulated MMIO read, where real machines read the
	// TSC in the vDSO. TCG derives every vCPU's TSC from the one host
	// clock, so it is in fact synchronized.
	const clockArgs = "tsc=reliable clocksource=tsc"
	cmdline := "console=ttyS0 quiet loglevel=1 panic=-1 oops=panic " + clockArgs
	if initArgs != "" {
		cmdline += " " + initArgs
	}
	return []string{
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-smp", fmt.Sprint(cfg.CPUs),
		"-display", "none", "-no-reboot", "-nic", "none", "-nodefaults", "-serial", "stdio",
		"-kernel", k.Vmlinuz(), "-initrd", initrd,
		"-append", cmdline,
	}
}

// runQEMU runs qemu until it exits, its serial console going to console;
// res.Boot is set when the console shows the start marker.
func runQEMU(ctx context.Context, args []string, console *consoleFilter, res *Result) (runErr error, qemuErr string, total time.Duration) {
	qemu := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	qemu.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	qemu.Stderr = &stderr
	qemu.Stdout = console
	qemu.WaitDelay = 2 * time.Second
	start := time.Now()
	console.started = func() { res.Boot = time.Since(start) }
	runErr = qemu.Run()
	return runErr, strings.TrimSpace(stderr.String()), time.Since(start)
}
