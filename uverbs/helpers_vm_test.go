package uverbs_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// roceV2GID finds the RoCE v2 GID of dev's port 1 that carries an IPv4
// address (::ffff:a.b.c.d), reading sysfs directly so these tests do not
// depend on the query code they may be testing.
func roceV2GID(t *testing.T, dev string) (int, uverbs.GID) {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	for i := 0; i < 64; i++ {
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", itoa(i)))
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue
		}
		s, err := os.ReadFile(filepath.Join(dir, "gids", itoa(i)))
		if err != nil {
			continue
		}
		ip := net.ParseIP(strings.TrimSpace(string(s)))
		if ip == nil || ip.To4() == nil {
			continue
		}
		var g uverbs.GID
		copy(g[:], ip.To16())
		return i, g
	}
	t.Fatalf("%s: no RoCE v2 IPv4 GID on port 1", dev)
	return 0, uverbs.GID{}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// newCQ creates a CQ that the test closes.
func newCQ(t *testing.T, c *uverbs.Context, cfg uverbs.CQConfig) *uverbs.CQ {
	t.Helper()
	cq, err := c.CreateCQ(cfg)
	if err != nil {
		t.Fatalf("CreateCQ(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { cq.Close() })
	return cq
}

func newPD(t *testing.T, c *uverbs.Context) *uverbs.PD {
	t.Helper()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	return pd
}

func newQP(t *testing.T, pd *uverbs.PD, cfg uverbs.QPConfig) *uverbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(cfg)
	if err != nil {
		t.Fatalf("CreateQP(%v): %v", cfg.Type, err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}
