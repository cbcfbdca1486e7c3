package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// MR is a registered memory region (ibv_mr): memory the device may read
// and write, named by LKey in local work requests and by RKey in remote
// ones.
//
// The MR keeps the registered slice referenced until Close, so the
// garbage collector cannot free memory the device may still touch. The
// memory must also never move. Go's heap does not move objects, and a
// slice handed to RegMR escapes to the heap when it is compiled, so any
// ordinary []byte qualifies; memory obtained some other way (a pointer
// converted with unsafe into a goroutine's stack) does not. Buffer memory
// (AllocBuffer) is outside the heap altogether and shares no page with
// Go objects, which matters for fork protection (ForkSafety).
//
// Memory mapped by other means (syscall.Mmap) must stay mapped and
// readable while it is registered, as the device may read it: a send's
// inline data from inside a registered MR (one without AccessOnDemand,
// named by its LKey) is copied by some providers (mlx5) without the
// fault net that turns an unreadable inline address into an error, so
// unmapping registered memory and posting from it then crashes the
// program.
//
// The accessors and Close are safe for concurrent use. Rereg changes the
// keys: as in the verbs, it must not run while work requests that name
// the region are posted or outstanding, or while other goroutines read
// LKey or RKey.
type MR struct {
	// pv holds the keys, written at creation and by Rereg only. It is
	// the first field: a bind's MR is seen by the provider as a
	// *provider.MR (TestProviderViews).
	pv provider.MR
	resource
	mu sync.Mutex // serialises Rereg and destroy
	st atomic.Pointer[mrState]
}

// mrState is the rest of what Rereg changes, replaced as a whole so
// readers never see half of it.
type mrState struct {
	pd     *PD
	buf    []byte  // the registered memory; nil after Close
	buffer *Buffer // the Buffer buf lies in, if any (counted use)
	addr   uint64
	length uint64
	access Access // as passed to the kernel
	forked bool   // the range is marked DONTFORK (pinned)
}

// knownAccess is every access bit this package knows.
const knownAccess = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic |
	AccessMWBind | AccessZeroBased | AccessOnDemand | AccessHugeTLB |
	AccessFlushGlobal | AccessFlushPersistent | AccessRelaxedOrdering

// optionalAccess are the bits a kernel without optional MR access
// support would reject instead of ignore (IB_UVERBS_ACCESS_OPTIONAL_RANGE).
const optionalAccess = Access(abi.IB_UVERBS_ACCESS_OPTIONAL_RANGE)

const flushAccess = AccessFlushGlobal | AccessFlushPersistent

// mrAccess checks access for a memory region before any kernel call and
// returns the bits to pass: the optional ones are dropped when the kernel
// does not report IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS, as
// libibverbs does.
func mrAccess(op string, access Access, coreSupport uint64) (Access, error) {
	if unknown := access &^ knownAccess; unknown != 0 {
		return 0, fmt.Errorf("uverbs %s: unknown access bits %#x in %v: %w", op, uint32(unknown), access, errInvalid)
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return 0, fmt.Errorf("uverbs %s: access %v: remote write and remote atomic access require AccessLocalWrite as well (InfiniBand verbs rule, checked by ib_check_mr_access too): %w", op, access, errInvalid)
	}
	if coreSupport&abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS == 0 {
		access &^= optionalAccess
	}
	return access, nil
}

// OptionalMRAccess reports whether the kernel accepts optional MR access
// bits such as AccessRelaxedOrdering (IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS,
// Linux 5.9). Without it RegMR drops those bits instead of failing.
func (c *Context) OptionalMRAccess() bool {
	if c == nil {
		return false
	}
	return c.coreSupport&abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS != 0
}

