package rdmacm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/uverbs"
)

// This file maps the device the kernel bound an ID to onto a uverbs
// device, and keeps the uverbs contexts this package opens itself.
//
// The choice: a QP, CQ or MR of an ID may live on any uverbs.Context of
// the ID's device. The kernel ties an rdma_cm ID to a device, not to a
// uverbs file, so the caller may pass a PD of its own Context to
// CreateQP; that Context is the caller's to close. For callers that do
// not want to open one, ID.Context (and CreateQP with a nil PD) share
// one Context per device inside this package: it is opened on first
// use, each ID that used it holds a reference until it is closed, and
// the Context closes when the last of them goes, destroying whatever was
// still open on it. Objects that must outlive the IDs belong on a
// Context the caller opened.

// deviceKey is how the kernel names an ID's device: the node GUID and,
// from Linux 5.3, the device index.
type deviceKey struct {
	guid  uverbs.GUID
	index uint32
}

// found caches findDevice: reading sysfs for every bound ID cost a
// quarter of a connection's CPU time.
var found sync.Map // deviceKey -> uverbs.Device

// findDevice returns the uverbs device whose node GUID the kernel
// reported (as the __be64 it stores). When several devices share the
// GUID, the kernel's device index (from Linux 5.3) picks one.
func findDevice(rawGUID uint64, index uint32) (uverbs.Device, error) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], rawGUID)
	key := deviceKey{uverbs.GUID(binary.BigEndian.Uint64(b[:])), index}
	if d, ok := found.Load(key); ok {
		return d.(uverbs.Device), nil
	}
	d, err := scanDevices(key.guid, index)
	if err == nil {
		found.Store(key, d)
	}
	return d, err
}

func scanDevices(guid uverbs.GUID, index uint32) (uverbs.Device, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return uverbs.Device{}, err
	}
	var match []uverbs.Device
	for _, d := range devs {
		if d.NodeGUID == guid {
			match = append(match, d)
		}
	}
	switch {
	case len(match) == 0:
		return uverbs.Device{}, fmt.Errorf("no uverbs device has node GUID %v", guid)
	case len(match) == 1 || index == ^uint32(0):
		return match[0], nil
	}
	name, err := deviceNameByIndex(index)
	if err != nil {
		return uverbs.Device{}, err
	}
	for _, d := range match {
		if d.Name == name {
			return d, nil
		}
	}
	return uverbs.Device{}, fmt.Errorf("device index %d (%s) has no uverbs device with node GUID %v", index, name, guid)
}

func deviceNameByIndex(index uint32) (string, error) {
	nl, err := rdmanl.Dial()
	if err != nil {
		return "", err
	}
	defer nl.Close()
	nl.SetDeadline(time.Now().Add(5 * time.Second))
	devs, err := nl.Devices()
	if err != nil {
		return "", err
	}
	for _, d := range devs {
		if d.Index == index {
			return d.Name, nil
		}
	}
	return "", fmt.Errorf("no RDMA device has index %d", index)
}

// limits are the device attributes Connect and Accept need.
type limits struct {
	maxInitiatorDepth     uint8 // max_qp_init_rd_atom
	maxResponderResources uint8 // max_qp_rd_atom
}

// shared is a Context this package opened, with a default PD.
type shared struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	refs int
}

var devices struct {
	mu     sync.Mutex
	shared map[string]*shared
	limits map[uverbs.GUID]limits
}

// acquireShared returns the shared Context of dev, opening it on first
// use. Each call takes a reference that releaseShared gives back.
func acquireShared(dev uverbs.Device) (*shared, error) {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if s := devices.shared[dev.Name]; s != nil {
		s.refs++
		return s, nil
	}
	ctx, err := dev.Open(nil)
	if err != nil {
		return nil, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	s := &shared{ctx: ctx, pd: pd, refs: 1}
	if devices.shared == nil {
		devices.shared = map[string]*shared{}
	}
	devices.shared[dev.Name] = s
	return s, nil
}

// releaseShared drops a reference; the last one closes the Context and
// everything still open on it.
func releaseShared(dev string, s *shared) error {
	devices.mu.Lock()
	defer devices.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	if devices.shared[dev] == s {
		delete(devices.shared, dev)
	}
	return s.ctx.Close() // destroys the default PD too
}

// deviceLimits returns the read/atomic limits of dev, querying the
// device once per process.
func deviceLimits(dev uverbs.Device) (limits, error) {
	devices.mu.Lock()
	l, ok := devices.limits[dev.NodeGUID]
	s := devices.shared[dev.Name]
	devices.mu.Unlock()
	if ok {
		return l, nil
	}
	var attr uverbs.DeviceAttr
	var err error
	if s != nil {
		attr, err = s.ctx.QueryDevice()
	} else {
		var ctx *uverbs.Context
		if ctx, err = dev.Open(nil); err == nil {
			attr, err = ctx.QueryDevice()
			ctx.Close()
		}
	}
	if err != nil {
		return limits{}, err
	}
	l = limits{maxInitiatorDepth: uint8(min(attr.MaxQPInitRdAtom, 255)),
		maxResponderResources: uint8(min(attr.MaxQPRdAtom, 255))}
	devices.mu.Lock()
	if devices.limits == nil {
		devices.limits = map[uverbs.GUID]limits{}
	}
	devices.limits[dev.NodeGUID] = l
	devices.mu.Unlock()
	return l, nil
}

// bindDevice records the device and port QUERY_ADDR reported, the first
// time the kernel reports one.
func (id *ID) bindDevice(r *abi.UCMQueryAddrResp) error {
	if r.NodeGUID == 0 {
		return nil // not bound to a device (yet): a wildcard bind
	}
	id.mu.Lock()
	known := id.dev != nil
	id.mu.Unlock()
	if known {
		return nil
	}
	dev, err := findDevice(r.NodeGUID, r.IBDevIndex)
	if err != nil {
		return err
	}
	id.mu.Lock()
	if id.dev == nil {
		id.dev = &dev
		id.port = int(r.PortNum)
	}
	id.mu.Unlock()
	return nil
}
