package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/testenv"
)

// memlockEnv set runs the test binary as the memlock helper (init,
// below, before the tests): it lowers RLIMIT_MEMLOCK to the value,
// becomes nobody (root's CAP_IPC_LOCK would lift the limit) and
// registers memlockSize bytes with RegMsgs on an ID bound to the server
// address, printing the error and whether it matches ENOMEM.
const (
	memlockEnv  = "RDMACM_TEST_MEMLOCK"
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
	id, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return err
	}
	defer id.Close()
	if err := id.Bind(netip.AddrPortFrom(serverIP, 0)); err != nil {
		return err
	}
	mr, err := id.RegMsgs(make([]byte, memlockSize))
	if err == nil {
		mr.Close()
		return fmt.Errorf("registered %d bytes under a limit of %d", memlockSize, lim)
	}
	fmt.Printf("ENOMEM %v\n%v\n", errors.Is(err, syscall.ENOMEM), err)
	return nil
}

// TestRegMsgsMemlock: RegMsgs past RLIMIT_MEMLOCK, in a process without
// CAP_IPC_LOCK, fails with an error that names the call and the ID,
// matches ENOMEM and says the limit, the bytes asked and how to raise
// the limit (uverbs' explanation, not a copy of it).
func TestRegMsgsMemlock(t *testing.T) {
	needDevices(t)
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
	if first != "ENOMEM true" {
		t.Errorf("the error does not match ENOMEM: %s", out)
	}
	for _, want := range []string{"rdmacm RegMsgs (id ", "uverbs RegMR: REG_MR: cannot allocate memory",
		"RLIMIT_MEMLOCK", fmt.Sprintf("is %d bytes", limit), fmt.Sprintf("registering %d bytes", memlockSize), "ulimit -l"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", strings.TrimSpace(msg), want)
		}
	}
}
