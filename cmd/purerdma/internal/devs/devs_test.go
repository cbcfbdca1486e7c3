package devs_test

import (
	"net/netip"
	"os"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs/devstest"
)

func TestFind(t *testing.T) {
	devstest.UseDevices(t, devstest.Rxe, devstest.RxeAddrs)
	if d, err := devs.Find("rxe1"); err != nil || d.Name != "rxe1" {
		t.Errorf(`Find("rxe1") = %q, %v`, d.Name, err)
	}
	if d, err := devs.Find(""); err != nil || d.Name != "rxe0" {
		t.Errorf(`Find("") = %q, %v; want the first device`, d.Name, err)
	}
	_, err := devs.Find("rxe9")
	want := `no RDMA device named "rxe9"; the RDMA devices here: ` + devstest.RxeList
	if err == nil || err.Error() != want {
		t.Errorf("Find(rxe9) = %v, want %q", err, want)
	}

	for _, exists := range []bool{false, true} {
		devstest.UseDevices(t, nil, nil)
		dir := devstest.UseDir(t, exists)
		want := "no RDMA device: " + dir + " does not exist (no RDMA driver is loaded); " + devs.LinkAddHint
		if exists {
			want = "no RDMA device: " + dir + " has no verbs device; " + devs.LinkAddHint
		}
		for _, name := range []string{"", "rxe0"} {
			if _, err := devs.Find(name); err == nil || err.Error() != want {
				t.Errorf("Find(%q) without devices, %s there: %v, want %q", name, dir, err, want)
			}
		}
	}
}

func TestBindError(t *testing.T) {
	devstest.UseDevices(t, devstest.Rxe, devstest.RxeAddrs)
	kernel := os.ErrNotExist // stands in for the kernel's error
	for _, tt := range []struct {
		addr string
		want string // "" for the kernel's error unchanged
	}{
		{"198.18.0.99:7174", "no RDMA device has the address 198.18.0.99; the RDMA devices here: " + devstest.RxeList + " (file does not exist)"},
		{"127.0.0.1:1", "no RDMA device has the address 127.0.0.1; the RDMA devices here: " + devstest.RxeList + " (file does not exist)"},
		{"198.18.0.2:7174", ""}, // a device has it: the kernel's reason stands
		{"[::ffff:198.18.0.1]:7174", ""},
		{"0.0.0.0:7174", ""},
	} {
		err := devs.BindError(netip.MustParseAddrPort(tt.addr), kernel)
		want := tt.want
		if want == "" {
			want = kernel.Error()
		}
		if err.Error() != want {
			t.Errorf("BindError(%s) = %q, want %q", tt.addr, err, want)
		}
	}
}
