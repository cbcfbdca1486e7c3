package uverbs_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/testenv"
	"github.com/purerdma/rdma/uverbs"
)

// mrPD allocates a PD the test closes (unless the test did).
func mrPD(t *testing.T, c *uverbs.Context) *uverbs.PD {
	t.Helper()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD: %v", err)
	}
	t.Cleanup(func() { pd.Close() })
	return pd
}

// isRXE reports whether the context's device is soft-RoCE, whose key
// rules the tests know: rkey = lkey for a region with remote access;
// without, rkey is 0 on Linux 6.1 and equal to lkey on 6.12.
func isRXE(c *uverbs.Context) bool { return c.Device().DriverName == "rxe" }

// kernel612 reports whether the VM runs Linux 6.12 (FLUSH in rxe).
func kernel612() bool { return strings.HasPrefix(os.Getenv("PURERDMA_VM"), "6.12") }

func addrOf(b []byte) uint64 { return uint64(reflect.ValueOf(b).Pointer()) }

// checkKeys checks the keys as rxe assigns them.
func checkKeys(t *testing.T, c *uverbs.Context, mr *uverbs.MR, remote bool) {
	t.Helper()
	if mr.LKey() == 0 {
		t.Errorf("LKey = 0")
	}
	if !isRXE(c) {
		return
	}
	switch {
	case remote && mr.RKey() != mr.LKey():
		t.Errorf("rxe: RKey %#x != LKey %#x for a region with remote access", mr.RKey(), mr.LKey())
	case !remote && mr.RKey() != 0 && mr.RKey() != mr.LKey():
		t.Errorf("rxe: RKey = %#x for a region without remote access, want 0 or LKey %#x", mr.RKey(), mr.LKey())
	}
}

func TestMRLifecycleHeap(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	mem := make([]byte, 3*4096+100)
	buf := mem[10:]
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	mr, err := pd.RegMR(buf, access)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	t.Logf("heap MR: lkey %#x rkey %#x", mr.LKey(), mr.RKey())
	checkKeys(t, c, mr, true)
	checkSpan(t, c, mr, true)
	if mr.Addr() != addrOf(buf) || mr.Len() != len(buf) || mr.Access() != access || mr.PD() != pd {
		t.Errorf("Addr %#x Len %d Access %v PD %p; want %#x %d %v %p", mr.Addr(), mr.Len(), mr.Access(), mr.PD(), addrOf(buf), len(buf), access, pd)
	}
	if b := mr.Bytes(); len(b) != len(buf) || addrOf(b) != addrOf(buf) {
		t.Errorf("Bytes is not the registered slice")
	}
	local, err := pd.RegMR(mem[:100], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR local only: %v", err)
	}
	t.Logf("local-only MR: lkey %#x rkey %#x", local.LKey(), local.RKey())
	checkKeys(t, c, local, false)
	if local.LKey() == mr.LKey() {
		t.Errorf("two regions share lkey %#x", mr.LKey())
	}

	if err := pd.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("PD.Close with MRs open = %v, want EBUSY", err)
	}
	checkSpan(t, c, local, true)
	addr, n := mr.Addr(), uint32(mr.Len())
	if err := mr.Close(); err != nil {
		t.Fatalf("MR.Close: %v", err)
	}
	if uverbs.InlineCovers(c, mr.LKey(), addr, n) {
		t.Error("a closed MR's memory is still in the inline copies' table")
	}
	if err := mr.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second MR.Close = %v, want ErrClosed", err)
	}
	if mr.Bytes() != nil {
		t.Error("Bytes after Close still references the memory")
	}
	if err := pd.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("PD.Close with one MR open = %v, want EBUSY", err)
	}
	if err := local.Close(); err != nil {
		t.Fatalf("MR.Close: %v", err)
	}
	if err := pd.Close(); err != nil {
		t.Fatalf("PD.Close after its MRs: %v", err)
	}
	if _, err := pd.RegMR(mem, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("RegMR on a closed PD = %v, want ErrClosed", err)
	}
}

