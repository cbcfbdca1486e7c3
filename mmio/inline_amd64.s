#include "textflag.h"
#include "copy_amd64.h"

// INLINEARGS(size) checks RecordInlineCopy's arguments for a block of
// size bytes, jumping to refuse when dst is not 64-byte aligned or the
// data does not fit (off and n taken unsigned: a negative one is huge),
// and loads the copy's: DI = blk+off, SI = src, CX = n.
#define INLINEARGS(size) \
	MOVQ	dst+16(FP), AX \
	TESTQ	$63, AX \
	JNE	refuse \
	MOVQ	off+32(FP), DX \
	CMPQ	DX, size \
	JA	refuse \
	MOVQ	n+48(FP), CX \
	MOVQ	size, BX \
	SUBQ	DX, BX \
	CMPQ	CX, BX \
	JA	refuse \
	MOVQ	blk+24(FP), DI \
	ADDQ	DX, DI \
	MOVQ	src+40(FP), SI

// INLINERECORD loads RecordInlineCopy's record arguments (AX = rec,
// BX = v, DI = dst, SI = blk) and stores the record (RECORD).
#define INLINERECORD \
	MOVQ	rec+0(FP), AX \
	MOVL	v+8(FP), BX \
	MOVQ	dst+16(FP), DI \
	MOVQ	blk+24(FP), SI \
	RECORD

// INLINEDONE ends RecordInlineCopy after its BlueFlame blocks: SFENCE
// and true, and at refuse (INLINEARGS's jumps) false.
#define INLINEDONE \
	SFENCE \
	MOVB	$1, ret+56(FP) \
	RET \
refuse: \
	MOVB	$0, ret+56(FP) \
	RET

// INLINECOPY copies CX bytes from SI to DI, reading and writing exactly
// those bytes, and jumps to done: 16 to 32 bytes as the first and the
// last 16 (overlapping), more in 16-byte steps while more than 16 are
// left and then the last 16, fewer than 16 as the first and the last 8,
// 4 or 1 (and for 3 the middle byte). Clobbers AX, BX, CX, SI, DI, X0,
// X1.
#define INLINECOPY(done) \
	CMPQ	CX, $16 \
	JB	small \
	CMPQ	CX, $32 \
	JA	big \
	MOVUPS	(SI), X0 \
	MOVUPS	-16(SI)(CX*1), X1 \
	MOVUPS	X0, (DI) \
	MOVUPS	X1, -16(DI)(CX*1) \
	JMP	done \
big: \
	MOVUPS	(SI), X0 \
	MOVUPS	X0, (DI) \
	ADDQ	$16, SI \
	ADDQ	$16, DI \
	SUBQ	$16, CX \
	CMPQ	CX, $16 \
	JA	big \
	MOVUPS	-16(SI)(CX*1), X0 \
	MOVUPS	X0, -16(DI)(CX*1) \
	JMP	done \
small: \
	CMPQ	CX, $8 \
	JB	lt8 \
	MOVQ	(SI), AX \
	MOVQ	-8(SI)(CX*1), BX \
	MOVQ	AX, (DI) \
	MOVQ	BX, -8(DI)(CX*1) \
	JMP	done \
lt8: \
	CMPQ	CX, $4 \
	JB	lt4 \
	MOVL	(SI), AX \
	MOVL	-4(SI)(CX*1), BX \
	MOVL	AX, (DI) \
	MOVL	BX, -4(DI)(CX*1) \
	JMP	done \
lt4: \
	TESTQ	CX, CX \
	JEQ	done \
	MOVB	(SI), AX \
	MOVB	-1(SI)(CX*1), BX \
	MOVB	AX, (DI) \
	MOVB	BX, -1(DI)(CX*1) \
	CMPQ	CX, $3 \
	JNE	done \
	MOVB	1(SI), AX \
	MOVB	AX, 1(DI)

// func RecordInlineCopy64(rec *uint32, v uint32, dst, blk *[64]byte, off int, src uint64, n int) bool
// The inline data first (ordinary memory: the work request in the
// queue), then recordCopy64's instructions: storeUint32BE, SFENCE, the
// 64-byte copy to dst, SFENCE.
TEXT ·RecordInlineCopy64(SB), NOSPLIT|NOFRAME, $0-57
	INLINEARGS($64)
	INLINECOPY(record)
record:
	INLINERECORD
	BLOCK64(0)
	INLINEDONE

// func RecordInlineCopy128(rec *uint32, v uint32, dst, blk *[128]byte, off int, src uint64, n int) bool
// RecordInlineCopy64 of two blocks, as recordCopy128: one SFENCE after
// both.
TEXT ·RecordInlineCopy128(SB), NOSPLIT|NOFRAME, $0-57
	INLINEARGS($128)
	INLINECOPY(record)
record:
	INLINERECORD
	BLOCK64(0)
	BLOCK64(64)
	INLINEDONE
