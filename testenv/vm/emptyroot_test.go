package vm

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEmptyRoot is the proof that purerdma needs neither libibverbs nor
// libc nor any file: it boots a VM whose only files are the modules, the
// runner's static init and three static binaries under test (the
// purerdma command and the rpma 01-connection example's server and
// client), with no share of the host's file system, and runs them there
// as an unprivileged user without capabilities, with an unlimited
// memlock limit: what docs/containers.md asks of a container.
//
// It boots a VM, so it runs where make emptyroot sets
// PURERDMA_TEST_EMPTYROOT=1 (make test does, on each kernel); there a
// missing qemu is a failure. PURERDMA_KERNEL picks the kernel.
func TestEmptyRoot(t *testing.T) {
	if os.Getenv("PURERDMA_VM") != "" {
		t.Skip("inside the VM: no nested VMs")
	}
	if os.Getenv("PURERDMA_TEST_EMPTYROOT") != "1" {
		t.Skip("boots a VM: make emptyroot runs it on each kernel (PURERDMA_TEST_EMPTYROOT=1)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("PURERDMA_TEST_EMPTYROOT=1 but qemu-system-x86_64 is missing (scripts/install-deps)")
	}
	kernel := os.Getenv("PURERDMA_KERNEL")
	if kernel == "" {
		kernel = "6.1"
	}

	// The binaries as a user builds them; rxevm is the VM's init.
	bin := t.TempDir()
	start := time.Now()
	pkgs := map[string]string{
		"purerdma": "./cmd/purerdma",
		"rxevm":    "./cmd/rxevm",
		"server":   "./rpma/examples/01-connection/server",
		"client":   "./rpma/examples/01-connection/client",
	}
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, slices.Sorted(maps.Values(pkgs))...)...)
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	for name := range pkgs {
		if err := CheckStatic(filepath.Join(bin, name)); err != nil {
			t.Errorf("%s is not static: %v", name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	const (
		srv         = addr0
		cli         = addr1
		nobody      = 65534
		capNetAdmin = 12
		size        = "65535" // the ping client registers two buffers of this size, the server one
	)
	purerdma := "/bin/purerdma"
	steps := []Step{
		// RDMA netlink's NEWLINK and DELLINK need CAP_NET_ADMIN, and
		// nothing else: without it the kernel refuses, with it alone a
		// user other than root adds and removes an rxe device (on lo, so
		// as not to touch rxe0 and rxe1, which the init added as root).
		{Name: "link-add-unprivileged", Args: []string{purerdma, "link", "add", "rxe2", "type", "rxe", "netdev", "lo"}, User: nobody},
		{Name: "link-add-net-admin", Args: []string{purerdma, "link", "add", "rxe2", "type", "rxe", "netdev", "lo"},
			User: nobody, Caps: []uintptr{capNetAdmin}},
		{Name: "link-del-net-admin", Args: []string{purerdma, "link", "del", "rxe2"}, User: nobody, Caps: []uintptr{capNetAdmin}},
		// Everything else runs as a user without capabilities, with the
		// memlock limit lifted, as docs/containers.md asks of a container.
		{Name: "devinfo", Args: []string{purerdma, "devinfo"}, User: nobody, Memlock: Unlimited},
		{Name: "ping-server", Args: []string{purerdma, "ping", "-s", "-a", srv, "-p", "7400", "-C", "3", "-S", size},
			User: nobody, Memlock: Unlimited, Background: true, Listen: srv + ":7400"},
		{Name: "ping-client", Args: []string{purerdma, "ping", "-c", "-a", srv, "-I", cli, "-p", "7400", "-C", "3", "-S", size, "-V"},
			User: nobody, Memlock: Unlimited},
		// The same client with a 64 KiB memlock limit and no CAP_IPC_LOCK:
		// registering its buffers fails before it would connect (nobody
		// listens on 7402), with an error that says the limit.
		{Name: "ping-client-64k-memlock", Args: []string{purerdma, "ping", "-c", "-a", srv, "-I", cli, "-p", "7402", "-C", "3", "-S", size},
			User: nobody, Memlock: 64 << 10},
		{Name: "rpma-server", Args: []string{"/bin/01-connection-server", srv, "7401"},
			User: nobody, Memlock: Unlimited, Background: true, Listen: srv + ":7401"},
		{Name: "rpma-client", Args: []string{"/bin/01-connection-client", srv, "7401"},
			User: nobody, Memlock: Unlimited},
	}
	var console, runner bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{
		Kernel: kernel, Stdout: &console, Stderr: &runner, Timeout: 4 * time.Minute,
		EmptyRoot: &EmptyRoot{
			Init: filepath.Join(bin, "rxevm"),
			Files: map[string]string{
				purerdma:                    filepath.Join(bin, "purerdma"),
				"/bin/01-connection-server": filepath.Join(bin, "server"),
				"/bin/01-connection-client": filepath.Join(bin, "client"),
			},
			Steps: steps,
		},
	})
	t.Logf("kernel %s: boot %.1fs, steps %.1fs, total %.1fs", res.Kernel.Release, res.Boot.Seconds(), res.Command.Seconds(), res.Total.Seconds())
	if err != nil || res.Root == nil {
		t.Fatalf("Run: %v (exit %d)\nrunner: %s\nconsole:\n%s", err, res.ExitCode, runner.String(), console.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("console:\n%s", console.String())
		}
	}()

	// Nothing is mounted but the initramfs and the kernel's own file
	// systems: no 9p (the host's root in the normal VM), no other disk.
	var mounts [][2]string
	for _, l := range strings.Split(strings.TrimSpace(res.Root.Mounts), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("bad /proc/mounts line %q", l)
		}
		if f[2] == "9p" {
			t.Errorf("a 9p file system is mounted: %s", l)
		}
		mounts = append(mounts, [2]string{f[1], f[2]})
	}
	wantMounts := [][2]string{{"/", "rootfs"}, {"/proc", "proc"}, {"/sys", "sysfs"}, {"/dev", "devtmpfs"}}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s\n/proc/mounts:\n%s", diff, res.Root.Mounts)
	}

	// The root holds the modules, /init, the binaries under test and the
	// run's configuration, nothing else.
	var files, modules []string
	for _, f := range res.Root.Files {
		if m, ok := strings.CutPrefix(f, "/lib/modules/"); ok && strings.HasSuffix(m, ".ko") && !strings.Contains(m, "/") {
			modules = append(modules, strings.TrimSuffix(m, ".ko"))
			continue
		}
		files = append(files, f)
	}
	wantFiles := []string{"/bin/01-connection-client", "/bin/01-connection-server", "/bin/purerdma", "/init", rootConfigPath}
	slices.Sort(files)
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("files in the VM's root (-want +got):\n%s", diff)
	}
	for _, m := range []string{"ib_uverbs", "rdma_ucm", "rdma_rxe"} {
		if !slices.Contains(modules, m) {
			t.Errorf("module %s not in the root's /lib/modules: %v", m, modules)
		}
	}

	// Each step: exit status, what it must print.
	want := map[string]struct {
		exit int
		out  []string
	}{
		"link-add-unprivileged":   {1, []string{"operation not permitted"}},
		"link-add-net-admin":      {0, nil},
		"link-del-net-admin":      {0, nil},
		"devinfo":                 {0, []string{"hca_id:\trxe0\n", "hca_id:\trxe1\n", "PORT_ACTIVE"}},
		"ping-client-64k-memlock": {1, []string{"cannot allocate memory", "RLIMIT_MEMLOCK, the locked-memory limit, is 65536 bytes", "ulimit -l"}},
		"ping-server":             {0, nil},
		"ping-client":             {0, nil}, // -V: it compares what came back
		"rpma-server":             {0, []string{"Received a message: Hello server!"}},
		"rpma-client":             {0, []string{"Received a message: Hello client!"}},
	}
	byName := map[string]Step{}
	for _, s := range steps {
		byName[s.Name] = s
	}
	var got []string
	for _, s := range res.Root.Steps {
		got = append(got, s.Name)
		checkProcess(t, s, byName[s.Name])
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected step %s", s.Name)
			continue
		}
		t.Logf("step %s: exit %d in %v", s.Name, s.ExitCode, s.Duration.Round(time.Millisecond))
		if w.exit != 0 {
			t.Logf("step %s printed: %s", s.Name, strings.TrimSpace(s.Output))
		}
		if s.Error != "" {
			t.Errorf("step %s: %s", s.Name, s.Error)
		}
		if s.ExitCode != w.exit {
			t.Errorf("step %s exited %d, want %d; output:\n%s", s.Name, s.ExitCode, w.exit, s.Output)
		}
		for _, o := range w.out {
			if !strings.Contains(s.Output, o) {
				t.Errorf("step %s did not print %q; output:\n%s", s.Name, o, s.Output)
			}
		}
	}
	var wantNames []string
	for _, s := range steps {
		wantNames = append(wantNames, s.Name)
	}
	if diff := cmp.Diff(wantNames, got); diff != "" {
		t.Errorf("step results (-want +got):\n%s", diff)
	}
	for _, s := range res.Root.Steps {
		if s.Name == "devinfo" && strings.Contains(s.Output, "rxe2") {
			t.Errorf("devinfo lists rxe2, which link-del-net-admin removed:\n%s", s.Output)
		}
	}
	// The first step failed, as expected.
	if res.ExitCode != 1 {
		t.Errorf("Result.ExitCode %d, want 1 (the first failing step's, link-add-unprivileged)", res.ExitCode)
	}
}

