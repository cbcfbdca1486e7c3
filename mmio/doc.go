// Package mmio will hold the memory-ordering and doorbell primitives the
// provider fast paths need: release/acquire loads and stores on mapped
// queue memory, write barriers, 64-bit doorbell stores and 64-byte
// write-combining copies. Nothing is implemented yet (issue 4).
package mmio
