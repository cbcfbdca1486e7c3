package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// TestAsyncEventTypeNames runs anywhere: the names are ibv_event_type's
// without IBV_EVENT_, the descriptions ibv_event_type_str's.
func TestAsyncEventTypeNames(t *testing.T) {
	for typ, want := range map[uverbs.AsyncEventType][2]string{
		uverbs.EventCQErr:             {"CQ_ERR", "CQ error"},
		uverbs.EventQPFatal:           {"QP_FATAL", "local work queue catastrophic error"},
		uverbs.EventQPReqErr:          {"QP_REQ_ERR", "invalid request local work queue error"},
		uverbs.EventQPAccessErr:       {"QP_ACCESS_ERR", "local access violation work queue error"},
		uverbs.EventCommEst:           {"COMM_EST", "communication established"},
		uverbs.EventSQDrained:         {"SQ_DRAINED", "send queue drained"},
		uverbs.EventPathMig:           {"PATH_MIG", "path migrated"},
		uverbs.EventPathMigErr:        {"PATH_MIG_ERR", "path migration request error"},
		uverbs.EventDeviceFatal:       {"DEVICE_FATAL", "local catastrophic error"},
		uverbs.EventPortActive:        {"PORT_ACTIVE", "port active"},
		uverbs.EventPortErr:           {"PORT_ERR", "port error"},
		uverbs.EventLIDChange:         {"LID_CHANGE", "LID change"},
		uverbs.EventPKeyChange:        {"PKEY_CHANGE", "P_Key change"},
		uverbs.EventSMChange:          {"SM_CHANGE", "SM change"},
		uverbs.EventSRQErr:            {"SRQ_ERR", "SRQ catastrophic error"},
		uverbs.EventSRQLimitReached:   {"SRQ_LIMIT_REACHED", "SRQ limit reached"},
		uverbs.EventQPLastWQEReached:  {"QP_LAST_WQE_REACHED", "last WQE reached"},
		uverbs.EventClientReregister:  {"CLIENT_REREGISTER", "client reregistration"},
		uverbs.EventGIDChange:         {"GID_CHANGE", "GID table change"},
		uverbs.EventWQFatal:           {"WQ_FATAL", "WQ fatal"},
		uverbs.EventDeviceSpeedChange: {"DEVICE_SPEED_CHANGE", "Device link speed change"},
		21:                            {"AsyncEventType(21)", "unknown"},
	} {
		if got := [2]string{typ.String(), typ.Description()}; got != want {
			t.Errorf("type %d: %q, want %q", uint32(typ), got, want)
		}
	}
	for i := range 21 {
		if typ := uverbs.AsyncEventType(i); strings.HasPrefix(typ.String(), "AsyncEventType") {
			t.Errorf("type %d has no name", i)
		}
	}
	ev := uverbs.AsyncEvent{Type: uverbs.EventPortErr, Port: 1}
	if got := ev.String(); got != "PORT_ERR on port 1" {
		t.Errorf("String() = %q", got)
	}
}

// runIP runs the ip tool.
func runIP(t *testing.T, args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipLines runs ip and returns its output lines.
func ipLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		t.Fatalf("ip %s: %v", strings.Join(args, " "), err)
	}
	return strings.FieldsFunc(string(out), func(r rune) bool { return r == '\n' })
}

