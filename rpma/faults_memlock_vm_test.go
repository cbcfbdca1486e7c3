package rpma_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/testenv"
)

// memlockEnv set runs the test binary as the memlock helper (init,
// below, before the tests): it lowers RLIMIT_MEMLOCK to the value,
// becomes nobody (root's CAP_IPC_LOCK would lift the limit) and
// registers memlockSize bytes with Peer.RegMR, printing the error, its
// librpma code and whether it matches ENOMEM.
const (
	memlockEnv  = "RPMA_TEST_MEMLOCK"
	memlockSize = 1 << 20
)

func init() {
	if v := os.Getenv(memlockEnv); v != "" {
		if err := memlockHelper(v); err != nil {
			fmt.Fprintln(os.Stderr, "memlock helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func memlockHelper(limit string) error {
	lim, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		return err
	}
	if err := sys.BecomeNobody(lim); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc, err := rpma.DeviceContext(ctx, serverAddr, rpma.Local)
	if err != nil {
		return err
	}
	defer dc.Close()
	p, err := rpma.NewPeer(dc)
	if err != nil {
		return err
	}
	defer p.Close()
	mr, err := p.RegMR(make([]byte, memlockSize), rpma.UsageWriteDst|rpma.UsageReadSrc)
	if err == nil {
		mr.Close()
		return fmt.Errorf("registered %d bytes under a limit of %d", memlockSize, lim)
	}
	fmt.Printf("ENOMEM %v %v\n%v\n", errors.Is(err, syscall.ENOMEM), rpma.CodeOf(err), err)
	return nil
}

// TestRegMRMemlock: Peer.RegMR past RLIMIT_MEMLOCK, in a process
// without CAP_IPC_LOCK, fails as librpma's does (RPMA_E_NOMEM), matches
// ENOMEM, and says the limit, the bytes asked and how to raise the
// limit (uverbs' explanation, not a copy of it).
func TestRegMRMemlock(t *testing.T) {
	testenv.Devices(t, 2)
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const limit = 64 << 10
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memlockEnv+"="+strconv.Itoa(limit))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memlock helper: %v: %s", err, out)
	}
	t.Logf("%s: %s", os.Getenv("PURERDMA_VM"), out)
	first, msg, _ := strings.Cut(string(out), "\n")
	if want := fmt.Sprintf("ENOMEM true %v", rpma.CodeNoMemory); first != want {
		t.Errorf("the error matches %q, want %q: %s", first, want, out)
	}
	for _, want := range []string{"rpma: mr reg: out of memory: uverbs RegMR: REG_MR: cannot allocate memory",
		"RLIMIT_MEMLOCK", fmt.Sprintf("is %d bytes", limit), fmt.Sprintf("registering %d bytes", memlockSize), "ulimit -l"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", strings.TrimSpace(msg), want)
		}
	}
}
