package oracle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The shim's calls and the device's requests (testdata/shim.c).
const (
	callOpen = iota
	callIoctl
	callWrite
	callMmap
	callMunmap
	callSnap
	callStep
	callClose
)

const (
	reqRead = iota
	reqWrite
	reqNewFD
	reqDone
)

// cTools are the compiled shim and scenario driver.
type cTools struct{ shim, drv string }

// buildC compiles testdata/shim.c and testdata/driver.c against Debian's
// libibverbs into a directory the test removes. A missing compiler,
// header or libmlx5 fails the test when PURERDMA_TEST_ABI=1 (make unit,
// CI) and skips it otherwise.
func buildC(t *testing.T) cTools {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		needTool(t, errors.New("no gcc (Debian package gcc)"))
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		needTool(t, errors.New("no /usr/include/infiniband/verbs.h (Debian package libibverbs-dev)"))
	}
	if _, err := libmlx5(); err != nil {
		needTool(t, err)
	}
	dir := t.TempDir()
	c := cTools{shim: filepath.Join(dir, "shim.so"), drv: filepath.Join(dir, "driver")}
	for _, args := range [][]string{
		{"-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", c.shim, "testdata/shim.c", "-ldl"},
		// -fno-ipa-icf: the measured wrappers stay functions of their own
		// (scripts/bench-mlx5), not folded into one.
		{"-O2", "-fno-ipa-icf", "-Wall", "-Werror", "-o", c.drv, "testdata/driver.c", "-libverbs", "-ldl"},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return c
}

// libmlx5 finds Debian's libmlx5 provider (ibverbs-providers).
func libmlx5() (string, error) {
	m, _ := filepath.Glob("/usr/lib/*/libibverbs/libmlx5-rdmav*.so")
	if len(m) == 0 {
		return "", errors.New("no libmlx5 provider in /usr/lib/*/libibverbs (Debian package ibverbs-providers)")
	}
	return m[0], nil
}