// RegMR registers buf with the device (ibv_reg_mr), at its own address
// (the I/O virtual address is the address of buf[0]). buf must not be
// empty and must not move: Go heap memory, a Buffer's, or another mapping
// that stays in place (see MR). It stays referenced by the MR until
// Close. If buf lies in a Buffer, that Buffer cannot be closed while the
// MR is open.
//
// access is checked first: unknown bits, and AccessRemoteWrite or
// AccessRemoteAtomic without AccessLocalWrite, are errors. Optional bits
// (AccessRelaxedOrdering) are dropped when the kernel cannot take them.
// AccessFlushGlobal and AccessFlushPersistent need Linux 6.2 and a device
// that advertises FLUSH; otherwise the error matches ErrNotSupported.
//
// Unless ForkSafety reports ForkUnneeded, the pages under buf are kept
// from child processes while registered.
//
// Registering pins buf's pages, which the kernel counts against the
// process's locked-memory limit (RLIMIT_MEMLOCK) unless it has
// CAP_IPC_LOCK. A registration past the limit fails with ENOMEM, and
// every one with EPERM when the limit is 0; the error then says the
// limit in force, the bytes asked and how to raise the limit, and still
// matches the errno (errors.Is(err, syscall.ENOMEM)).
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if pd == nil {
		return nil, fmt.Errorf("uverbs RegMR: nil PD: %w", errInvalid)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("uverbs RegMR: empty buffer: %w", errInvalid)
	}
	kaccess, err := mrAccess("RegMR", access, pd.ctx.coreSupport)
	if err != nil {
		return nil, err
	}
	// Counted first, so a concurrent PD.Close sees the user.
	pd.use()
	if err := pd.alive("RegMR"); err != nil {
		pd.release()
		return nil, err
	}
	c := pd.ctx
	if err := c.checkMRSize("RegMR", len(buf)); err != nil {
		pd.release()
		return nil, err
	}
	st := &mrState{pd: pd, buf: buf[:len(buf):len(buf)], addr: uint64(sys.PointerTo(buf)), length: uint64(len(buf)), access: kaccess}
	if err := st.hold(); err != nil {
		pd.release()
		return nil, err
	}
	var resp abi.RegMRResp
	req := abi.RegMR{
		Response:    sys.PointerTo(abi.Bytes(&resp)),
		Start:       st.addr,
		Length:      st.length,
		HCAVA:       st.addr,
		PDHandle:    pd.handle,
		AccessFlags: uint32(kaccess),
	}
	err = c.regMRCommand(&req, &resp)
	runtime.KeepAlive(buf)
	if err != nil {
		st.unhold()
		pd.release()
		return nil, pinError(c.flushError("uverbs RegMR: REG_MR", kaccess, err), kaccess, st.length)
	}
	mr := &MR{pv: provider.MR{LKey: resp.LKey, RKey: resp.RKey}}
	mr.resource = resource{ctx: c, kind: "MR", handle: resp.MRHandle, closer: mr.destroy}
	mr.st.Store(st)
	c.track(&mr.resource)
	mr.addSpan()
	c.log.Debug("uverbs: MR registered", "handle", resp.MRHandle, "len", st.length, "access", kaccess, "lkey", mr.pv.LKey, "rkey", mr.pv.RKey)
	return mr, nil
}

// addSpan puts the registered MR in the provider context's table of
// memory inline copies may read without a fault net (provider.Spans):
// its memory stays mapped while it is registered, as RegMR and Rereg
// document, except with on-demand paging, which is left out.
func (mr *MR) addSpan() {
	if st := mr.st.Load(); st.access&AccessOnDemand == 0 {
		mr.ctx.pc.Spans().Add(mr.pv.LKey, st.addr, st.length)
	}
}

// regMRCommand runs REG_MR, with the provider's driver data when it has
// some (siw's stag key: its kernel refuses a registration without).
func (c *Context) regMRCommand(req *abi.RegMR, resp *abi.RegMRResp) error {
	d, ok := c.prov.(provider.MRDriverData)
	if !ok {
		return c.fd.Command("uverbs RegMR: REG_MR", abi.IB_USER_VERBS_CMD_REG_MR, abi.Bytes(req), abi.Bytes(resp))
	}
	drvIn, drvOutLen := d.RegMRDriverData()
	out := make([]byte, len(abi.Bytes(resp))+drvOutLen)
	req.Response = sys.PointerTo(out)
	in := append(append([]byte(nil), abi.Bytes(req)...), drvIn...)
	err := c.fd.Command("uverbs RegMR: REG_MR", abi.IB_USER_VERBS_CMD_REG_MR, in, out)
	copy(abi.Bytes(resp), out)
	return err
}

