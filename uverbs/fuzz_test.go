package uverbs

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/evfd"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"golang.org/x/sys/unix"
)

// Fuzz targets for what the kernel hands this package as bytes: async
// event descriptors, completion channel events, rxe queue headers, and
// sysfs attributes. (FuzzParseGRH, FuzzDecodeDeviceAttr,
// FuzzDecodePortAttr and FuzzDecodeGIDTable are next to their tests.)

// pipeFile returns an evfd.File reading a pipe that holds b and then
// ends, as a kernel event fd would deliver b (each read gets up to the
// size asked for; the end reads as 0 bytes).
func pipeFile(t *testing.T, b []byte) *evfd.File {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n, err := unix.Write(p[1], b)
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	unix.Close(p[1])
	f, err := evfd.New(p[0], "fuzz pipe")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// asyncElement is the kernel's rule for what struct
// ib_uverbs_async_event_desc.element holds (ib_uverbs_*_event_handler in
// drivers/infiniband/core/uverbs_main.c): a CQ's, QP's or SRQ's user
// handle, nothing useful for a WQ, else a port number.
func asyncElement(typ uint32) string {
	switch typ {
	case 0:
		return "cq"
	case 1, 2, 3, 4, 5, 6, 7, 16:
		return "qp"
	case 14, 15:
		return "srq"
	case 19:
		return "wq"
	}
	return "port"
}

func asyncDesc(typ uint32, element uint64) []byte {
	d := abi.AsyncEventDesc{EventType: typ, Element: element}
	return append([]byte(nil), abi.Bytes(&d)...)
}

// FuzzAsyncEvents feeds a stream of async event descriptors to
// Context.AsyncEvent: it must return, in order, an event for each whole
// descriptor whose object is known, with the one field the event type
// names set to that object (an event naming a handle of another kind of
// object is dropped, as one of a destroyed object is), or to the port
// number; then fail on the short read at the end, saying how many bytes
// came. It never panics.
func FuzzAsyncEvents(f *testing.F) {
	var seed []byte
	for _, d := range [][]byte{asyncDesc(uint32(EventPortActive), 1), asyncDesc(uint32(EventCQErr), 1),
		asyncDesc(uint32(EventQPFatal), 2), asyncDesc(uint32(EventSRQLimitReached), 3),
		asyncDesc(uint32(EventCQErr), 2), asyncDesc(uint32(EventQPLastWQEReached), 99),
		asyncDesc(uint32(EventWQFatal), 7), asyncDesc(1000, 5)} {
		seed = append(seed, d...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		if len(stream) > 4096 {
			return
		}
		cq, qp, srq, cq2 := &CQ{}, &QP{}, &SRQ{}, &CQ{}
		cq.handle, qp.handle, srq.handle, cq2.handle = 10, 20, 30, 40
		objects := map[uint64]any{1: cq, 2: qp, 3: srq, 4: cq2}
		c := &Context{pc: provider.NewContext(nil, 0)}
		for h, o := range objects {
			c.byHandle.Store(h, o)
		}
		c.async = pipeFile(t, stream)
		defer c.async.Close()

		var want []AsyncEvent
		for r := stream; len(r) >= 16; r = r[16:] {
			typ := binary.NativeEndian.Uint32(r[8:])
			el := binary.NativeEndian.Uint64(r)
			ev := AsyncEvent{Type: AsyncEventType(typ)}
			switch asyncElement(typ) {
			case "port":
				ev.Port = int(el)
			case "cq":
				if ev.CQ, _ = objects[el].(*CQ); ev.CQ == nil {
					continue
				}
			case "qp":
				if ev.QP, _ = objects[el].(*QP); ev.QP == nil {
					continue
				}
			case "srq":
				if ev.SRQ, _ = objects[el].(*SRQ); ev.SRQ == nil {
					continue
				}
			}
			want = append(want, ev)
		}
		for i := 0; ; i++ {
			ev, err := c.AsyncEvent(context.Background())
			if err != nil {
				if i != len(want) {
					t.Fatalf("error after %d events, want %d: %v", i, len(want), err)
				}
				if tail := fmt.Sprintf("%d bytes, want 16", len(stream)%16); !strings.Contains(err.Error(), tail) {
					t.Fatalf("error at the end of the stream = %v, want one saying %q", err, tail)
				}
				break
			}
			if i >= len(want) {
				t.Fatalf("event %d (%v) past the %d expected", i, ev, len(want))
			}
			if ev != want[i] {
				t.Fatalf("event %d = %+v, want %+v", i, ev, want[i])
			}
			if s := ev.String(); !strings.HasPrefix(s, ev.Type.String()) {
				t.Fatalf("event %d: String %q does not start with its type", i, s)
			}
			_ = ev.Type.Description()
		}
	})
}

// FuzzCompChannel feeds a stream of completion events (struct
// ib_uverbs_comp_event_desc, a CQ's user handle) to CompChannel.Wait: it
// must return the channel's CQ of each whole event, in order, skipping
// handles of CQs it does not hold, count each returned event on its CQ,
// and fail on the short read at the end. It never panics.
func FuzzCompChannel(f *testing.F) {
	ev := func(h uint64) []byte { return binary.NativeEndian.AppendUint64(nil, h) }
	f.Add(append(append(ev(5), ev(6)...), ev(5)...))
	f.Add(append(ev(7), ev(6)[:5]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		if len(stream) > 4096 {
			return
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(p[1], stream); err != nil {
			t.Fatal(err)
		}
		unix.Close(p[1])
		cq1, cq2 := &CQ{}, &CQ{}
		ch := &CompChannel{raw: p[0], cqs: map[uint64]*CQ{5: cq1, 6: cq2}}
		defer ch.closeFd()
		var want []*CQ
		for r := stream; len(r) >= 8; r = r[8:] {
			if cq := ch.cqs[binary.NativeEndian.Uint64(r)]; cq != nil {
				want = append(want, cq)
			}
		}
		counts := map[*CQ]uint32{}
		for i := 0; ; i++ {
			cq, err := ch.Wait(context.Background())
			if err != nil {
				if i != len(want) {
					t.Fatalf("error after %d events, want %d: %v", i, len(want), err)
				}
				if tail := fmt.Sprintf("%d bytes, want 8", len(stream)%8); !strings.Contains(err.Error(), tail) {
					t.Fatalf("error at the end of the stream = %v, want one saying %q", err, tail)
				}
				break
			}
			if i >= len(want) || cq != want[i] {
				t.Fatalf("event %d: CQ %p, want the %d expected %v", i, cq, len(want), want)
			}
			counts[cq]++
		}
		for _, cq := range []*CQ{cq1, cq2} {
			if cq.events.Load() != counts[cq] {
				t.Fatalf("CQ counted %d events, Wait returned it %d times", cq.events.Load(), counts[cq])
			}
		}
	})
}

// FuzzParseIDs: the parsers of GUIDs and GIDs (sysfs, the command line,
// a peer's address) and of sysfs's "N: NAME" values never panic, and
// what they accept survives a round trip through the formatters: a GUID
// in both its forms, a GID in its sysfs form, as an IP address, and as
// the netip address it names.
func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{"5054:00ff:fe12:3456", "505400fffe123456", "5054:ff:fe12:3456", "fe80:0000:0000:0000:5054:00ff:fe12:3456",
		"::ffff:198.18.0.1", "198.18.0.1", "fe80::1%eth0", "4: ACTIVE", " 5 : LinkUp", "-1: X", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if g, err := ParseGUID(s); err == nil {
			for _, form := range []string{g.String(), g.Colon()} {
				if back, err := ParseGUID(form); err != nil || back != g {
					t.Fatalf("ParseGUID(%q) = %#x, but %q parses to %#x, %v", s, uint64(g), form, uint64(back), err)
				}
			}
			if len(g.String()) != 16 || len(g.Colon()) != 19 {
				t.Fatalf("GUID %#x formats as %q and %q", uint64(g), g.String(), g.Colon())
			}
		}
		if g, err := ParseGID(s); err == nil {
			str := g.String()
			if len(str) != 39 {
				t.Fatalf("GID %x formats as %q", g[:], str)
			}
			if back, err := ParseGID(str); err != nil || back != g {
				t.Fatalf("ParseGID(%q) = %s, but that parses to %s, %v", s, str, back, err)
			}
			a := netip.MustParseAddr(s)
			if GID(a.As16()) != g {
				t.Fatalf("ParseGID(%q) = %s, not the address %v", s, str, a)
			}
			ip := g.IP()
			if a.Unmap().Is4() != (len(ip) == 4) {
				t.Fatalf("GID %s: IP %v (%d bytes)", str, ip, len(ip))
			}
			if back, ok := netip.AddrFromSlice(ip); !ok || back.Unmap() != a.Unmap() {
				t.Fatalf("GID %s: IP %v names another address than %v", str, ip, a)
			}
		}
		n, err := parseNumbered(s)
		num, _, _ := strings.Cut(s, ":")
		if m, merr := strconv.Atoi(strings.TrimSpace(num)); (err == nil) != (merr == nil) || err == nil && n != m {
			t.Fatalf("parseNumbered(%q) = %d, %v; the number before the colon is %d, %v", s, n, err, m, merr)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Fatalf("parseNumbered(%q): %v does not quote the value", s, err)
		}
	})
}

