package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/selftest/selftesttest"
	"github.com/purerdma/rdma/testenv"
)

// TestHWCheckScript runs scripts/hwcheck with this test binary as
// purerdma on the fabric's two devices (PURERDMA_FABRIC): a table for
// each naming its kernel driver and the provider, every row passing (or
// n/a on iWARP, as package selftest's TestSelftestPasses wants), exit 0;
// a device that fails (here one that does not exist) makes it exit 1
// and name the device.
func TestHWCheckScript(t *testing.T) {
	f := testenv.NeedFabric(t)
	run := func(devices string, args ...string) (int, string) {
		cmd := exec.Command("../../scripts/hwcheck", args...)
		cmd.Env = append(os.Environ(), mainEnv+"=1", "PURERDMA_BIN="+os.Args[0], "PURERDMA_HWCHECK_DEVICES="+devices)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("hwcheck: %v", err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	wantNA := 0
	if f.IWARP {
		wantNA = len(selftesttest.IWARPNA)
	}
	header := func(dev string) string { return fmt.Sprintf("=== %s (kernel driver %s)\n", dev, f.Name) }
	code, out := run(f.Devs[0]+" "+f.Devs[1], "-iters", "1000")
	for _, want := range []string{header(f.Devs[0]), header(f.Devs[1]), "provider    " + f.Name,
		fmt.Sprintf("%d passed, 0 failed, %d n/a\n", len(selftesttest.RowNames)-wantNA, wantNA), "hwcheck: every check passed on 2 device(s)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("hwcheck output lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("hwcheck exit %d, want 0:\n%s", code, out)
	}
	code, out = run(f.Devs[1]+" nosuch", "-iters", "100")
	if code != 1 || !strings.Contains(out, "hwcheck: FAILED on nosuch (exit 1)\n") || !strings.Contains(out, header(f.Devs[1])) {
		t.Errorf("hwcheck with a device that fails: exit %d, want 1 and the device named:\n%s", code, out)
	}
}
