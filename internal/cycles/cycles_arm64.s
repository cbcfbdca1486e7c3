#include "textflag.h"

// func Read() uint64
TEXT ·Read(SB), NOSPLIT, $0-8
	MRS	CNTVCT_EL0, R0
	MOVD	R0, ret+0(FP)
	RET
