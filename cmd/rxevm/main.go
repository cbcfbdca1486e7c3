// Command rxevm runs a command inside a soft-RoCE QEMU VM:
//
//	go run ./cmd/rxevm [-kernel 6.1|6.12] [-peer 6.1|6.12] [-timeout D] -- CMD [ARGS...]
//
// The VM has two rxe devices, rxe0 on veth0 (198.18.0.1) and rxe1 on veth1
// (198.18.0.2); CMD runs as root in the current directory with the host's
// files at the same paths and PURERDMA_REQUIRE_DEVICE=1 set. rxevm exits
// with CMD's exit status, 124 when the timeout killed the VM, and 125 when
// the VM itself failed.
//
// With -peer KERNEL (env PURERDMA_PEER_KERNEL) a second VM, the peer,
// boots beside the first with KERNEL, one vCPU each: the two-VM bed.
// A data link joins them (link0 on both, MTU 4200, rxe2 on both ends,
// 198.18.2.1 on the first VM and 198.18.2.2 on the peer, active_mtu 4096
// checked at boot), and a management link (mgmt0, 198.18.3.1 and
// 198.18.3.2) carries rxevm-peer: inside either VM, `rxevm-peer CMD
// [ARGS...]` runs CMD on the other one in the same directory with the
// same host files and environment, streams its stdout and stderr and
// exits with its status (125 when the peer VM stopped or hung, with its
// console's last lines). CMD runs on the first VM with RXEVM_LOCAL_ADDR,
// RXEVM_PEER_ADDR, RXEVM_LOCAL_DEV, RXEVM_PEER_DEV and RXEVM_PEER_VM (the
// peer's kernel release) set; see docs/testing.md, "The two-VM bed".
//
// With -empty-root the VM has none of the host's files: its root holds
// the kernel modules, rxevm itself as /init (so it must be a static
// build: CGO_ENABLED=0, as make tools builds it) and the static files
// given with -add, by default in /bin; CMD is a path in the VM:
//
//	CGO_ENABLED=0 go build -o bin/ ./cmd/rxevm ./cmd/purerdma
//	bin/rxevm -empty-root -add bin/purerdma -- /bin/purerdma devinfo
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/purerdma/rdma/testenv/vm"
)

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if vm.IsGuest(os.Args) {
		vm.GuestMain()
	}
	if filepath.Base(os.Args[0]) == vm.PeerCommand {
		os.Exit(vm.PeerMain(os.Args[1:]))
	}
	os.Exit(run())
}

