package uverbs

import (
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/evfd"
	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs/internal/provider"
)

// Context is an open RDMA device (ibv_context): the command file
// descriptor and what the kernel reported when it was opened.
//
// A Context is safe for concurrent use and is the expensive thing to
// share: open it once per device and let goroutines create their own
// objects on it. Close destroys every object still open on it, newest
// first, then releases the device.
type Context struct {
	dev            Device
	fd             *sys.FD
	driverID       uint32
	numCompVectors int
	coreSupport    uint64
	async          *evfd.File
	prov           provider.Provider
	log            *slog.Logger
	objects        registry
	pc             *provider.Context // the provider layer's: the QP table, commands for providers
	closed         atomic.Bool
	userHandles    atomic.Uint64
	byHandle       sync.Map // user handle -> *CQ, *QP or *SRQ, for events
	caps           deviceCaps
	ports          sync.Map // port number -> portRoute, for the GRH check (grhcheck.go)
}

// OpenOptions tune Open. The zero value is fine.
type OpenOptions struct {
	// Logger receives debug messages about kernel calls; nil is silent.
	Logger *slog.Logger
}

// Open opens the device with the given name (e.g. "rxe0").
func Open(name string, opts *OpenOptions) (*Context, error) {
	d, err := DeviceByName(name)
	if err != nil {
		return nil, err
	}
	return d.Open(opts)
}

