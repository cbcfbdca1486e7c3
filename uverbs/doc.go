// Package uverbs is RDMA verbs for Go over the kernel's raw uverbs ABI: the
// /dev/infiniband/uverbsN character devices that libibverbs drives. It
// uses neither libibverbs nor cgo; every request is encoded in Go and
// handed to the kernel directly.
//
// The current surface is device discovery: Devices and DeviceByName read
// /sys/class/infiniband_verbs and /sys/class/infiniband the way
// libibverbs' ibv_get_device_list does, and describe each device and its
// ports. Opening a device and the verbs on it (protection domains, memory
// regions, completion queues, queue pairs) come next, as methods grown
// from Device.
//
// Devices and DeviceByName read sysfs afresh on each call and may be
// called from any goroutine. Device and Port are plain values.
package uverbs
