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
// device (the Contexts this package opens itself are in contexts.go).

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
