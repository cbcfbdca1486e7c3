package uverbs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// TestBusyRule: busy is one rule: an error matching ErrBusy matches
// EBUSY, and the project's errors carrying EBUSY match ErrBusy.
func TestBusyRule(t *testing.T) {
	queueFull := &sys.Error{Op: "uverbs PostSend", Err: fmt.Errorf("send queue full: %w", uverbs.ErrBusy)}
	inUse := sys.InUse("uverbs PD.Close", 2)
	kernel := &sys.Error{Op: "uverbs CQ.Close: CQ_DESTROY", Err: syscall.EBUSY}
	for name, err := range map[string]error{"queue full": queueFull, "in use": inUse, "kernel EBUSY": kernel} {
		if !errors.Is(err, uverbs.ErrBusy) || !errors.Is(err, syscall.EBUSY) {
			t.Errorf("%s (%v): ErrBusy %v, EBUSY %v; want both", name, err, errors.Is(err, uverbs.ErrBusy), errors.Is(err, syscall.EBUSY))
		}
	}
	if errors.Is(&sys.Error{Op: "x", Err: syscall.EINVAL}, uverbs.ErrBusy) {
		t.Error("EINVAL matches ErrBusy")
	}
}

func TestWCStatusFormats(t *testing.T) {
	if s := fmt.Sprintf("%v", uverbs.WCSuccess); s != "success" {
		t.Errorf("%%v of WCSuccess = %q, want success", s)
	}
	if s := fmt.Sprint(uverbs.WCRemAccessErr); s != "remote access error" {
		t.Errorf("%%v of WCRemAccessErr = %q", s)
	}
	err := uverbs.WCRemAccessErr.Err()
	if err == nil || err.Error() != "work completion: remote access error" || !errors.Is(err, uverbs.WCRemAccessErr) {
		t.Errorf("Err() = %v", err)
	}
	if uverbs.WCSuccess.Err() != nil {
		t.Error("WCSuccess.Err() is not nil")
	}
}

func TestPathMigStateString(t *testing.T) {
	for m, s := range map[uverbs.PathMigState]string{uverbs.MigMigrated: "MIGRATED", uverbs.MigRearm: "REARM", uverbs.MigArmed: "ARMED", 9: "PathMigState(9)"} {
		if m.String() != s {
			t.Errorf("%d: %q, want %q", m, m.String(), s)
		}
	}
}

func TestGIDAddr(t *testing.T) {
	v4 := uverbs.GID(netip.MustParseAddr("::ffff:198.18.0.1").As16())
	if a := v4.Addr(); a != netip.MustParseAddr("198.18.0.1") {
		t.Errorf("IPv4-mapped GID: %v", a)
	}
	v6 := uverbs.GID(netip.MustParseAddr("fe80::1").As16())
	if a := v6.Addr(); a != netip.MustParseAddr("fe80::1") {
		t.Errorf("IPv6 GID: %v", a)
	}
	if v4.Addr().String() != v4.IP().String() || v6.Addr().String() != v6.IP().String() {
		t.Errorf("Addr and IP disagree: %v %v, %v %v", v4.Addr(), v4.IP(), v6.Addr(), v6.IP())
	}
}