// checkMRSize checks a registration's length against the device's
// MaxMRSize, when the device could be asked.
func (c *Context) checkMRSize(op string, n int) error {
	if a, err := c.deviceAttr(); err == nil && a.MaxMRSize > 0 && uint64(n) > a.MaxMRSize {
		return fmt.Errorf("uverbs %s: %d bytes: more than the %d %s registers at once: %w", op, n, a.MaxMRSize, c.dev.Name, errInvalid)
	}
	return nil
}

// RegBuffer registers all of b (RegMR of b.Bytes()).
func (pd *PD) RegBuffer(b *Buffer, access Access) (*MR, error) {
	if pd == nil {
		return nil, errNil("RegBuffer", "PD")
	}
	if b == nil {
		return nil, fmt.Errorf("uverbs RegBuffer: nil Buffer: %w", errInvalid)
	}
	mem := b.Bytes()
	if mem == nil {
		return nil, fmt.Errorf("uverbs RegBuffer: Buffer: %w", ErrClosed)
	}
	return pd.RegMR(mem, access)
}

// hold takes what the registration of st.buf needs besides the kernel
// object: a use of the Buffer it lies in, and fork protection. unhold
// gives them back.
func (st *mrState) hold() error {
	st.buffer = buffers.use(st.addr, st.length)
	if st.access&AccessOnDemand == 0 && ForkSafety() == ForkDontFork {
		if err := pinned.protect(st.addr, st.length); err != nil {
			st.buffer.release()
			st.buffer = nil
			return err
		}
		st.forked = true
	}
	return nil
}

// unhold gives back what hold took.
func (st *mrState) unhold() error {
	st.buffer.release()
	if st.forked {
		return pinned.release(st.addr, st.length)
	}
	return nil
}

// flushError makes the kernel's refusal of flush access bits say why:
// Linux 6.1 and older do not know them (EINVAL), a device may not
// support FLUSH, and rxe takes AccessFlushPersistent only on persistent
// memory.
func (c *Context) flushError(op string, access Access, err error) error {
	if access&flushAccess == 0 {
		return err
	}
	caps, qerr := c.capsEx()
	if qerr != nil {
		return err
	}
	var missing []string
	if access&AccessFlushGlobal != 0 && caps&abi.IB_UVERBS_DEVICE_FLUSH_GLOBAL == 0 {
		missing = append(missing, "FLUSH_GLOBAL")
	}
	if access&AccessFlushPersistent != 0 && caps&abi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT == 0 {
		missing = append(missing, "FLUSH_PERSISTENT")
	}
	if len(missing) > 0 {
		return &featureError{
			msg: fmt.Sprintf("%s: flush access (%s): not supported by %s (RDMA FLUSH needs Linux 6.2 and a device that advertises it)",
				op, strings.Join(missing, ", "), c.dev.Name),
			err: err,
		}
	}
	if access&AccessFlushPersistent != 0 && errors.Is(err, sys.ErrInvalid) {
		return fmt.Errorf("%w (AccessFlushPersistent: the device may accept it only on persistent memory, such as a DAX mapping of pmem)", err)
	}
	return err
}

// pinError explains a registration of length bytes that the kernel
// refused with ENOMEM, or EPERM at a zero limit, with the locked-memory
// limit (RLIMIT_MEMLOCK) in force and how to raise it (*sys.MemlockError).
// An on-demand paging region pins nothing, so its error stays as it is.
func pinError(err error, access Access, length uint64) error {
	if access&AccessOnDemand != 0 {
		return err
	}
	return sys.Memlock(err, length)
}

// featureError is a kernel refusal that means "not supported": it matches
// ErrNotSupported and, through err, the errno.
type featureError struct {
	msg string
	err error
}

func (e *featureError) Error() string        { return e.msg + ": " + e.err.Error() }
func (e *featureError) Unwrap() error        { return e.err }
func (e *featureError) Is(target error) bool { return target == ErrNotSupported }