// checkProcess checks what the kernel said of a step's process: its user
// and group, no capabilities when it ran as a user other than root, and
// its memlock limit.
func checkProcess(t *testing.T, r StepResult, s Step) {
	t.Helper()
	facts := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Process), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k != "Max locked memory" {
			facts[k] = strings.Join(strings.Fields(v), " ")
		} else if v, ok := strings.CutPrefix(l, "Max locked memory"); ok {
			facts["memlock"] = strings.Join(strings.Fields(v), " ")
		}
	}
	id := fmt.Sprint(s.User)
	want := map[string]string{
		"Uid": strings.Repeat(id+" ", 3) + id, "Gid": strings.Repeat(id+" ", 3) + id,
	}
	switch s.Memlock {
	case 0:
		want["memlock"] = "8388608 8388608 bytes"
	case Unlimited:
		want["memlock"] = "unlimited unlimited bytes"
	default:
		want["memlock"] = fmt.Sprintf("%d %d bytes", s.Memlock, s.Memlock)
	}
	if s.User != 0 {
		var caps uint64
		for _, c := range s.Caps {
			caps |= 1 << c
		}
		want["Groups"] = ""
		for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			want[c] = fmt.Sprintf("%016x", caps)
		}
	}
	for k, v := range want {
		if got, ok := facts[k]; !ok || got != v {
			t.Errorf("step %s: %s is %q, want %q; the process:\n%s", s.Name, k, got, v, r.Process)
		}
	}
}