// checkSpan checks that mr's memory, exactly, is in c's table of the
// memory providers copy inline data from without a fault net (under its
// own key only), or, want false, that none of it is.
func checkSpan(t *testing.T, c *uverbs.Context, mr *uverbs.MR, want bool) {
	t.Helper()
	addr, n := mr.Addr(), uint32(mr.Len())
	if got := uverbs.InlineCovers(c, mr.LKey(), addr, n); got != want {
		t.Errorf("MR %#x (%d bytes at %#x) in the inline table: %v, want %v", mr.LKey(), n, addr, got, want)
	}
	if uverbs.InlineCovers(c, mr.LKey(), addr, n+1) || uverbs.InlineCovers(c, mr.LKey(), addr-1, 1) {
		t.Errorf("the inline table covers more than MR %#x's %d bytes at %#x", mr.LKey(), n, addr)
	}
	if uverbs.InlineCovers(c, mr.LKey()^0x100, addr, 1) {
		t.Errorf("the inline table covers MR %#x's memory under another key", mr.LKey())
	}
}

func TestMRLifecycleBuffer(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	b, err := uverbs.AllocBuffer(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mr, err := pd.RegBuffer(b, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatalf("RegBuffer: %v", err)
	}
	checkKeys(t, c, mr, true)
	if mr.Addr() != addrOf(b.Bytes()) || mr.Len() != b.Len() {
		t.Errorf("Addr %#x Len %d; want %#x %d", mr.Addr(), mr.Len(), addrOf(b.Bytes()), b.Len())
	}
	// A slice of a Buffer, through RegMR, counts as a use too.
	part, err := pd.RegMR(b.Bytes()[4096:8192], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR of part of a Buffer: %v", err)
	}
	if err := b.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Buffer.Close with MRs = %v, want EBUSY", err)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Buffer.Close with one MR = %v, want EBUSY", err)
	}
	if err := part.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Buffer.Close after its MRs: %v", err)
	}
	if _, err := pd.RegBuffer(b, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("RegBuffer of a closed Buffer = %v, want ErrClosed", err)
	}
}

// TestMRContextClose leaves an MR and an MW open: Context.Close destroys
// them before their PD, and the Buffer is free again afterwards.
func TestMRContextClose(t *testing.T) {
	c := openContext(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	b, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mr, err := pd.RegBuffer(b, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.CurrentFabric().IWARP {
		// siw has no memory windows: the kernel refuses ALLOC_MW.
		if mw, err := pd.AllocMW(uverbs.MWType2); !errors.Is(err, uverbs.ErrNotSupported) {
			if mw != nil {
				mw.Close()
			}
			t.Fatalf("siw AllocMW = %v, want ErrNotSupported", err)
		}
	} else if _, err := pd.AllocMW(uverbs.MWType2); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Context.Close with an MR and an MW open: %v", err)
	}
	if err := mr.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("MR.Close after Context.Close = %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Buffer.Close after Context.Close: %v", err)
	}
}

func TestMRValidationOnDevice(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	buf := make([]byte, 4096)
	for _, access := range []uverbs.Access{uverbs.AccessRemoteWrite, uverbs.AccessRemoteAtomic | uverbs.AccessRemoteRead, 1 << 14} {
		if mr, err := pd.RegMR(buf, access); !errors.Is(err, syscall.EINVAL) {
			if mr != nil {
				mr.Close()
			}
			t.Errorf("RegMR(%v) = %v, want EINVAL before the kernel", access, err)
		}
	}
	if _, err := pd.RegMR(nil, uverbs.AccessLocalWrite); err == nil {
		t.Error("RegMR(nil) succeeded")
	}
}

func TestMRRemoteAccess(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	b, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic | uverbs.AccessMWBind
	mr, err := pd.RegBuffer(b, access)
	if err != nil {
		t.Fatalf("RegBuffer(%v): %v", access, err)
	}
	defer mr.Close()
	checkKeys(t, c, mr, true)
	if mr.RKey() == 0 {
		t.Error("RKey = 0 for a region with remote access")
	}
	if mr.Access() != access {
		t.Errorf("Access = %v, want %v", mr.Access(), access)
	}
}

