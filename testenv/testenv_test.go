package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

// recorder is a testing.TB whose Skipf and Fatalf record instead of
// ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestRequireDevice(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want bool
	}{{"", false}, {"0", false}, {"true", false}, {"1", true}} {
		t.Setenv("PURERDMA_REQUIRE_DEVICE", tt.env)
		if got := RequireDevice(); got != tt.want {
			t.Errorf("PURERDMA_REQUIRE_DEVICE=%q: RequireDevice() = %v, want %v", tt.env, got, tt.want)
		}
	}
}

// TestTooFewDevices asks for more devices than any machine has: outside
// the VM that skips with the command to run, inside it fails.
func TestTooFewDevices(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		t.Setenv("PURERDMA_REQUIRE_DEVICE", "")
		r := &recorder{TB: t}
		if devs := Devices(r, 1000); devs != nil {
			t.Errorf("Devices = %v, want nil", devs)
		}
		if r.failed != "" {
			t.Errorf("failed: %s", r.failed)
		}
		want := "RDMA device"
		if !strings.Contains(r.skipped, want) || !strings.Contains(r.skipped, "go test -exec scripts/vmexec ./testenv") {
			t.Errorf("skip message %q does not mention %q and the VM command for ./testenv", r.skipped, want)
		}
	})
	t.Run("VM", func(t *testing.T) {
		t.Setenv("PURERDMA_REQUIRE_DEVICE", "1")
		r := &recorder{TB: t}
		Devices(r, 1000)
		if r.skipped != "" {
			t.Errorf("skipped: %s", r.skipped)
		}
		if !strings.Contains(r.failed, "promised") {
			t.Errorf("failure message %q does not say the VM promised devices", r.failed)
		}
	})
}

func TestPackagePattern(t *testing.T) {
	if got := packagePattern(); got != "./testenv" {
		t.Errorf("packagePattern() = %q, want ./testenv", got)
	}
}

// TestVMClocksource checks that the VM's kernel reads time from the TSC,
// as real machines do: on the emulated HPET every clock read is a system
// call plus an emulated device access, which would slow every Go program
// (the runtime reads the clock constantly) and skew the benchmarks that
// time each iteration against C tools that read the TSC directly.
func TestVMClocksource(t *testing.T) {
	if os.Getenv("PURERDMA_VM") == "" {
		t.Skip("a property of the test VM: go test -exec scripts/vmexec ./testenv")
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "tsc" {
		t.Errorf("clocksource %q, want tsc", got)
	}
}

// TestVMPmem: the VM's NVDIMM is device DAX at PURERDMA_PMEM, in a range
// the kernel lists as persistent memory (what rxe checks before it grants
// FLUSH_PERSISTENT access), and almost all of its 64 MiB is mappable.
func TestVMPmem(t *testing.T) {
	if os.Getenv("PURERDMA_VM") == "" {
		t.Skip("a property of the test VM: go test -exec scripts/vmexec ./testenv")
	}
	dev := os.Getenv("PURERDMA_PMEM")
	st, err := os.Stat(dev)
	if err != nil {
		t.Fatalf("PURERDMA_PMEM=%q: %v", dev, err)
	}
	if st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("%s is %v, want a character device (device DAX)", dev, st.Mode())
	}
	b, err := os.ReadFile("/sys/bus/dax/devices/" + filepath.Base(dev) + "/size")
	if err != nil {
		t.Fatal(err)
	}
	if size, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || size < 60<<20 {
		t.Errorf("%s size %q, want at least 60 MiB", dev, b)
	}
	iomem, err := os.ReadFile("/proc/iomem")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(iomem), "Persistent Memory") {
		t.Errorf("/proc/iomem lists no Persistent Memory")
	}
}