// sysfsTree writes the sysfs an mlx5 device shows libibverbs: the uverbs
// class entry (ABI 6, mlx5's driver ABI 1) and the IB device on a PCI
// function with a ConnectX-5's ids, which libmlx5's match table has.
func sysfsTree(t *testing.T, eth bool) string {
	root := t.TempDir()
	files := map[string]string{
		"class/infiniband_verbs/abi_version":         "6",
		"class/infiniband_verbs/uverbs0/ibdev":       "mlx5_0",
		"class/infiniband_verbs/uverbs0/abi_version": "1",
		"class/infiniband_verbs/uverbs0/dev":         "231:192",
		"class/infiniband/mlx5_0/node_type":          "1: CA",
		"class/infiniband/mlx5_0/node_guid":          "0200:0000:0000:0001",
		"class/infiniband/mlx5_0/sys_image_guid":     "0200:0000:0000:0001",
		"class/infiniband/mlx5_0/fw_ver":             "16.35.1012",
		"class/infiniband/mlx5_0/hca_type":           "MT4119",
		"class/infiniband/mlx5_0/device/modalias":    "pci:v000015B3d00001017sv000015B3sd00000008bc02sc00i00",
		"class/infiniband/mlx5_0/device/vendor":      "0x15b3",
		"class/infiniband/mlx5_0/device/device":      "0x1017",
		"class/infiniband/mlx5_0/ports/1/state":      "4: ACTIVE",
		"class/infiniband/mlx5_0/ports/1/phys_state": "5: LinkUp",
		"class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand",
		"class/infiniband/mlx5_0/ports/1/lid":        "0x3",
	}
	if eth {
		files["class/infiniband/mlx5_0/ports/1/link_layer"] = "Ethernet"
		files["class/infiniband/mlx5_0/ports/1/lid"] = "0x0"
		for i, typ := range []string{"IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"} {
			e, _ := (&device{eth: true}).gid(i)
			var g [16]byte
			le.PutUint64(g[:8], e.GID[0])
			le.PutUint64(g[8:], e.GID[1])
			files[fmt.Sprintf("class/infiniband/mlx5_0/ports/1/gid_attrs/types/%d", i)] = typ
			files[fmt.Sprintf("class/infiniband/mlx5_0/ports/1/gids/%d", i)] = fmt.Sprintf("%x:%x:%x:%x:%x:%x:%x:%x",
				g[0:2], g[2:4], g[4:6], g[6:8], g[8:10], g[10:12], g[12:14], g[14:16])
		}
	}
	for name, v := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sockMem is the C process's memory, through the shim's socket.
type sockMem struct {
	c   io.ReadWriter
	err error
}

func (m *sockMem) send(words ...uint64) {
	b := make([]byte, 8*len(words))
	for i, w := range words {
		le.PutUint64(b[8*i:], w)
	}
	m.put(b)
}

func (m *sockMem) put(b []byte) {
	if m.err == nil {
		_, m.err = m.c.Write(b)
	}
}

func (m *sockMem) get(n int) []byte {
	b := make([]byte, n)
	if m.err == nil {
		_, m.err = io.ReadFull(m.c, b)
	}
	return b
}

func (m *sockMem) read(addr uint64, n int) []byte {
	m.send(reqRead, addr, uint64(n))
	return m.get(n)
}

func (m *sockMem) write(addr uint64, b []byte) {
	m.send(reqWrite, addr, uint64(len(b)))
	m.put(b)
}

func (m *sockMem) newFD() (int, error) {
	m.send(reqNewFD, 0, 0)
	return int(le.Uint64(m.get(8))), m.err
}

// runC runs a scenario through libmlx5 on the scripted device: the
// driver's output and the device's record.
func runC(t *testing.T, c cTools, scenario string, env ...string) (out string, rec []string) {
	t.Helper()
	shim, drv := c.shim, c.drv
	dir := t.TempDir()
	script := filepath.Join(dir, "scenario")
	if err := os.WriteFile(script, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "device"), os.NewFile(uintptr(fds[1]), "shim")
	defer ours.Close()
	cmd := exec.Command(drv, script)
	if out := os.Getenv("PURERDMA_ORACLE_CALLGRIND_C"); out != "" {
		// scripts/bench-mlx5: the driver under callgrind
		cmd = exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+out, drv, script)
	}
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = append(os.Environ(), "ORACLE_FD=3", "SYSFS_PATH="+sysfsTree(t, isRoCE(scenario)), "LD_PRELOAD="+shim,
		"MLX5_SCATTER_TO_CQE=0", "MLX5_POST_SEND_PREFER_BF=0")
	if os.Getenv("PURERDMA_ORACLE_BENCH_TD") == "1" {
		// scripts/bench-mlx5's lock-free rows: libmlx5 without locks
		cmd.Env = append(cmd.Env, "MLX5_SINGLE_THREADED=1")
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		theirs.Close()
		t.Fatal(err)
	}
	theirs.Close()
	m := &sockMem{c: ours}
	d := newDevice(m)
	d.eth = isRoCE(scenario)
	serve(d, m)
	err = cmd.Wait()
	if err != nil || m.err != nil && !errors.Is(m.err, io.EOF) {
		t.Fatalf("libmlx5 driver: %v (device: %v)\nstderr:\n%s\nstdout:\n%s\nrecord:\n%s", err, m.err, stderr.String(), stdout.String(), joinLines(d.rec))
	}
	return stdout.String(), d.rec
}

// serve answers the shim's calls until it hangs up.
func serve(d *device, m *sockMem) {
	for {
		b := m.get(40)
		if m.err != nil {
			return
		}
		op, a, bb, c, dd := le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[32:])
		var ret int64
		errno := func(e syscall.Errno) {
			if e != 0 {
				ret = -int64(e)
			}
		}
		switch op {
		case callOpen, callClose:
		case callIoctl:
			errno(d.ioctl(c))
		case callWrite:
			errno(d.writeCmd(m.read(bb, int(c))))
			if ret == 0 {
				ret = int64(c)
			}
		case callMmap:
			errno(d.mmap(bb, int(c), dd))
		case callMunmap:
			d.munmap(a)
		case callSnap:
			d.snap(string(m.read(a, int(bb))))
		case callStep:
			if err := d.step(string(m.read(a, int(bb)))); err != nil {
				d.record("step: %v", err)
				ret = -int64(syscall.EINVAL)
			}
		default:
			d.record("shim call %d unknown", op)
			ret = -int64(syscall.ENOSYS)
		}
		m.send(reqDone, uint64(ret), 0)
	}
}

func joinLines(l []string) string {
	var b bytes.Buffer
	for _, s := range l {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

func needTool(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("PURERDMA_TEST_ABI") == "1" || os.Getenv("PURERDMA_REQUIRE_DEVICE") == "1" {
		t.Fatalf("%v (scripts/install-deps installs it)", err)
	}
	t.Skipf("%v (PURERDMA_TEST_ABI=1 makes this a failure; scripts/install-deps installs it)", err)
}

// isRoCE reports whether a scenario runs on a RoCE port: its first line
// is "roce".
func isRoCE(scenario string) bool { return strings.HasPrefix(scenario, "roce\n") }
