#include "textflag.h"
#include "copy_amd64.h"

// What each sequence guarantees, and why these instructions: doc.go.

// func WriteBarrier()
TEXT ·WriteBarrier(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func ReadBarrier()
TEXT ·ReadBarrier(SB), NOSPLIT|NOFRAME, $0-0
	LFENCE
	RET

// func storeUint32BE(p unsafe.Pointer, v uint32)
// A plain MOV: x86 keeps stores to write-back and uncached memory in
// program order and never moves a store before an earlier load, so the
// store is a release; unlike XCHG it does not read the word.
TEXT ·storeUint32BE(SB), NOSPLIT|NOFRAME, $0-12
	MOVQ	p+0(FP), AX
	MOVL	v+8(FP), BX
	BSWAPL	BX
	MOVL	BX, (AX)
	RET

// func storeUint64BE(p unsafe.Pointer, v uint64)
TEXT ·storeUint64BE(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	v+8(FP), BX
	BSWAPQ	BX
	MOVQ	BX, (AX)
	RET

// func copy64(dst, src unsafe.Pointer)
// dst is 64-byte aligned (Copy64 checks), src may be anywhere: four
// unaligned 16-byte loads, four aligned 16-byte stores in ascending
// order, then SFENCE to flush the write-combining buffer.
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	BLOCK64(0)
	SFENCE
	RET

// func doorbell(rec unsafe.Pointer, v uint32, reg unsafe.Pointer, w uint64)
// storeUint32BE, WriteBarrier, storeUint64BE, WriteBarrier.
TEXT ·doorbell(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ	rec+0(FP), AX
	MOVL	v+8(FP), BX
	MOVQ	reg+16(FP), CX
	MOVQ	w+24(FP), DX
	BSWAPL	BX
	MOVL	BX, (AX)
	SFENCE
	BSWAPQ	DX
	MOVQ	DX, (CX)
	SFENCE
	RET

// func recordCopy64(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)
// storeUint32BE, WriteBarrier, copy64 (which ends with SFENCE).
TEXT ·recordCopy64(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ	rec+0(FP), AX
	MOVL	v+8(FP), BX
	MOVQ	dst+16(FP), DI
	MOVQ	src+24(FP), SI
	RECORD
	BLOCK64(0)
	SFENCE
	RET

// func recordCopy128(rec unsafe.Pointer, v uint32, dst, src unsafe.Pointer)
// storeUint32BE, WriteBarrier, copy64 of two consecutive 64-byte blocks
// (one SFENCE after both).
TEXT ·recordCopy128(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ	rec+0(FP), AX
	MOVL	v+8(FP), BX
	MOVQ	dst+16(FP), DI
	MOVQ	src+24(FP), SI
	RECORD
	BLOCK64(0)
	BLOCK64(64)
	SFENCE
	RET

// func flushLines(p unsafe.Pointer, n uintptr)
// CLFLUSH is in every x86-64 CPU; MFENCE orders the flushes before
// later stores and loads (CLFLUSH is not ordered against other
// CLFLUSHes' completion without it).
TEXT ·flushLines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	n+8(FP), CX
	ADDQ	AX, CX
	ANDQ	$~63, AX
loop:
	CMPQ	AX, CX
	JAE	done
	CLFLUSH	(AX)
	ADDQ	$64, AX
	JMP	loop
done:
	MFENCE
	RET
