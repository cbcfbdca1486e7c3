package mlx5

import "github.com/purerdma/rdma/mmio"

// Writer is how the queues publish to the device: doorbell records in host
// memory, and doorbell and BlueFlame stores to the UAR page. Device is the
// real one; tests substitute a recorder that checks the order.
type Writer interface {
	// StoreUint32BE writes a doorbell record word: one 4-byte big-endian
	// store, ordered after every earlier store (mmio.StoreUint32BE).
	StoreUint32BE(b []byte, off int, v uint32)
	// WriteBarrier orders every earlier store, to any memory type, before
	// every later one and flushes write-combining buffers
	// (mmio.WriteBarrier: rdma-core's mmio_wc_start and mmio_flush_writes).
	WriteBarrier()
	// StoreUint64BE is the 8-byte doorbell store to a UAR register.
	StoreUint64BE(b []byte, off int, v uint64)
	// Copy64 copies one 64-byte block to a BlueFlame buffer; false if dst
	// is not 64-byte aligned (nothing written).
	Copy64(dst []byte, src *[64]byte) bool
}

// Device is the Writer for a real device: the mmio package's stores and
// barriers, written in assembly.
type Device struct{}

// StoreUint32BE is mmio.StoreUint32BE.
func (Device) StoreUint32BE(b []byte, off int, v uint32) { mmio.StoreUint32BE(b, off, v) }

// WriteBarrier is mmio.WriteBarrier.
func (Device) WriteBarrier() { mmio.WriteBarrier() }

// StoreUint64BE is mmio.StoreUint64BE.
func (Device) StoreUint64BE(b []byte, off int, v uint64) { mmio.StoreUint64BE(b, off, v) }

// Copy64 is mmio.Copy64.
func (Device) Copy64(dst []byte, src *[64]byte) bool { return mmio.Copy64(dst, src) }

// BlueFlame is one BlueFlame register (bfreg) of a UAR page: the doorbell
// register a QP rings, bf_reg_size bytes at UAR page + 0x800 + k *
// bf_reg_size, used as two halves that alternate after each ring (mlx5.c
// mlx5_set_context: buf_size = bf_reg_size / 2; qp.c post_send_db: offset
// ^= buf_size). A register without BlueFlame (bfreg 0 of a static UAR)
// takes only the 8-byte doorbell at the current half.
//
// A BlueFlame is not safe for concurrent use: a register shared by several
// QPs (libmlx5's medium-latency bfregs) needs the caller's lock around
// Ring.
type BlueFlame struct {
	reg       []byte // the whole register, 2*half bytes
	half      int
	offset    int
	blueFlame bool
	w         Writer
}

// NewBlueFlame wraps the register reg (bf_reg_size bytes of the mapped UAR
// page). canBF says whether whole WQEs may be copied to it (false for a
// doorbell-only register). w is Device{} outside tests.
func NewBlueFlame(reg []byte, canBF bool, w Writer) (*BlueFlame, error) {
	if len(reg) < 2*SendWQEBB || len(reg)%(2*SendWQEBB) != 0 {
		return nil, invalid("BlueFlame register of %d bytes", len(reg))
	}
	return &BlueFlame{reg: reg, half: len(reg) / 2, blueFlame: canBF, w: w}, nil
}

// Offset is the byte offset in the register of the half the next ring
// writes: 0 or bf_reg_size/2.
func (bf *BlueFlame) Offset() int { return bf.offset }
