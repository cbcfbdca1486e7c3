package rpma_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

type regCall struct{ access uverbs.Access }

// TestODPRetry: a registration refused as not supported is retried with
// on-demand paging when the device has it, and fails with a clear
// provider error when it does not; other failures are not retried.
func TestODPRetry(t *testing.T) {
	notSupp := &sys.Error{Op: "uverbs RegMR: REG_MR", Err: syscall.EOPNOTSUPP}
	for _, tc := range []struct {
		name    string
		odp     bool
		first   error
		calls   int
		wantErr error
	}{
		{"ok", true, nil, 1, nil},
		{"odp retry", true, notSupp, 2, nil},
		{"no odp", false, notSupp, 1, rpma.ErrProvider},
		{"other error", true, syscall.EFAULT, 1, rpma.ErrProvider},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rpma.NewTestPeer(false)
			var calls []regCall
			p.SetRegMR(func(b []byte, a uverbs.Access) (*uverbs.MR, error) {
				calls = append(calls, regCall{a})
				if len(calls) == 1 && tc.first != nil {
					return nil, tc.first
				}
				return &uverbs.MR{}, nil
			}, tc.odp)
			_, err := p.RegMR(make([]byte, 64), rpma.UsageReadDst)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("RegMR = %v, want %v", err, tc.wantErr)
			}
			if len(calls) != tc.calls {
				t.Fatalf("%d registrations, want %d", len(calls), tc.calls)
			}
			if tc.calls == 2 && calls[1].access != calls[0].access|uverbs.AccessOnDemand {
				t.Errorf("retry access %v, first %v", calls[1].access, calls[0].access)
			}
			if tc.name == "no odp" && !errors.Is(err, syscall.EOPNOTSUPP) {
				t.Errorf("the cause is lost: %v", err)
			}
		})
	}
}

// TestUsageAccess: usages become librpma's access rights, plus the
// FLUSH rights on a device with native flush.
func TestUsageAccess(t *testing.T) {
	for _, tc := range []struct {
		u      rpma.Usage
		native bool
		want   uverbs.Access
	}{
		{rpma.UsageReadSrc, false, uverbs.AccessRemoteRead},
		{rpma.UsageReadDst, false, uverbs.AccessLocalWrite},
		{rpma.UsageWriteSrc, false, uverbs.AccessLocalWrite},
		{rpma.UsageWriteDst, false, uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite},
		{rpma.UsageSend, false, 0},
		{rpma.UsageRecv, false, uverbs.AccessLocalWrite},
		{rpma.UsageFlushVisibility, false, uverbs.AccessRemoteRead},
		{rpma.UsageFlushPersistent, false, uverbs.AccessRemoteRead},
		{rpma.UsageFlushVisibility, true, uverbs.AccessRemoteRead | uverbs.AccessFlushGlobal},
		{rpma.UsageFlushPersistent | rpma.UsageWriteDst, true, uverbs.AccessRemoteRead | uverbs.AccessFlushPersistent | uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite},
	} {
		p := rpma.NewTestPeer(tc.native)
		var got uverbs.Access
		p.SetRegMR(func(b []byte, a uverbs.Access) (*uverbs.MR, error) { got = a; return &uverbs.MR{}, nil }, false)
		if _, err := p.RegMR(make([]byte, 8), tc.u); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%v (native flush %v): access %v, want %v", tc.u, tc.native, got, tc.want)
		}
	}
}

// TestUsageAccessIWARP: librpma's one difference on iWARP (a read's sink
// takes remote write: the read response is a tagged write into it).
func TestUsageAccessIWARP(t *testing.T) {
	for _, tc := range []struct {
		usage rpma.Usage
		iwarp bool
		want  uverbs.Access
	}{
		{rpma.UsageReadSrc, false, uverbs.AccessRemoteRead},
		{rpma.UsageReadSrc, true, uverbs.AccessRemoteRead},
		{rpma.UsageReadDst, false, uverbs.AccessLocalWrite},
		{rpma.UsageReadDst, true, uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite},
		{rpma.UsageWriteSrc, true, uverbs.AccessLocalWrite},
		{rpma.UsageWriteDst, true, uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite},
		{rpma.UsageRecv, true, uverbs.AccessLocalWrite},
	} {
		p := rpma.NewTestPeer(false)
		p.SetIWARP(tc.iwarp)
		if got := p.Access(tc.usage); got != tc.want {
			t.Errorf("usage %v on iWARP %v: access %v, want %v", tc.usage, tc.iwarp, got, tc.want)
		}
	}
}