// destroy deregisters the MR (UVERBS_METHOD_MR_DESTROY) and gives back
// its PD, Buffer and fork protection.
func (mr *MR) destroy() error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	// Out of the inline copies' table first: once MR_DESTROY runs, the
	// memory may go (a failed destroy leaves it out: posts from it keep
	// the fault net).
	mr.ctx.pc.Spans().Remove(mr.pv.LKey)
	m := sys.NewMethod("uverbs MR.Close: MR_DESTROY", abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY)
	m.Handle(abi.UVERBS_ATTR_DESTROY_MR_HANDLE, mr.handle)
	if err := m.Exec(mr.ctx.fd, mr.ctx.driverID); err != nil {
		return err
	}
	st := mr.st.Load()
	err := st.unhold()
	st.pd.release()
	done := *st
	done.buf, done.buffer, done.forked = nil, nil, false
	mr.st.Store(&done)
	return err
}

// Close deregisters the memory region (ibv_dereg_mr) and drops its
// reference to the memory. A second Close returns ErrClosed.
func (mr *MR) Close() error {
	if mr == nil {
		return errNil("MR.Close", "MR")
	}
	return mr.closeAs("MR")
}

// The accessors return zero values for a nil MR.

// LKey is the key local work requests use to name the region.
func (mr *MR) LKey() uint32 {
	if mr == nil {
		return 0
	}
	return mr.pv.LKey
}

// RKey is the key remote peers use to access the region.
func (mr *MR) RKey() uint32 {
	if mr == nil {
		return 0
	}
	return mr.pv.RKey
}

// state is the MR's registration, the zero one for a nil MR.
func (mr *MR) state() *mrState {
	if mr == nil {
		return &mrState{}
	}
	return mr.st.Load()
}

// Addr is the address of the registered memory, which is also its I/O
// virtual address: remote peers use it with RKey.
func (mr *MR) Addr() uint64 { return mr.state().addr }

// Len is the length of the registered memory in bytes.
func (mr *MR) Len() int { return int(mr.state().length) }

// Access is the access the region was registered with, as passed to the
// kernel (optional bits the kernel cannot take are dropped).
func (mr *MR) Access() Access { return mr.state().access }

// Bytes is the registered memory, or nil after Close.
func (mr *MR) Bytes() []byte { return mr.state().buf }

// PD is the protection domain the region belongs to.
func (mr *MR) PD() *PD { return mr.state().pd }

// ReregFlags select what MR.Rereg changes (ibv_rereg_mr_flags).
type ReregFlags uint32

const (
	// ReregTranslation registers other memory in place of the old.
	ReregTranslation ReregFlags = 1 << 0
	// ReregPD moves the region to another protection domain.
	ReregPD ReregFlags = 1 << 1
	// ReregAccess changes the access rights.
	ReregAccess ReregFlags = 1 << 2

	reregAll = ReregTranslation | ReregPD | ReregAccess
)

func (f ReregFlags) String() string {
	return flagString(uint64(f), []string{"CHANGE_TRANSLATION", "CHANGE_PD", "CHANGE_ACCESS"})
}