// TestMRRelaxedOrdering: the optional bit is passed when the kernel takes
// optional access bits and dropped otherwise; either way RegMR succeeds.
func TestMRRelaxedOrdering(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRelaxedOrdering)
	if err != nil {
		t.Fatalf("RegMR with AccessRelaxedOrdering: %v", err)
	}
	defer mr.Close()
	want := uverbs.AccessLocalWrite
	if c.OptionalMRAccess() {
		want |= uverbs.AccessRelaxedOrdering
	}
	t.Logf("optional MR access: %v; access %v", c.OptionalMRAccess(), mr.Access())
	if mr.Access() != want {
		t.Errorf("Access = %v, want %v", mr.Access(), want)
	}
}

// pmemBuffer maps the first size bytes of the VM's persistent memory,
// PURERDMA_PMEM: device DAX over an emulated NVDIMM (testenv/vm). Every
// call maps the same memory. Where devices are required (the VM) its
// absence fails the test.
func pmemBuffer(t *testing.T, size int) *uverbs.Buffer {
	t.Helper()
	dev := os.Getenv("PURERDMA_PMEM")
	if dev == "" {
		if os.Getenv("PURERDMA_REQUIRE_DEVICE") == "1" {
			t.Fatal("PURERDMA_PMEM is not set: no persistent memory to test on")
		}
		t.Skip("no persistent memory (PURERDMA_PMEM names a device DAX such as /dev/dax0.0)")
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := uverbs.MapFile(f, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// regAndClose registers b with access, which must succeed and be granted
// whole, and deregisters it.
func regAndClose(t *testing.T, pd *uverbs.PD, b *uverbs.Buffer, access uverbs.Access, what string) {
	t.Helper()
	mr, err := pd.RegBuffer(b, access)
	if err != nil {
		t.Fatalf("RegBuffer(%v) on %s: %v", access, what, err)
	}
	if mr.Access() != access {
		t.Errorf("Access = %v, want %v", mr.Access(), access)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMRFlushAccess: Linux 6.2 added the flush access bits. On 6.1 the
// kernel rejects them and the error says so (ErrNotSupported); on 6.12
// rxe takes FLUSH_GLOBAL on any memory, and FLUSH_PERSISTENT only on
// persistent memory: it refuses ordinary pages and takes a mapping of
// the VM's NVDIMM. siw has no FLUSH on either kernel: it refuses the
// bits as 6.1 does.
func TestMRFlushAccess(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	b, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	base := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	global := base | uverbs.AccessFlushGlobal
	both := global | uverbs.AccessFlushPersistent
	if kernel612() && !testenv.CurrentFabric().IWARP {
		regAndClose(t, pd, b, global, "ordinary memory")
		mr, err := pd.RegBuffer(b, both)
		if err == nil {
			mr.Close()
			t.Errorf("6.12: RegBuffer(%v) on ordinary memory succeeded", both)
		} else if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "persistent memory") {
			t.Errorf("6.12: RegBuffer(%v) on ordinary memory = %v, want EINVAL explaining persistent memory", both, err)
		}
		regAndClose(t, pd, pmemBuffer(t, 1<<20), both, "persistent memory")
		return
	}
	// 6.1, and siw on any kernel, refuse the access bits whatever the
	// memory.
	pb := pmemBuffer(t, 1<<20)
	if mr, err := pd.RegBuffer(pb, both); !errors.Is(err, uverbs.ErrNotSupported) {
		if err == nil {
			mr.Close()
		}
		t.Errorf("%s: RegBuffer(%v) on persistent memory = %v, want ErrNotSupported", os.Getenv("PURERDMA_VM"), both, err)
	}
	for _, access := range []uverbs.Access{global, both} {
		mr, err := pd.RegBuffer(b, access)
		if err == nil {
			mr.Close()
			t.Fatalf("%s: RegBuffer(%v) succeeded", os.Getenv("PURERDMA_VM"), access)
		}
		t.Logf("%s: %v", os.Getenv("PURERDMA_VM"), err)
		if !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(err.Error(), "flush access") || !strings.Contains(err.Error(), "Linux 6.2") {
			t.Errorf("RegBuffer(%v) = %v, want ErrNotSupported naming flush access and Linux 6.2", access, err)
		}
	}
	// The failed registrations released what they took.
	if err := b.Close(); err != nil {
		t.Errorf("Buffer.Close after failed registrations: %v", err)
	}
}

func TestMRRereg(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	pd2 := mrPD(t, c)
	buf := make([]byte, 8192)
	before := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead
	mr, err := pd.RegMR(buf, before)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	oldL, oldR := mr.LKey(), mr.RKey()

	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	err = mr.Rereg(uverbs.ReregAccess, nil, nil, access)
	if isRXE(c) && !kernel612() || c.Device().DriverName == "siw" {
		// 6.1's rxe and siw have no rereg_user_mr: the kernel refuses
		// every change, and the region stays as it was.
		t.Logf("%s: %v", os.Getenv("PURERDMA_VM"), err)
		if !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(err.Error(), c.Device().Name) {
			t.Fatalf("Rereg(access) = %v, want ErrNotSupported naming the device", err)
		}
		if err := mr.Rereg(uverbs.ReregPD, pd2, nil, 0); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("Rereg(PD) = %v, want ErrNotSupported", err)
		}
		if mr.Access() != before || mr.PD() != pd || mr.LKey() != oldL || mr.RKey() != oldR {
			t.Errorf("a refused Rereg changed the region: %v %p %#x %#x", mr.Access(), mr.PD(), mr.LKey(), mr.RKey())
		}
		checkSpan(t, c, mr, true)
		if err := pd2.Close(); err != nil {
			t.Errorf("PD.Close of the PD a refused Rereg named: %v", err)
		}
		if err := mr.Close(); err != nil {
			t.Fatalf("Close after a refused Rereg: %v", err)
		}
		if err := pd.Close(); err != nil {
			t.Errorf("PD.Close after the MR: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Rereg(access %v): %v", access, err)
	}
	t.Logf("rereg access: keys %#x/%#x -> %#x/%#x", oldL, oldR, mr.LKey(), mr.RKey())
	if mr.Access() != access || mr.LKey() == 0 || mr.RKey() == 0 {
		t.Errorf("after Rereg: Access %v keys %#x/%#x; want %v and keys", mr.Access(), mr.LKey(), mr.RKey(), access)
	}
	checkSpan(t, c, mr, true)

	// Move it to pd2: pd can close, pd2 cannot.
	if err := mr.Rereg(uverbs.ReregPD, pd2, nil, 0); err != nil {
		t.Fatalf("Rereg(PD): %v", err)
	}
	if mr.PD() != pd2 {
		t.Errorf("PD after Rereg = %p, want %p", mr.PD(), pd2)
	}
	if err := pd2.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("closing the new PD = %v, want EBUSY", err)
	}
	if err := pd.Close(); err != nil {
		t.Errorf("closing the old PD: %v", err)
	}

	// Translation: rxe refuses it; other drivers take it.
	buf2 := make([]byte, 4096)
	err = mr.Rereg(uverbs.ReregTranslation, nil, buf2, 0)
	switch {
	case err == nil:
		if mr.Addr() != addrOf(buf2) || mr.Len() != len(buf2) {
			t.Errorf("after translation: Addr %#x Len %d", mr.Addr(), mr.Len())
		}
		checkSpan(t, c, mr, true)
		if uverbs.InlineCovers(c, mr.LKey(), addrOf(buf), 1) {
			t.Error("the inline table still covers the memory a translation change left")
		}
	case isRXE(c) && errors.Is(err, uverbs.ErrNotSupported):
		t.Logf("rxe refuses a translation change: %v", err)
		if mr.Addr() != addrOf(buf) {
			t.Errorf("a refused Rereg moved the MR")
		}
	default:
		t.Errorf("Rereg(translation): %v", err)
	}
	if err := mr.Close(); err != nil {
		t.Fatalf("Close after Rereg: %v", err)
	}
	if err := pd2.Close(); err != nil {
		t.Errorf("closing the new PD after the MR: %v", err)
	}
}

func TestMWAllocClose(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	if testenv.CurrentFabric().IWARP {
		// siw has no memory windows: ALLOC_MW is refused by the kernel
		// for either type, and the PD has nothing under it.
		for _, typ := range []uverbs.MWType{uverbs.MWType1, uverbs.MWType2} {
			if mw, err := pd.AllocMW(typ); !errors.Is(err, uverbs.ErrNotSupported) {
				if mw != nil {
					mw.Close()
				}
				t.Errorf("siw AllocMW(%v) = %v, want ErrNotSupported", typ, err)
			}
		}
		if err := pd.Close(); err != nil {
			t.Errorf("PD.Close after refused windows: %v", err)
		}
		return
	}
	for _, typ := range []uverbs.MWType{uverbs.MWType1, uverbs.MWType2} {
		t.Run(typ.String(), func(t *testing.T) {
			mw, err := pd.AllocMW(typ)
			if err != nil {
				t.Fatalf("AllocMW(%v): %v", typ, err)
			}
			t.Logf("%v: rkey %#x", typ, mw.RKey())
			if mw.Type() != typ || mw.PD() != pd {
				t.Errorf("Type %v PD %p; want %v %p", mw.Type(), mw.PD(), typ, pd)
			}
			if isRXE(c) && mw.RKey() == 0 {
				t.Errorf("rxe gave the window rkey 0")
			}
			if err := pd.Close(); !errors.Is(err, syscall.EBUSY) {
				t.Errorf("PD.Close with an MW = %v, want EBUSY", err)
			}
			if err := mw.Close(); err != nil {
				t.Fatalf("MW.Close: %v", err)
			}
			if err := mw.Close(); !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("second MW.Close = %v, want ErrClosed", err)
			}
		})
	}
	if _, err := pd.AllocMW(3); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("AllocMW(3) = %v, want EINVAL", err)
	}
	if err := pd.Close(); err != nil {
		t.Errorf("PD.Close after the windows: %v", err)
	}
}

// hasDontCopy reports whether the page at addr is marked MADV_DONTFORK.
func hasDontCopy(t *testing.T, addr uint64) bool {
	t.Helper()
	flags, err := uverbs.VMFlags(addr)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(flags, "dc")
}

// TestForkSafety reports the kernel's fork mode and checks that
// registered memory is marked DONTFORK exactly when that mode says so.
func TestForkSafety(t *testing.T) {
	c := openContext(t)
	pd := mrPD(t, c)
	mode := uverbs.ForkSafety()
	t.Logf("kernel %s: ForkSafety() = %v", os.Getenv("PURERDMA_VM"), mode)
	b, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mr, err := pd.RegBuffer(b, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hasDontCopy(t, mr.Addr()), mode == uverbs.ForkDontFork; got != want {
		t.Errorf("mode %v: registered page dc = %v, want %v", mode, got, want)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if hasDontCopy(t, addrOf(b.Bytes())) {
		t.Error("page still dc after the MR closed")
	}
}

// TestForkDontFork forces the DONTFORK mode (the VM's kernels do not need
// it) and checks the marks the kernel keeps, with overlapping regions on
// a Buffer and a region of heap memory.
func TestForkDontFork(t *testing.T) {
	defer uverbs.ForceForkMode(uverbs.ForkDontFork)()
	c := openContext(t)
	pd := mrPD(t, c)
	const ps = 4096
	b, err := uverbs.AllocBuffer(4 * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mem := b.Bytes()
	base := addrOf(mem)
	want := func(marked ...bool) {
		t.Helper()
		for i, m := range marked {
			if got := hasDontCopy(t, base+uint64(i*ps)); got != m {
				t.Errorf("page %d: dc = %v, want %v", i, got, m)
			}
		}
	}
	a, err := pd.RegMR(mem[ps+8:2*ps+8], uverbs.AccessLocalWrite) // pages 1-2
	if err != nil {
		t.Fatal(err)
	}
	want(false, true, true, false)
	bb, err := pd.RegMR(mem[2*ps:], uverbs.AccessLocalWrite) // pages 2-3
	if err != nil {
		t.Fatal(err)
	}
	want(false, true, true, true)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	want(false, false, true, true)
	if err := bb.Close(); err != nil {
		t.Fatal(err)
	}
	want(false, false, false, false)

	heap := make([]byte, 3*ps)
	mr, err := pd.RegMR(heap, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if !hasDontCopy(t, mr.Addr()) || !hasDontCopy(t, mr.Addr()+uint64(len(heap))-1) {
		t.Error("registered heap memory is not dc")
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if hasDontCopy(t, addrOf(heap)) {
		t.Error("heap page still dc after the MR closed")
	}
}
