#include "textflag.h"

// func Cycles() uint64
TEXT ·Cycles(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, ret+0(FP)
	RET