// Rereg changes a registered region in place (ibv_rereg_mr), keeping its
// handle: with ReregTranslation it registers buf instead of the old
// memory, with ReregPD it moves to pd, with ReregAccess it takes access.
// Arguments a flag does not ask for must be zero (nil pd, nil buf, access
// 0). The keys may change; LKey and RKey return the new ones afterwards.
//
// Validation errors leave the region as it was. If the kernel fails the
// call, the region may be unusable (the verbs say so): Close it. Drivers
// support some changes only, and refuse the others with an error matching
// ErrNotSupported: rxe takes ReregPD and ReregAccess on Linux 6.12 but
// not ReregTranslation, and on Linux 6.1 it takes no change at all. A
// new translation refused for the locked-memory limit says so, as
// RegMR's does.
func (mr *MR) Rereg(flags ReregFlags, pd *PD, buf []byte, access Access) error {
	if mr == nil {
		return errNil("MR.Rereg", "MR")
	}
	if flags == 0 {
		return fmt.Errorf("uverbs MR.Rereg: no change requested: %w", errInvalid)
	}
	if flags&^reregAll != 0 {
		return fmt.Errorf("uverbs MR.Rereg: unknown flags %v: %w", flags, errInvalid)
	}
	if flags&ReregTranslation != 0 && len(buf) == 0 {
		return fmt.Errorf("uverbs MR.Rereg: ReregTranslation with an empty buffer: %w", errInvalid)
	}
	if flags&ReregTranslation == 0 && buf != nil {
		return fmt.Errorf("uverbs MR.Rereg: a buffer given without ReregTranslation: %w", errInvalid)
	}
	if flags&ReregPD != 0 && pd == nil {
		return fmt.Errorf("uverbs MR.Rereg: ReregPD with a nil PD: %w", errInvalid)
	}
	if flags&ReregPD == 0 && pd != nil {
		return fmt.Errorf("uverbs MR.Rereg: a PD given without ReregPD: %w", errInvalid)
	}
	if flags&ReregAccess == 0 && access != 0 {
		return fmt.Errorf("uverbs MR.Rereg: access %v given without ReregAccess: %w", access, errInvalid)
	}
	c := mr.ctx
	var kaccess Access
	if flags&ReregAccess != 0 {
		var err error
		if kaccess, err = mrAccess("MR.Rereg", access, c.coreSupport); err != nil {
			return err
		}
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if err := mr.alive("MR.Rereg"); err != nil {
		return err
	}
	old := mr.st.Load()
	next := *old
	if flags&ReregAccess != 0 {
		next.access = kaccess
	}
	if flags&ReregPD != 0 {
		pd.use()
		if err := pd.usable("MR.Rereg", c); err != nil {
			pd.release()
			return err
		}
		next.pd = pd
	}
	if flags&ReregTranslation != 0 {
		if err := c.checkMRSize("MR.Rereg", len(buf)); err != nil {
			if flags&ReregPD != 0 {
				pd.release()
			}
			return err
		}
		next.buf, next.addr, next.length = buf[:len(buf):len(buf)], uint64(sys.PointerTo(buf)), uint64(len(buf))
		next.buffer, next.forked = nil, false
		if err := next.hold(); err != nil {
			if flags&ReregPD != 0 {
				pd.release()
			}
			return err
		}
	}
	c.pc.Spans().Remove(mr.pv.LKey) // back after the command, with the keys then in force
	var resp abi.ReregMRResp
	req := abi.ReregMR{
		Response:    sys.PointerTo(abi.Bytes(&resp)),
		MRHandle:    mr.handle,
		Flags:       uint32(flags),
		Start:       next.addr,
		Length:      next.length,
		HCAVA:       next.addr,
		PDHandle:    next.pd.handle,
		AccessFlags: uint32(next.access),
	}
	err := c.fd.Command("uverbs MR.Rereg: REREG_MR", abi.IB_USER_VERBS_CMD_REREG_MR, abi.Bytes(&req), abi.Bytes(&resp))
	runtime.KeepAlive(buf)
	if err != nil {
		mr.addSpan() // the region as it was (mr.st is still old)
		if flags&ReregTranslation != 0 {
			next.unhold()
		}
		if flags&ReregPD != 0 {
			pd.release()
		}
		if flags&ReregAccess != 0 {
			err = c.flushError("uverbs MR.Rereg: REREG_MR", kaccess, err)
		}
		if flags&ReregTranslation != 0 {
			err = pinError(err, next.access, next.length)
		}
		if errors.Is(err, ErrNotSupported) {
			var fe *featureError
			if !errors.As(err, &fe) {
				err = &featureError{msg: fmt.Sprintf("uverbs MR.Rereg: %v: not supported by %s (driver %s)", flags, c.dev.Name, c.prov.Name()), err: err}
			}
		}
		return err
	}
	mr.pv.LKey, mr.pv.RKey = resp.LKey, resp.RKey
	mr.st.Store(&next)
	mr.addSpan()
	if flags&ReregPD != 0 {
		old.pd.release()
	}
	if flags&ReregTranslation != 0 {
		return old.unhold()
	}
	return nil
}
