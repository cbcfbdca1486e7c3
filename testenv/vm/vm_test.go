package vm

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCPIOUnpacks checks the archive with an independent reader, busybox's
// cpio, which the VM needs anyway.
func TestCPIOUnpacks(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err != nil {
		// make unit sets PURERDMA_TEST_RXEVM=1 after scripts/install-deps,
		// which installs it: missing there is a failure.
		if os.Getenv("PURERDMA_TEST_RXEVM") == "1" || os.Getenv("PURERDMA_TEST_EMPTYROOT") == "1" {
			t.Fatalf("%s: %v: busybox-static is not installed (scripts/install-deps)", busyboxPath, err)
		}
		t.Skip("busybox-static not installed (scripts/install-deps)")
	}
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.Dir("d")
	c.File("d/f", 0o644, []byte("hello"))
	c.File("odd", 0o755, []byte("abc")) // length not a multiple of 4
	c.Symlink("d/l", "f")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", buf.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command(busyboxPath, "cpio", "-i", "-d")
	cmd.Dir = dir
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i -d: %v: %s", err, out)
	}
	for name, want := range map[string]string{"d/f": "hello", "odd": "abc", "d/l": "hello"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "odd")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("odd mode = %v, %v; want 0755", fi.Mode(), err)
	}
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"linux-image-6.1.0-9-amd64-unsigned", "linux-image-6.1.0-56-amd64-unsigned", true},
		{"linux-image-6.1.0-56-amd64-unsigned", "linux-image-6.1.0-9-amd64-unsigned", false},
		{"linux-image-6.12.107+deb12-amd64-unsigned", "linux-image-6.12.117+deb12-amd64-unsigned", true},
		{"linux-image-6.12.117+deb12-amd64-unsigned", "linux-image-6.12.117+deb12-amd64-unsigned", false},
	} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestPackagePattern(t *testing.T) {
	re61, _ := packagePattern("6.1")
	re612, _ := packagePattern("6.12")
	for _, tc := range []struct {
		name      string
		v61, v612 bool
	}{
		{"linux-image-6.1.0-56-amd64-unsigned", true, false},
		{"linux-image-6.1.0-56-cloud-amd64-unsigned", false, false},
		{"linux-image-6.1.0-56-rt-amd64-unsigned", false, false},
		{"linux-image-6.12.117+deb12-amd64-unsigned", false, true},
		{"linux-image-6.12.117+deb12-amd64-unsigned-dbg", false, false},
	} {
		if got := re61.MatchString(tc.name); got != tc.v61 {
			t.Errorf("6.1 matches %s = %v", tc.name, got)
		}
		if got := re612.MatchString(tc.name); got != tc.v612 {
			t.Errorf("6.12 matches %s = %v", tc.name, got)
		}
	}
	if _, err := packagePattern("six"); err == nil {
		t.Error("packagePattern(six) succeeded")
	}
}

// TestConsoleFilter feeds the console one byte at a time, so markers are
// split across writes, and checks only the command's bytes pass.
func TestConsoleFilter(t *testing.T) {
	start, end := "\nRXEVM-START-ab\n", "\nRXEVM-END-ab\n"
	stream := "boot noise\r\n" + start + "line 1\nRXEVM-START-a partial\n\nno newline" + end + "reboot: Power down\r\n"
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		var out bytes.Buffer
		started := 0
		c := &consoleFilter{start: []byte(start), end: []byte(end), out: &out, started: func() { started++ }}
		for s := stream; s != ""; {
			n := min(chunk, len(s))
			c.Write([]byte(s[:n]))
			s = s[n:]
		}
		if diff := cmp.Diff("line 1\nRXEVM-START-a partial\n\nno newline", out.String()); diff != "" {
			t.Errorf("chunk %d: output (-want +got):\n%s", chunk, diff)
		}
		if started != 1 {
			t.Errorf("chunk %d: started called %d times", chunk, started)
		}
		if !strings.Contains(string(c.boot), "boot noise") {
			t.Errorf("chunk %d: boot output not kept: %q", chunk, c.boot)
		}
	}
}