// TestCheckStatic: a static Go binary passes, a dynamically linked one
// and a file that is no executable do not.
func TestCheckStatic(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "static")
	cmd := exec.Command("go", "build", "-o", exe, "./testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := CheckStatic(exe); err != nil {
		t.Errorf("CheckStatic(a CGO_ENABLED=0 build) = %v", err)
	}
	// Debian links coreutils against glibc.
	if err := CheckStatic("/bin/true"); err == nil || !strings.Contains(err.Error(), "ELF interpreter is /lib64/ld-linux-x86-64.so.2") {
		t.Errorf("CheckStatic(/bin/true) = %v, want its ELF interpreter named", err)
	}
	if err := CheckStatic("emptyroot_test.go"); err == nil {
		t.Error("CheckStatic(a Go source file) succeeded")
	}
}

func TestCheckEmptyRoot(t *testing.T) {
	exe := "/bin/busybox" // static (busybox-static)
	if _, err := os.Stat(exe); err != nil {
		// make unit sets PURERDMA_TEST_RXEVM=1 after scripts/install-deps,
		// which installs it: missing there is a failure.
		if os.Getenv("PURERDMA_TEST_RXEVM") == "1" || os.Getenv("PURERDMA_TEST_EMPTYROOT") == "1" {
			t.Fatalf("%s: %v: busybox-static is not installed (scripts/install-deps)", exe, err)
		}
		t.Skip("busybox-static not installed (scripts/install-deps)")
	}
	ok := func() *EmptyRoot {
		return &EmptyRoot{Init: exe, Files: map[string]string{"/bin/x": exe},
			Steps: []Step{{Name: "a", Args: []string{"/bin/x"}, User: 1, Caps: []uintptr{12}}, {Name: "b", Args: []string{"/bin/x"}, Background: true, Listen: "198.18.0.1:1"}}}
	}
	if err := checkEmptyRoot(ok()); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(r *EmptyRoot)
		want string
	}{
		{"no init", func(r *EmptyRoot) { r.Init = "" }, "no Init"},
		{"dynamic init", func(r *EmptyRoot) { r.Init = "/bin/true" }, "dynamically linked"},
		{"dynamic file", func(r *EmptyRoot) { r.Files["/bin/y"] = "/bin/true" }, "dynamically linked"},
		{"no steps", func(r *EmptyRoot) { r.Steps = nil }, "no steps"},
		{"relative file", func(r *EmptyRoot) { r.Files["bin/y"] = exe }, "clean absolute path"},
		{"reserved file", func(r *EmptyRoot) { r.Files["/init"] = exe }, "runner's own"},
		{"modules", func(r *EmptyRoot) { r.Files["/lib/modules/x.ko"] = exe }, "runner's own"},
		{"lib", func(r *EmptyRoot) { r.Files["/lib"] = exe }, "runner's own"},
		{"file is a folder", func(r *EmptyRoot) { r.Files["/bin"] = exe }, "also a folder"},
		{"duplicate name", func(r *EmptyRoot) { r.Steps[1].Name = "a" }, "used twice"},
		{"relative command", func(r *EmptyRoot) { r.Steps[0].Args = []string{"x"} }, "absolute path"},
		{"listen in foreground", func(r *EmptyRoot) { r.Steps[0].Listen = "198.18.0.1:1" }, "Background"},
		{"bad listen", func(r *EmptyRoot) { r.Steps[1].Listen = "198.18.0.1" }, "Listen"},
		{"caps for root", func(r *EmptyRoot) { r.Steps[0].User = 0 }, "Caps"},
		{"no such cap", func(r *EmptyRoot) { r.Steps[0].Caps = []uintptr{64} }, "no capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.mod(r)
			err := checkEmptyRoot(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkEmptyRoot = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestParseRootStatus finds the init's report among console noise.
func TestParseRootStatus(t *testing.T) {
	console := []byte("boot\r\n\nRXEVM-STATUS-ab {\"Error\":\"old\"}\nnoise" + rootStatusLine("ab") + `{"Report":{"Steps":[{"Name":"x","ExitCode":3}]}}` + "\r\nreboot: Power down\r\n")
	st, ok := parseRootStatus(console, "ab")
	if !ok || st.Error != "" || len(st.Report.Steps) != 1 || st.Report.Steps[0].ExitCode != 3 {
		t.Errorf("parseRootStatus = %+v, %v", st, ok)
	}
	if _, ok := parseRootStatus([]byte("no report"), "ab"); ok {
		t.Error("parseRootStatus found a report in none")
	}
	if _, ok := parseRootStatus([]byte(rootStatusLine("ab")+"{cut"), "ab"); ok {
		t.Error("parseRootStatus accepted a cut line")
	}
}
