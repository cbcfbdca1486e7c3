package uverbs_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// fabricDevice is the current fabric's i-th device (0 the server's, 1
// the client's: rxe0 and rxe1, or siw0 and siw1), failing the test in
// the VM when it is missing or not ACTIVE.
func fabricDevice(t *testing.T, i int) uverbs.Device {
	t.Helper()
	f := testenv.NeedFabric(t)
	d, err := uverbs.DeviceByName(f.Devs[i])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fabricDevices are the current fabric's two devices.
func fabricDevices(t *testing.T) []uverbs.Device {
	t.Helper()
	return []uverbs.Device{fabricDevice(t, 0), fabricDevice(t, 1)}
}

// notIWARPConnect skips, on iWARP, a test whose QPs are connected by
// QP modify (RTR and RTS by hand). The pair constructors (newPair,
// newPairWith, connectPair) connect through the rdma_cm on iWARP
// instead; what still calls this walks the InfiniBand transitions
// itself or talks to a C peer connected the same way.
func notIWARPConnect(t *testing.T) {
	t.Helper()
	testenv.NotIWARP(t, "the test moves its QPs to RTR and RTS by QP modify itself; iWARP QPs reach RTS only through the iWARP CM (the tests that only need a connected pair get one from the rdma_cm on iWARP)")
}

// notIWARPType skips, on iWARP, a test built on a UD or UC QP.
func notIWARPType(t *testing.T, typ uverbs.QPType) {
	t.Helper()
	if typ != uverbs.QPTypeRC {
		testenv.NotIWARP(t, "iWARP has RC QPs only, not "+typ.String())
	}
}

// roceV2GID finds the RoCE v2 GID of dev's port 1 that carries an IPv4
// address (::ffff:a.b.c.d), reading sysfs directly so these tests do not
// depend on the query code they may be testing. On iWARP it skips the
// test: an iWARP port has no RoCE GID to address a QP or an AH with.
func roceV2GID(t *testing.T, dev string) (int, uverbs.GID) {
	t.Helper()
	testenv.NotIWARP(t, "the test addresses a RoCE v2 GID (an AH, or QPs connected by QP modify); an iWARP port has no such GID, no AHs, and its QPs reach RTS only through the iWARP CM")
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