// FuzzSysfsDevice reads a fake rxe device whose sysfs attributes hold
// fuzzed text: Devices and QueryPKey never panic; a device that is read
// has the values each attribute holds (its name without surrounding
// space, the GUID and node type and port state as their parsers read
// them), and an attribute that cannot be read fails the whole device
// with an error naming the attribute's file.
func FuzzSysfsDevice(f *testing.F) {
	f.Add("rxe0\n", "1: CA\n", "5054:00ff:fe12:3456\n", "4: ACTIVE\n", "5: LinkUp\n", "6\n", "0xffff\n")
	f.Add(" rxe1 ", "4", "505400fffe123456", "1: DOWN", "Disabled", "6", "7fff")
	f.Add("../x", "CA", "5054::fe12:3456", "ACTIVE", "", "six", "0x1ffff")
	f.Add("", "1:", "", ":", "5:", "", "")
	// One tree, rewritten for each input: a temporary folder per input
	// would cost most of the run.
	root := f.TempDir()
	sysfs := func(t *testing.T, files map[string]string) {
		if err := os.RemoveAll(filepath.Join(root, "class")); err != nil {
			t.Fatal(err)
		}
		for path, content := range files {
			full := filepath.Join(root, path)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		old := sysfsRoot
		sysfsRoot = root
		t.Cleanup(func() { sysfsRoot = old })
	}
	f.Fuzz(func(t *testing.T, ibdev, nodeType, guid, state, physState, abiVersion, pkey string) {
		if len(ibdev) > 64 {
			return // no file name that long
		}
		name := strings.TrimSpace(ibdev)
		tree := map[string]string{
			verbsABI:                               abiVersion,
			"class/infiniband_verbs/uverbs0/ibdev": ibdev,
		}
		okName := name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
		if okName && strings.ContainsRune(name, 0) {
			// No file can have this name: reading the device fails.
			sysfs(t, tree)
			if devs, err := Devices(); err == nil {
				t.Fatalf("Devices with an ibdev of %q = %+v", ibdev, devs)
			}
			return
		}
		if okName {
			ib := "class/infiniband/" + name + "/"
			for file, v := range map[string]string{"node_type": nodeType, "node_guid": guid, "node_desc": "rxe\n",
				"ports/1/state": state, "ports/1/phys_state": physState, "ports/1/pkeys/0": pkey} {
				tree[ib+file] = v
			}
		}
		sysfs(t, tree)
		devs, err := Devices()
		wantABI, abiErr := strconv.Atoi(strings.TrimSpace(abiVersion))
		nt, ntErr := parseNumbered(strings.TrimSpace(nodeType))
		g, guidErr := ParseGUID(strings.TrimSpace(guid))
		ps, psErr := parseNumbered(strings.TrimSpace(state))
		var wantErr string
		switch {
		case abiErr != nil:
			wantErr = "abi_version"
		case !okName:
			wantErr = "ibdev"
		case ntErr != nil:
			wantErr = "node_type"
		case guidErr != nil:
			wantErr = "node_guid"
		case psErr != nil:
			wantErr = "state"
		}
		if wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), "uverbs Devices: ") || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("Devices = %v, %v; want an error naming %s", devs, err, wantErr)
			}
			return
		}
		if err != nil || len(devs) != 1 {
			t.Fatalf("Devices = %+v, %v; want the one device", devs, err)
		}
		d := devs[0]
		wantPhys := strings.TrimSpace(physState)
		if _, after, ok := strings.Cut(wantPhys, ":"); ok {
			wantPhys = strings.TrimSpace(after)
		}
		if d.Name != name || d.ABIVersion != wantABI || d.NodeType != NodeType(nt) || d.NodeGUID != g ||
			len(d.Ports) != 1 || d.Ports[0].State != PortState(ps) || d.Ports[0].PhysState != wantPhys || d.DriverName != "rxe" {
			t.Fatalf("device %+v", d)
		}
		c := &Context{dev: d}
		v, err := c.QueryPKey(1, 0)
		want, perr := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(pkey), "0x"), 16, 16)
		if (err == nil) != (perr == nil) || (err == nil && v != uint16(want)) {
			t.Fatalf("QueryPKey of %q = %#x, %v", pkey, v, err)
		}
	})
}