// linkDown takes netdev down and registers a cleanup that brings it up
// again, puts back the IPv4 routes and permanent neighbours that going
// down deleted (the VM's policy routes and pinned neighbours), and waits
// until every RDMA port is ACTIVE with its RoCE v2 IPv4 GID, so that the
// tests after this one find the VM as it was. The returned function
// does the same at once (the cleanup then has nothing left to do).
func linkDown(t *testing.T, netdev string) (up func()) {
	t.Helper()
	var routes []string
	for _, l := range ipLines(t, "-4", "-o", "route", "show", "table", "all") {
		if strings.Contains(l, " dev "+netdev+" ") && !strings.Contains(l, "proto kernel") {
			routes = append(routes, strings.TrimSpace(strings.ReplaceAll(l, "linkdown", "")))
		}
	}
	var neighs [][]string
	for _, l := range ipLines(t, "-4", "neigh", "show", "dev", netdev, "nud", "permanent") {
		f := strings.Fields(l) // ADDR lladdr MAC PERMANENT
		if len(f) >= 3 && f[1] == "lladdr" {
			neighs = append(neighs, []string{"neigh", "replace", f[0], "lladdr", f[2], "dev", netdev, "nud", "permanent"})
		}
	}
	mainTable := ipLines(t, "-4", "-o", "route", "show", "table", "main")
	var once sync.Once
	up = func() {
		once.Do(func() {
			if err := runIP(t, "link", "set", netdev, "up"); err != nil {
				t.Error(err)
			}
			defer restoreOrder(t, mainTable)
			for _, r := range routes {
				if err := runIP(t, append([]string{"route", "replace"}, strings.Fields(r)...)...); err != nil {
					t.Error(err)
				}
			}
			for _, n := range neighs {
				if err := runIP(t, n...); err != nil {
					t.Error(err)
				}
			}
			if err := waitPortsReady(20 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(up)
	if err := runIP(t, "link", "set", netdev, "down"); err != nil {
		t.Fatal(err)
	}
	return up
}

// restoreOrder puts the main table's routes back in the order they had:
// the connected route of a link that went down comes back after those
// of the links that stayed up, and among routes to the same prefix the
// first one wins.
func restoreOrder(t *testing.T, want []string) {
	got := ipLines(t, "-4", "-o", "route", "show", "table", "main")
	for i := range got {
		got[i] = strings.Join(strings.Fields(strings.ReplaceAll(got[i], "linkdown", "")), " ")
	}
	for i := range want {
		want[i] = strings.Join(strings.Fields(want[i]), " ")
	}
	if slices.Equal(got, want) {
		return
	}
	first := 0
	for first < len(got) && first < len(want) && got[first] == want[first] {
		first++
	}
	for _, r := range want[first:] {
		if !slices.Contains(got, r) {
			continue // gone for good; not this test's to recreate
		}
		if err := runIP(t, append([]string{"route", "del"}, strings.Fields(r)...)...); err != nil {
			t.Error(err)
			continue
		}
		if err := runIP(t, append([]string{"route", "append"}, strings.Fields(r)...)...); err != nil {
			t.Error(err)
		}
	}
	if got := ipLines(t, "-4", "-o", "route", "show", "table", "main"); len(got) != len(want) {
		t.Errorf("main routing table: %q, want %q", got, want)
	}
}

// waitPortsReady waits until port 1 of every RDMA device is ACTIVE and,
// for RoCE, has a RoCE v2 GID with an IPv4 address again.
func waitPortsReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		devs, err := uverbs.Devices()
		if err != nil {
			return err
		}
		var notReady []string
		for _, d := range devs {
			if len(d.Ports) == 0 || d.Ports[0].State != uverbs.PortActive {
				notReady = append(notReady, d.Name+" not ACTIVE")
			} else if d.Transport == uverbs.TransportIB && !hasIPv4GID(d.Name) { // RoCE: iWARP has no GID table
				notReady = append(notReady, d.Name+" has no RoCE v2 IPv4 GID")
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %s", timeout, strings.Join(notReady, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasIPv4GID(dev string) bool {
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	for i := range 64 {
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", fmt.Sprint(i)))
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue
		}
		s, err := os.ReadFile(filepath.Join(dir, "gids", fmt.Sprint(i)))
		if ip := net.ParseIP(strings.TrimSpace(string(s))); err == nil && ip != nil && ip.To4() != nil {
			return true
		}
	}
	return false
}

// waitEvent reads events until one of type want for port arrives, logging
// the others (GID changes come with a link going down or up).
func waitEvent(t *testing.T, c *uverbs.Context, want uverbs.AsyncEventType, port int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	for {
		ev, err := c.AsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting %v for %v on port %d: %v", timeout, want, port, err)
		}
		if ev.Type == want && ev.Port == port {
			t.Logf("%v after %v", ev, time.Since(start).Round(time.Millisecond))
			return
		}
		t.Logf("other event: %v", ev)
	}
}

// TestAsyncEventPort takes the device's network link down and up and
// expects PORT_ERR, then PORT_ACTIVE.
func TestAsyncEventPort(t *testing.T) {
	testenv.RequireRoot(t)
	c := openContext(t)
	dev := c.Device()
	if len(dev.Ports) == 0 || dev.Ports[0].Netdev == "" {
		t.Fatalf("%s: port 1 has no network device", dev.Name)
	}
	netdev, port := dev.Ports[0].Netdev, dev.Ports[0].Num
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the ip tool is needed to take %s down: %v", netdev, err)
	}
	linkDown(t, netdev)
	waitEvent(t, c, uverbs.EventPortErr, port, 5*time.Second)
	if err := runIP(t, "link", "set", netdev, "up"); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, uverbs.EventPortActive, port, 10*time.Second)
}

// asyncErr waits for events until AsyncEvent fails, and returns that
// error: events from earlier tests (GID changes after a link came back)
// may still arrive.
func asyncErr(c *uverbs.Context, ctx context.Context) error {
	for {
		if _, err := c.AsyncEvent(ctx); err != nil {
			return err
		}
	}
}

//purerdma:race
func TestAsyncEventContext(t *testing.T) {
	c := openContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := asyncErr(c, ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("AsyncEvent(cancelled) = %v; want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := asyncErr(c, ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AsyncEvent(deadline) = %v; want context.DeadlineExceeded", err)
	}
	// Cancelled while waiting.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- asyncErr(c, ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("AsyncEvent cancelled while waiting = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AsyncEvent did not return after its context was cancelled")
	}
}

// TestAsyncEventBusy: one waiter at a time.
//
//purerdma:race
func TestAsyncEventBusy(t *testing.T) {
	c := openContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		for {
			// The second waiter below may hold the slot between two
			// events of this one: wait again.
			err := asyncErr(c, ctx)
			if !errors.Is(err, uverbs.ErrBusy) || ctx.Err() != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Between two events of the first waiter the slot is free:
		// then this wait times out (or takes an event) and tries again.
		short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := c.AsyncEvent(short)
		stop()
		if errors.Is(err, uverbs.ErrBusy) {
			return
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second AsyncEvent = %v, want ErrBusy", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the second waiter never saw the first")
		}
		select {
		case err := <-done:
			t.Fatalf("the first waiter returned: %v", err)
		default:
		}
	}
}

// TestAsyncEventClose: closing the context wakes a waiting AsyncEvent
// with ErrClosed; the goroutine ends (TestMain checks for leaks).
//
//purerdma:race
func TestAsyncEventClose(t *testing.T) {
	c := openContext(t)
	fd := c.AsyncFd()
	if fd < 0 {
		t.Fatalf("AsyncFd = %d", fd)
	}
	done := make(chan error)
	go func() { done <- asyncErr(c, context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("AsyncEvent woken by Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake AsyncEvent")
	}
	if _, err := c.AsyncEvent(context.Background()); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AsyncEvent after Close = %v, want ErrClosed", err)
	}
	if fd := c.AsyncFd(); fd != -1 {
		t.Errorf("AsyncFd after Close = %d, want -1", fd)
	}
}
