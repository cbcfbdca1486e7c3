package link

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
)

// TestLinkAddDel adds and removes an rxe device on a dummy network device
// through the real kernel. It needs RDMA and root: it runs in the
// soft-RoCE VM and skips elsewhere.
func TestLinkAddDel(t *testing.T) {
	testenv.Device(t) // RDMA is in the kernel
	testenv.RequireRoot(t)

	const (
		netdev = "rxtst0"
		name   = "rxetest"
		sysfs  = "/sys/class/infiniband/" + name
	)
	testenv.AddNetdev(t, netdev)
	t.Cleanup(func() {
		// Leave no device behind if the test fails half-way.
		if _, err := os.Stat(sysfs); err == nil {
			runArgs("link", "del", name)
		}
	})

	if code, _, stderr := runArgs("link", "add", name, "type", "rxe", "netdev", netdev); code != 0 {
		t.Fatalf("link add = %d: %s", code, stderr)
	}
	waitFor(t, sysfs+" to appear", func() bool { return exists(t, sysfs) })
	waitFor(t, name+"/1 in link list", func() bool {
		code, stdout, _ := runArgs("link", "list")
		return code == 0 && strings.Contains(stdout, "link "+name+"/1 ")
	})
	if code, stdout, stderr := runArgs("link", "show", name); code != 0 || !strings.Contains(stdout, "netdev "+netdev) {
		t.Errorf("link show %s = %d, stdout %q, stderr %q; want its netdev %s", name, code, stdout, stderr, netdev)
	}

	// rxe allows one device per network device.
	code, _, stderr := runArgs("link", "add", name, "type", "rxe", "netdev", netdev)
	if code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("second link add = %d, stderr %q; want 1 and EEXIST", code, stderr)
	}

	if code, _, stderr := runArgs("link", "del", name); code != 0 {
		t.Fatalf("link del = %d: %s", code, stderr)
	}
	waitFor(t, sysfs+" to disappear", func() bool { return !exists(t, sysfs) })
	waitFor(t, name+" to leave link list", func() bool {
		code, stdout, _ := runArgs("link", "list")
		return code == 0 && !strings.Contains(stdout, "link "+name+"/")
	})

	code, _, stderr = runArgs("link", "del", name)
	if code != 1 || !strings.Contains(stderr, "no such RDMA device") {
		t.Errorf("link del of a missing device = %d, stderr %q; want 1 and no such RDMA device", code, stderr)
	}
}

func exists(t *testing.T, path string) bool {
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 5s waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
