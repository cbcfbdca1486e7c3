package rpma_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
)

// TestResolveErrors: when the package's own timeout (ConnCfg's for
// NewConnReq, DefaultTimeout for DeviceContext) ends a resolution, the
// error names the step, the address and that timeout, matches ETIMEDOUT
// and ErrProvider (librpma's class), and not context.DeadlineExceeded,
// which is kept for the caller's own deadline; an address without an
// RDMA device says so.
func TestResolveErrors(t *testing.T) {
	cp := newPeer(t, testContext(t), rpma.Remote)
	type match struct {
		target error
		want   bool
	}
	check := func(t *testing.T, err error, says []string, matches []match) {
		t.Helper()
		if err == nil {
			t.Fatal("the resolution succeeded")
		}
		t.Logf("%s: %v", t.Name(), err)
		for _, w := range says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
		for _, m := range append(matches, match{rpma.ErrProvider, true}) {
			if errors.Is(err, m.target) != m.want {
				t.Errorf("errors.Is(%q, %v) = %v", err, m.target, !m.want)
			}
		}
	}
	// noDeadline has no deadline, so the package's timeout is the one
	// that fires; the cancel only bounds the test.
	noDeadline := func(t *testing.T) context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(30*time.Second, cancel)
		t.Cleanup(func() { stop.Stop(); cancel() })
		return ctx
	}

	t.Run("NewConnReq, ConnCfg's timeout", func(t *testing.T) {
		req, err := cp.NewConnReq(noDeadline(t), "198.18.0.99", "7204", nil)
		if req != nil {
			req.Close()
		}
		check(t, err, []string{"rpma: conn_req new: provider error occurred: address resolution of 198.18.0.99:7204 timed out: ConnCfg's timeout of 1s fired (ConnCfg.SetTimeout changes it; ctx has no deadline)"},
			[]match{{syscall.ETIMEDOUT, true}, {context.DeadlineExceeded, false}})
	})

	t.Run("NewConnReq, ctx's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		cfg := rpma.NewConnCfg()
		if err := cfg.SetTimeout(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		req, err := cp.NewConnReq(ctx, "198.18.0.99", "7204", cfg)
		if req != nil {
			req.Close()
		}
		check(t, err, []string{"address resolution of 198.18.0.99:7204", "ctx's deadline"},
			[]match{{context.DeadlineExceeded, true}})
	})

	t.Run("NewConnReq, 127.0.0.1", func(t *testing.T) {
		req, err := cp.NewConnReq(testContext(t), "127.0.0.1", "7204", nil)
		if req != nil {
			req.Close()
		}
		check(t, err, []string{"route resolution of 127.0.0.1:7204: no RDMA device on the netdev of 127.0.0.1 (lo)"},
			[]match{{syscall.ENODEV, true}, {context.DeadlineExceeded, false}})
	})

	t.Run("DeviceContext, DefaultTimeout", func(t *testing.T) {
		dc, err := rpma.DeviceContext(noDeadline(t), "198.18.0.99", rpma.Remote)
		if dc != nil {
			dc.Close()
		}
		check(t, err, []string{"rpma: utils get ibv context: provider error occurred: address resolution of 198.18.0.99 timed out: rpma.DefaultTimeout of 1s fired (DeviceContext waits at most that long; ctx has no deadline)"},
			[]match{{syscall.ETIMEDOUT, true}, {context.DeadlineExceeded, false}})
	})
}
