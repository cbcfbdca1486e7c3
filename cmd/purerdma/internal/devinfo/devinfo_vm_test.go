package devinfo

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/testenv"
)

// devinfoLine is one line of ibv_devinfo output: its indentation in
// tabs, the field name before the first colon ("" for lines without
// one, such as flag names) and the value after it, tabs trimmed.
type devinfoLine struct {
	Indent int
	Key    string
	Value  string
}

func parseDevinfo(out string) []devinfoLine {
	var lines []devinfoLine
	for _, l := range strings.Split(out, "\n") {
		rest := strings.TrimLeft(l, "\t")
		line := devinfoLine{Indent: len(l) - len(rest)}
		if k, v, ok := strings.Cut(rest, ":"); ok {
			line.Key, line.Value = k, strings.Trim(v, "\t ")
		} else {
			line.Value = rest
		}
		lines = append(lines, line)
	}
	return lines
}

// TestDevinfoMatchesIbvDevinfo runs rdma-core's ibv_devinfo and
// purerdma devinfo with the same options on the VM's devices (those of
// the fabric under test by name); the outputs must be the same, field
// by field and byte by byte.
func TestDevinfoMatchesIbvDevinfo(t *testing.T) {
	testenv.Devices(t, 2)
	ibv, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		if testenv.RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1 but ibv_devinfo is missing (scripts/install-deps installs ibverbs-utils): %v", err)
		}
		t.Skipf("ibv_devinfo not installed: %v", err)
	}
	// The fabric's devices by name (rxe0 and rxe1, or siw0 and siw1);
	// the listings without -d show every device the VM has.
	dev0, dev1 := testenv.CurrentFabric().Devs[0], testenv.CurrentFabric().Devs[1]
	for _, args := range [][]string{
		{"-v", "-d", dev0},
		{"-v", "-d", dev1},
		{"-d", dev0},
		{"-d", dev1},
		{},
		{"-v"},
		{"-d", dev1, "-i", "1"},
		{"-l"},
	} {
		t.Run(strings.Join(append([]string{"devinfo"}, args...), " "), func(t *testing.T) {
			cmd := exec.Command(ibv, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("ibv_devinfo %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
			}
			code, got, gotErr := runArgs(append([]string{"devinfo"}, args...)...)
			if code != 0 || gotErr != "" {
				t.Errorf("purerdma devinfo: exit %d, stderr %q", code, gotErr)
			}
			if diff := cmp.Diff(parseDevinfo(string(want)), parseDevinfo(got)); diff != "" {
				t.Errorf("purerdma devinfo against ibv_devinfo (-want +got):\n%s", diff)
			} else if got != string(want) {
				t.Errorf("same fields but different bytes (-want +got):\n%s", cmp.Diff(string(want), got))
			}
			if testing.Verbose() && len(args) > 0 && args[0] == "-v" && len(args) == 3 {
				t.Logf("ibv_devinfo %s:\n%s", strings.Join(args, " "), want)
			}
		})
	}
}