func run() int {
	var cfg vm.Config
	var writable multiFlag
	fs := flag.NewFlagSet("rxevm", flag.ContinueOnError)
	fs.StringVar(&cfg.Kernel, "kernel", envOr("PURERDMA_KERNEL", "6.1"), "Debian kernel: 6.1, 6.12 or a linux-image-* package (env PURERDMA_KERNEL)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "kill the VM after this long, boot included")
	fs.StringVar(&cfg.Peer, "peer", os.Getenv("PURERDMA_PEER_KERNEL"), "boot a second VM with this kernel, joined to the first by an RDMA link; rxevm-peer runs commands on it (env PURERDMA_PEER_KERNEL)")
	fs.BoolVar(&cfg.Refresh, "refresh", false, "look for a newer kernel package than the cached one")
	fs.BoolVar(&cfg.Dmesg, "dmesg", false, "print the guest kernel log after the command")
	fs.BoolVar(&cfg.Verbose, "v", false, "show the boot console too")
	fs.IntVar(&cfg.MemoryMB, "m", 3072, "guest memory in MiB")
	fs.Var(&writable, "rw", "host folder to mount read-write at the same path (repeatable)")
	emptyRoot := fs.Bool("empty-root", false, "boot without the host's file system: only the modules, this rxevm (a CGO_ENABLED=0 build) and the -add files; CMD is a path in the VM")
	var adds multiFlag
	fs.Var(&adds, "add", "with -empty-root: a static host file to put in the VM, as HOST or HOST:GUEST (default GUEST /bin/BASE) (repeatable)")
	quiet := fs.Bool("q", false, "do not print the timing line")
	gotest := fs.Bool("gotest", false, "CMD is a go test binary (go test -exec): the timeout follows -test.timeout plus 50s (inside go test's own minute), and the binary's folder is writable")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: rxevm [flags] -- CMD [ARGS...]\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nWith -peer, CMD runs on the first VM (198.18.2.1, rxe2 on link0) and `rxevm-peer CMD...`\n"+
			"inside either VM runs a command on the other (198.18.2.2 on the peer); RXEVM_LOCAL_ADDR,\n"+
			"RXEVM_PEER_ADDR, RXEVM_LOCAL_DEV, RXEVM_PEER_DEV and RXEVM_PEER_VM name both ends.\n"+
			"docs/testing.md, \"The two-VM bed\".\n")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	cfg.Args = fs.Args()
	cfg.Writable = writable
	if len(cfg.Args) == 0 {
		fs.Usage()
		return 2
	}
	if *emptyRoot {
		if *gotest || len(writable) > 0 || cfg.Peer != "" {
			fmt.Fprintln(os.Stderr, "rxevm: -empty-root shares no host folder and has no peer: -gotest, -rw and -peer do not apply")
			return 2
		}
		if err := emptyRootConfig(&cfg, adds); err != nil {
			fmt.Fprintln(os.Stderr, "rxevm:", err)
			return 2
		}
	} else if len(adds) > 0 {
		fmt.Fprintln(os.Stderr, "rxevm: -add needs -empty-root")
		return 2
	}
	if *gotest {
		if err := adaptToGoTest(&cfg); err != nil {
			fmt.Fprintln(os.Stderr, "rxevm:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := vm.Run(ctx, cfg)
	logRun(cfg, res)
	if res.Root != nil {
		for _, s := range res.Root.Steps {
			if s.Error != "" {
				fmt.Fprintf(os.Stderr, "rxevm: %s\n", s.Error)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return res.ExitCode
	}
	if !*quiet && cfg.Peer != "" {
		fmt.Fprintf(os.Stderr, "rxevm: kernel %s, peer kernel %s: boot %.1fs, command %.1fs, total %.1fs, exit %d\n",
			res.Kernel.Release, res.Peer.Release, res.Boot.Seconds(), res.Command.Seconds(), res.Total.Seconds(), res.ExitCode)
	} else if !*quiet {
		fmt.Fprintf(os.Stderr, "rxevm: kernel %s: boot %.1fs, command %.1fs, total %.1fs, exit %d\n",
			res.Kernel.Release, res.Boot.Seconds(), res.Command.Seconds(), res.Total.Seconds(), res.ExitCode)
	}
	return res.ExitCode
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// goTestSlack is how long past -test.timeout a test VM may run: boot and
// power off (10-20 s here), inside the minute go test adds.
const goTestSlack = 50 * time.Second

// adaptToGoTest fits the run to a go test binary: the VM outlives the
// test's own -test.timeout (whose panic names the stuck test) by the boot
// time, but not go test's own limit (-timeout plus a minute), so that a
// VM killed for time says so, with its console, before go test kills
// rxevm without a word; and the binary's folder takes -coverprofile and
// similar outputs.
func adaptToGoTest(cfg *vm.Config) error {
	cfg.Timeout = 10*time.Minute + goTestSlack
	for _, a := range cfg.Args[1:] {
		if v, ok := strings.CutPrefix(a, "-test.timeout="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("bad %s: %w", a, err)
			}
			cfg.Timeout = d + goTestSlack
			if d == 0 {
				cfg.Timeout = 0
			}
		}
	}
	cfg.Writable = append(cfg.Writable, filepath.Dir(cfg.Args[0]))
	return nil
}

// emptyRootConfig turns the command line into an empty-root run of one
// step, as root, with this executable as the VM's init.
func emptyRootConfig(cfg *vm.Config, adds []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return err
	}
	files := map[string]string{}
	for _, a := range adds {
		host, guest, ok := strings.Cut(a, ":")
		if !ok {
			guest = "/bin/" + filepath.Base(host)
		}
		if _, dup := files[guest]; dup {
			return fmt.Errorf("-add: %s given twice", guest)
		}
		files[guest] = host
	}
	timeout := cfg.Timeout
	if timeout == 0 { // none; a step's own default would be a minute
		timeout = math.MaxInt64
	}
	cfg.EmptyRoot = &vm.EmptyRoot{
		Init:  exe,
		Files: files,
		Steps: []vm.Step{{
			Name: "cmd", Args: cfg.Args, Timeout: timeout,
			Env: []string{"PATH=/bin", "PURERDMA_REQUIRE_DEVICE=1"},
		}},
	}
	return nil
}

// logRun appends one JSON line per run to $PURERDMA_VMLOG, so CI can check
// that the VM tests really ran, on which kernels, and how they ended.
func logRun(cfg vm.Config, res vm.Result) {
	path := os.Getenv("PURERDMA_VMLOG")
	if path == "" {
		return
	}
	rec := map[string]any{
		"kernel": cfg.Kernel, "release": res.Kernel.Release, "cmd": filepath.Base(cfg.Args[0]),
		"exit": res.ExitCode, "boot_s": res.Boot.Seconds(), "total_s": res.Total.Seconds(),
	}
	if cfg.Peer != "" {
		rec["peer"], rec["peer_release"] = cfg.Peer, res.Peer.Release
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}
