#include "textflag.h"

// What each sequence guarantees, and why these instructions: doc.go.
// Barrier options (the CRm field): SY 15, ST 14, LD 13, OSH 3, OSHST 2.

// func WriteBarrier()
TEXT ·WriteBarrier(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$14	// DSB ST
	RET

// func ReadBarrier()
TEXT ·ReadBarrier(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$13	// DMB LD
	RET

// func storeUint32BE(p unsafe.Pointer, v uint32)
// DMB OSH orders every earlier load and store before the store, for the
// CPUs and for devices in the outer shareable domain: a release that
// DMA sees too. Then one 32-bit STR.
TEXT ·storeUint32BE(SB), NOSPLIT|NOFRAME, $0-12
	MOVD	p+0(FP), R0
	MOVWU	v+8(FP), R1
	REVW	R1, R1
	DMB	$3	// DMB OSH
	MOVW	R1, (R0)
	RET

// func storeUint64BE(p unsafe.Pointer, v uint64)
// DMB OSHST (Linux's dma_wmb, the barrier in its writeq): earlier stores
// reach a DMA-coherent device first. Then one 64-bit STR.
TEXT ·storeUint64BE(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	p+0(FP), R0
	MOVD	v+8(FP), R1
	REV	R1, R1
	DMB	$2	// DMB OSHST
	MOVD	R1, (R0)
	RET

// func copy64(dst, src unsafe.Pointer)
// Two LDP/STP pairs of 128-bit registers, ascending, then DSB ST: it
// waits until the stores have left the CPU, which is what pushes a
// write-combining buffer out (rdma-core's mmio_flush_writes on arm64).
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	FLDPQ	(R1), (F0, F1)
	FLDPQ	32(R1), (F2, F3)
	FSTPQ	(F0, F1), (R0)
	FSTPQ	(F2, F3), 32(R0)
	DSB	$14	// DSB ST
	RET

// func doorbell(rec unsafe.Pointer, v uint32, reg unsafe.Pointer, w uint64)
// storeUint32BE, WriteBarrier, storeUint64BE, WriteBarrier.
TEXT ·doorbell(SB), NOSPLIT|NOFRAME, $0-32
	MOVD	rec+0(FP), R0
	MOVWU	v+8(FP), R1
	MOVD	reg+16(FP), R2
	MOVD	w+24(FP), R3
	REVW	R1, R1
	DMB	$3	// DMB OSH
	MOVW	R1, (R0)
	DSB	$14	// DSB ST
	REV	R3, R3
	DMB	$2	// DMB OSHST
	MOVD	R3, (R2)
	DSB	$14	// DSB ST
	RET

// func recordCopy64(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)
// storeUint32BE, WriteBarrier, copy64 (which ends with DSB ST).
TEXT ·recordCopy64(SB), NOSPLIT|NOFRAME, $0-32
	MOVD	rec+0(FP), R2
	MOVWU	v+8(FP), R3
	MOVD	dst+16(FP), R0
	MOVD	src+24(FP), R1
	REVW	R3, R3
	DMB	$3	// DMB OSH
	MOVW	R3, (R2)
	DSB	$14	// DSB ST
	FLDPQ	(R1), (F0, F1)
	FLDPQ	32(R1), (F2, F3)
	FSTPQ	(F0, F1), (R0)
	FSTPQ	(F2, F3), 32(R0)
	DSB	$14	// DSB ST
	RET

// func recordCopy128(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)
// storeUint32BE, WriteBarrier, copy64 of two consecutive 64-byte blocks
// (one DSB ST after both).
TEXT ·recordCopy128(SB), NOSPLIT|NOFRAME, $0-32
	MOVD	rec+0(FP), R2
	MOVWU	v+8(FP), R3
	MOVD	dst+16(FP), R0
	MOVD	src+24(FP), R1
	REVW	R3, R3
	DMB	$3	// DMB OSH
	MOVW	R3, (R2)
	DSB	$14	// DSB ST
	FLDPQ	(R1), (F0, F1)
	FLDPQ	32(R1), (F2, F3)
	FSTPQ	(F0, F1), (R0)
	FSTPQ	(F2, F3), 32(R0)
	FLDPQ	64(R1), (F0, F1)
	FLDPQ	96(R1), (F2, F3)
	FSTPQ	(F0, F1), 64(R0)
	FSTPQ	(F2, F3), 96(R0)
	DSB	$14	// DSB ST
	RET

// func flushLines(p unsafe.Pointer, n uintptr)
// DC CVAC cleans a line to the point of coherency, 64 bytes a step
// (the line size of every arm64 core Go runs on today); DSB ISH waits
// for the cleans. Encoded as words: DC CVAC, X0 is 0xd50b7a20.
TEXT ·flushLines(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	p+0(FP), R0
	MOVD	n+8(FP), R1
	ADD	R0, R1, R1
	AND	$~63, R0, R0
loop:
	CMP	R1, R0
	BHS	done
	WORD	$0xd50b7a20
	ADD	$64, R0, R0
	B	loop
done:
	WORD	$0xd5033b9f
	RET