func TestGuestEnv(t *testing.T) {
	got := guestEnv([]string{"A=1", "PURERDMA_REQUIRE_DEVICE=0", "PURERDMA_VM=x", "PURERDMA_PMEM=/dev/other"}, Kernel{Release: "6.1.0-1-amd64", Package: "p"})
	want := []string{"A=1", "PURERDMA_REQUIRE_DEVICE=1", "PURERDMA_VM=6.1.0-1-amd64", "PURERDMA_VM_PACKAGE=p", "PURERDMA_PMEM=/dev/dax0.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("guestEnv (-want +got):\n%s", diff)
	}
}

// TestResolveModules runs the resolver on the cached kernels, when a
// previous VM run left them there.
func TestResolveModules(t *testing.T) {
	cache, err := CacheDir()
	if err != nil {
		t.Skip(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "kernels", "linux-image-*"))
	if len(dirs) == 0 {
		t.Skip("no kernel in the cache yet (make vmtest fetches them)")
	}
	for _, d := range dirs {
		rel, err := kernelRelease(d)
		if err != nil {
			t.Fatal(err)
		}
		k := Kernel{Dir: d, Release: rel}
		// siw.ko is built on a VM's first boot (SiwModule); before that
		// the order is checked without it.
		siw := filepath.Join(filepath.Dir(d), "siw-"+filepath.Base(d), "siw.ko")
		roots := bootModules
		if _, err := os.Stat(siw); err != nil {
			roots = slices.DeleteFunc(slices.Clone(roots), func(m string) bool { return m == "siw" })
		}
		mods, err := resolveModules(k.ModulesDir(), map[string]string{"siw": siw}, roots)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		pos := map[string]int{}
		for i, m := range mods {
			pos[m.name] = i
			deps, err := moduleDepends(m.data)
			if err != nil {
				t.Fatalf("%s: %s: %v", rel, m.name, err)
			}
			for _, dep := range deps {
				if p, ok := pos[normalizeModule(dep)]; ok && p > i {
					t.Errorf("%s: %s loads before its dependency %s", rel, m.name, dep)
				}
			}
		}
		for _, must := range []string{"rdma_rxe", "ib_uverbs", "rdma_ucm", "ib_core", "veth"} {
			if _, ok := pos[must]; !ok {
				t.Errorf("%s: %s missing from %v", rel, must, names(mods))
			}
		}
		if p, ok := pos["crc32_generic"]; ok && p > pos["rdma_rxe"] {
			t.Errorf("%s: crc32_generic must load before rdma_rxe", rel)
		}
	}
}

func names(ms []module) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.name)
	}
	return s
}

// TestWatchdog: a VM whose console never shows the start marker is killed
// at the boot limit, one that does not power off after the end marker at
// the power-off limit, and one that exits in time is left alone.
func TestWatchdog(t *testing.T) {
	const short, long = 20 * time.Millisecond, time.Hour
	run := func(start, end bool, boot, off time.Duration, exitAfter time.Duration) (bit int, killed bool) {
		c := &consoleFilter{start: []byte("\nS\n"), end: []byte("\nE\n"), out: io.Discard,
			startedCh: make(chan struct{}), endedCh: make(chan struct{})}
		kill := make(chan struct{})
		var once sync.Once
		w := watch(c, func() { once.Do(func() { close(kill) }) }, boot, off)
		if start {
			c.Write([]byte("boot\nS\n"))
		}
		if end {
			c.Write([]byte("out\nE\n"))
		}
		select { // QEMU: exits when killed, or by itself after exitAfter
		case <-kill:
			killed = true
		case <-time.After(exitAfter):
		}
		return w.stop(), killed
	}
	for _, c := range []struct {
		name       string
		start, end bool
		boot, off  time.Duration
		exitAfter  time.Duration
		bit        int
	}{
		{"boot hangs", false, false, short, long, time.Minute, dogBoot},
		{"power-off hangs", true, true, long, short, time.Minute, dogPowerOff},
		{"command runs long", true, false, short, short, 100 * time.Millisecond, dogNone},
		{"clean exit", true, true, long, long, 10 * time.Millisecond, dogNone},
	} {
		bit, killed := run(c.start, c.end, c.boot, c.off, c.exitAfter)
		if bit != c.bit || killed != (c.bit != dogNone) {
			t.Errorf("%s: verdict %d, killed %v; want %d, killed %v", c.name, bit, killed, c.bit, c.bit != dogNone)
		}
	}
}
