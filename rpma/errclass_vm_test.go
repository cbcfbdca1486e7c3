package rpma_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rpma"
)

// TestErrorClassesAsLibrpma: the same misuse gets the class C librpma
// 1.2 returns for it (the code in the comment of each row is librpma's:
// src/peer.c, src/mr.c). A Go-only situation (a full queue, a second
// waiter) is ErrAgain and is tested where it happens (TestSendQueueFull).
func TestErrorClassesAsLibrpma(t *testing.T) {
	ctx := testContext(t)
	p := newPeer(t, ctx, rpma.Local)
	for _, tc := range []struct {
		name  string
		run   func() error
		class error
		code  rpma.Code
		errno error // the cause underneath, when there is one
	}{
		// ibv_dealloc_pd fails with EBUSY: rpma_peer_delete returns
		// RPMA_E_PROVIDER.
		{"peer delete with a registered MR", func() error {
			mr, err := p.RegMR(make([]byte, 4096), rpma.UsageWriteDst)
			if err != nil {
				return err
			}
			defer mr.Close()
			return p.Close()
		}, rpma.ErrProvider, rpma.CodeProvider, syscall.EBUSY},
		// rpma_mr_reg: size == 0 and usage == 0 are RPMA_E_INVAL.
		{"mr reg of 0 bytes", func() error {
			_, err := p.RegMR(nil, rpma.UsageWriteDst)
			return err
		}, rpma.ErrInvalid, rpma.CodeInvalid, nil},
		{"mr reg with usage 0", func() error {
			_, err := p.RegMR(make([]byte, 64), 0)
			return err
		}, rpma.ErrInvalid, rpma.CodeInvalid, nil},
		// rpma_peer_new(NULL, ...) is RPMA_E_INVAL.
		{"peer new without a device", func() error {
			_, err := rpma.NewPeer(nil)
			return err
		}, rpma.ErrInvalid, rpma.CodeInvalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if !errors.Is(err, tc.class) || rpma.CodeOf(err) != tc.code {
				t.Fatalf("got %v (code %d), want class %v (code %d)", err, rpma.CodeOf(err), tc.class, tc.code)
			}
			if tc.errno != nil && !errors.Is(err, tc.errno) {
				t.Errorf("%v does not carry %v", err, tc.errno)
			}
			if errors.Is(err, rpma.ErrAgain) {
				t.Errorf("%v is also classed ErrAgain", err)
			}
		})
	}
}
