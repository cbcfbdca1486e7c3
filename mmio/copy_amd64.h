// Macros of the amd64 assembly files (barrier_amd64.s, inline_amd64.s).

// BLOCK64(off) copies the 64 bytes at off(SI) to off(DI): four
// unaligned 16-byte loads, then four aligned 16-byte stores in ascending
// order (DI+off is 64-byte aligned: a BlueFlame buffer). Clobbers X0-X3.
#define BLOCK64(off) \
	MOVUPS	off+0(SI), X0 \
	MOVUPS	off+16(SI), X1 \
	MOVUPS	off+32(SI), X2 \
	MOVUPS	off+48(SI), X3 \
	MOVAPS	X0, off+0(DI) \
	MOVAPS	X1, off+16(DI) \
	MOVAPS	X2, off+32(DI) \
	MOVAPS	X3, off+48(DI)

// RECORD stores BX big-endian at (AX) (storeUint32BE) and then SFENCE
// (WriteBarrier): a doorbell record before what rings the device.
#define RECORD \
	BSWAPL	BX \
	MOVL	BX, (AX) \
	SFENCE
