package selftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
)

// TestSelftestMemlockSummary: rows whose registration the kernel
// refused for the locked-memory limit keep the library's explanation,
// and the summary counts them and says so; a refusal the limit does not
// explain is not counted.
func TestSelftestMemlockSummary(t *testing.T) {
	refused := func(limit uint64) error {
		return fmt.Errorf("register: %w", &sys.MemlockError{Err: &sys.Error{Op: "uverbs RegMR: REG_MR", Err: syscall.ENOMEM},
			Bytes: 1 << 20, Limit: limit, Max: limit, Pinned: 0})
	}
	checks := []Check{
		{"rc write", func(*Case) (string, error) { return "", refused(64 << 10) }},
		{"rc read", func(*Case) (string, error) { return "", refused(64 << 10) }},
		{"ud send", func(*Case) (string, error) { return "", refused(1 << 30) }}, // within the limit
		{"srq", func(*Case) (string, error) { return "ok", nil }},
	}
	env := &Env{report: Report{Device: "fake0", Rows: []Row{}}}
	rep := env.Run(context.Background(), checks)
	if want := refused(64 << 10).Error(); rep.Rows[0].Detail != want || !strings.Contains(want, "RLIMIT_MEMLOCK") {
		t.Errorf("row detail %q, want %q", rep.Rows[0].Detail, want)
	}
	err := output(context.Background(), rep, false, io.Discard)
	want := "selftest: fake0: 3 of 4 checks failed (2 of them for the locked-memory limit, RLIMIT_MEMLOCK: their details say the limit and how to raise it)"
	if err == nil || err.Error() != want {
		t.Errorf("summary %v, want %q", err, want)
	}

	rep = env.Run(context.Background(), []Check{{"rc write", func(*Case) (string, error) { return "", errors.New("wrong data") }}})
	if err := output(context.Background(), rep, false, io.Discard); err == nil || strings.Contains(err.Error(), "RLIMIT") {
		t.Errorf("summary without refusals: %v", err)
	}
}