// Open opens the device (ibv_open_device). A device that was removed
// since it was listed fails with an error matching os.ErrNotExist.
func (d Device) Open(opts *OpenOptions) (*Context, error) {
	if opts == nil {
		opts = &OpenOptions{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if d.ABIVersion != abi.IB_USER_VERBS_ABI_VERSION {
		return nil, fmt.Errorf("uverbs Open %s: kernel uverbs ABI %d, this library speaks %d: %w",
			d.Name, d.ABIVersion, abi.IB_USER_VERBS_ABI_VERSION, ErrNotSupported)
	}
	driverID, err := uverbsDriverID(d.Name)
	if err != nil {
		return nil, fmt.Errorf("uverbs Open %s: %w", d.Name, err)
	}
	fd, err := sys.Open(d.DevPath)
	if err != nil {
		return nil, fmt.Errorf("uverbs Open %s: %w", d.Name, err)
	}
	c := &Context{dev: d, fd: fd, driverID: driverID, log: log.With("device", d.Name)}
	c.pc = provider.NewContext(fd, driverID)
	c.prov = newProvider(c)
	if err := c.getContext(); err != nil {
		fd.Close()
		return nil, err
	}
	if err := c.allocAsyncFD(); err != nil {
		c.prov.Close()
		fd.Close()
		return nil, err
	}
	c.log.Debug("uverbs: opened", "driver", c.prov.Name(), "driver_id", driverID, "comp_vectors", c.numCompVectors)
	return c, nil
}

// uverbsDriverID asks the kernel, over RDMA netlink, which driver id the
// device's uverbs ioctls carry.
func uverbsDriverID(name string) (uint32, error) {
	nl, err := rdmanl.Dial()
	if err != nil {
		return 0, err
	}
	defer nl.Close()
	// The kernel answers at once; a deadline turns a protocol mistake
	// into an error instead of a hang.
	nl.SetDeadline(time.Now().Add(5 * time.Second))
	devs, err := nl.Devices()
	if err != nil {
		return 0, err
	}
	for _, d := range devs {
		if d.Name == name {
			cd, err := nl.Chardev(d.Index, "uverbs")
			if err != nil {
				return 0, err
			}
			return cd.DriverID, nil
		}
	}
	return 0, fmt.Errorf("%s: %w", name, errDeviceGone)
}

// errDeviceGone: the device was listed but is gone (being removed). It
// matches fs.ErrNotExist, as DeviceByName's error for a device that is
// not there does.
var errDeviceGone error = deviceGoneError{}

type deviceGoneError struct{}

func (deviceGoneError) Error() string        { return "device removed" }
func (deviceGoneError) Is(target error) bool { return target == fs.ErrNotExist }

func (c *Context) getContext() error {
	var ncv uint32
	var core uint64
	m := sys.NewMethod("uverbs Open: GET_CONTEXT", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT)
	m.Out(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, abi.Bytes(&ncv))
	m.Out(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, abi.Bytes(&core))
	var drvOut []byte
	if in, outLen := c.prov.ContextDriverData(); in != nil || outLen > 0 {
		m.In(abi.UVERBS_ATTR_UHW_IN, in)
		drvOut = make([]byte, outLen)
		m.Out(abi.UVERBS_ATTR_UHW_OUT, drvOut)
	}
	if err := c.exec(m); err != nil {
		return err
	}
	if drvOut != nil {
		if err := c.prov.ContextCreated(drvOut); err != nil {
			return providerErr("Open", err)
		}
	}
	c.numCompVectors = int(ncv)
	c.coreSupport = core
	return nil
}

func (c *Context) allocAsyncFD() error {
	m := sys.NewMethod("uverbs Open: ASYNC_EVENT_ALLOC", abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC)
	h := m.NewHandle(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if err := c.exec(m); err != nil {
		return err
	}
	f, err := evfd.New(int(m.Result(h)), "uverbs Open: async event fd")
	if err != nil {
		return err
	}
	c.async = f
	return nil
}

// exec runs an ioctl method on the context's command fd.
func (c *Context) exec(m *sys.Method) error {
	if c.closed.Load() {
		return closedContext(m.Op())
	}
	return m.Exec(c.fd, c.driverID)
}

// Device is the device this context was opened on.
// A nil Context has the zero Device.
func (c *Context) Device() Device {
	if c == nil {
		return Device{}
	}
	return c.dev
}

// Provider names the purerdma provider that drives the device's queues
// ("rxe", "mlx5"), or "" when its driver has none: then CreateCQ,
// CreateQP and CreateSRQ fail with ErrNotSupported (docs/providers.md).
func (c *Context) Provider() string {
	if c == nil {
		return ""
	}
	if _, none := c.prov.(provider.Unsupported); none {
		return ""
	}
	return c.prov.Name()
}

// NumCompVectors is how many completion vectors the device has.
func (c *Context) NumCompVectors() int {
	if c == nil {
		return 0
	}
	return c.numCompVectors
}

// newUserHandle returns a value unique in this context for the kernel to
// hand back in events (comp channel, async events), bound to obj.
func (c *Context) newUserHandle(obj any) uint64 {
	h := c.userHandles.Add(1)
	c.byHandle.Store(h, obj)
	return h
}

// objectFor returns the object a user handle was bound to, or nil.
func (c *Context) objectFor(h uint64) any {
	obj, _ := c.byHandle.Load(h)
	return obj
}

// dropUserHandle forgets a destroyed object's handle.
func (c *Context) dropUserHandle(h uint64) { c.byHandle.Delete(h) }

// track registers a new kernel object so Close can destroy it.
func (c *Context) track(r *resource) { c.objects.add(r) }

func (c *Context) untrack(r *resource) { c.objects.remove(r) }

// Close destroys every object still open on the context, newest first,
// then the async event fd and the command fd. It runs once; later calls
// return ErrClosed. The first error is returned, after everything was
// tried.
func (c *Context) Close() error {
	if c == nil {
		return errNil("Context.Close", "Context")
	}
	if !c.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("uverbs Context.Close: %w", ErrClosed)
	}
	c.pc.SetClosed()
	var first error
	// Dependencies follow creation order, except where an object was tied
	// to an older one later (a window bound to a newer MR): retry until a
	// pass makes no progress.
	for {
		left := c.objects.newestFirst()
		progress := false
		var passErr error
		for _, r := range left {
			if err := r.close(); err != nil {
				passErr = err
				continue
			}
			progress = true
		}
		if passErr == nil || !progress {
			if first == nil {
				first = passErr
			}
			break
		}
	}
	c.prov.Close()
	if err := c.async.Close(); err != nil && first == nil {
		first = err
	}
	if err := c.fd.Close(); err != nil && first == nil {
		first = err
	}
	return first
}
